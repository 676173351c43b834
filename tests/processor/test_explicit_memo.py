"""The explicit API's memo (af_otel/processor/explicit_memo.py): over drawn runs of `llm_call`
requests whose caller appends, edits messages in place, slips in non-finite floats or changes the
system and tools, the memo's request is the one `Request.from_dict` reads, `llm_call` mints
the very receipts and commits it mints without the memo and those a caller handing fresh copies
gets, and a `Conversation` of the same messages mints them too."""

from __future__ import annotations

import copy
import itertools
import math
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import Conversation, names
from af_otel.model import Request
from af_otel.processor import ReceiptSpanProcessor, explicit_memo, llm_call, run

_VALUE = st.integers(-3, 3) | st.booleans() | st.none() | st.sampled_from([1.0, -0.0, math.nan])
# Text, some of it saying ``null`` the way prose, a quote or a tool result's JSON does.
_TEXT = st.text(max_size=5) | st.sampled_from(["null", '{"a": null}', 'say "null"\\', "\\null"])


def _message(draw: st.DrawFn, index: int) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "assistant", "system"]))
    if draw(st.booleans()):
        return {"role": role, "content": draw(_TEXT)}
    part = {"type": "tool_call", "id": f"c{index}", "name": "f", "arguments": {"a": draw(_VALUE)}}
    return {"role": role, "parts": [part, {"type": "text", "content": "t"}]}


@st.composite
def calls(draw: st.DrawFn) -> list[Any]:
    """Steps of one run: each appends a message, edits one in place (the very dict the last call
    was handed), sets a system and tools, or changes nothing; then the call is made."""
    steps: list[Any] = [("append", _message(draw, 0))]
    for index in range(draw(st.integers(2, 6))):
        change = draw(st.sampled_from(["append", "append", "edit", "system", "same"]))
        if change == "append":
            steps.append(("append", _message(draw, index + 1)))
        elif change == "edit":
            steps.append(("edit", draw(st.integers(0, 99)), draw(_TEXT | _VALUE)))
        elif change == "system":
            steps.append(("system", draw(st.text(max_size=5))))
        steps.append(("call",))
    return steps


def requests_of(steps: list[Any]) -> Any:
    """Each request as the caller hands it over, made when it is made (later edits change the
    dicts the earlier ones held, as a caller's in-place edit does)."""
    messages: list[dict[str, Any]] = []
    request: dict[str, Any] = {"model": "m", "provider": "openai"}
    for step in steps:
        if step[0] == "append":
            messages.append(step[1])
        elif step[0] == "edit":
            target = messages[step[1] % len(messages)]
            if "content" in target:
                target["content"] = str(step[2])
            else:
                target["parts"][0]["arguments"]["a"] = step[2]
        elif step[0] == "system":
            request["system"] = step[1]
            request["tools"] = [{"name": "f", "parameters": {"type": "object"}}]
        else:
            yield {**request, "messages": list(messages)}


class _Run:
    explicit: explicit_memo.Explicit | None = None


@settings(max_examples=200, deadline=None)
@given(calls())
def test_the_memo_reads_what_from_dict_reads(drawn: list[Any]) -> None:
    """Each request read with the run's memo is `Request.from_dict` of it (repr tells NaN, -0.0
    and booleans apart), and its messages start with the memo's when it says so."""
    holder = _Run()
    for request in requests_of(copy.deepcopy(drawn)):
        found = explicit_memo.read(request, holder)
        assert found is not None
        assert repr(found.request) == repr(Request.from_dict(request))
        if found.prefix is not None:
            assert found.request.messages[: len(found.prefix)] == found.prefix


def test_an_appended_call_reuses_the_last_messages_and_an_edit_does_not() -> None:
    """Appending keeps last call's normalized messages, the very objects; an in-place edit of an
    earlier message is seen in the bytes."""
    holder = _Run()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "a"}]
    first = explicit_memo.read({"messages": list(messages)}, holder)
    messages.append({"role": "assistant", "content": "b"})
    second = explicit_memo.read({"messages": list(messages)}, holder)
    assert first is not None
    assert second is not None
    assert second.prefix is first.request.messages
    messages[0]["content"] = "z"
    messages.append({"role": "user", "content": "c"})
    third = explicit_memo.read({"messages": list(messages)}, holder)
    assert third is not None
    assert third.prefix is None
    assert third.request.messages[0]["parts"][0]["content"] == "z"


def _minted(
    steps: list[Any], patch: pytest.MonkeyPatch, form: str = "list", requests: Any = None
) -> list[Any]:
    """The af.* attributes and commit events of each call of the run ``steps`` make, the
    requests handed as the caller's own dicts (``list``), as deep copies made at each call
    (``copies``: nothing af_otel holds can be changed later), or as a `Conversation`
    (``conversation``: added to while the caller appends, built anew when it edits); the
    requests are ``requests`` (`requests_of` unless given) of the steps."""
    patch.setattr("af_otel.processor.run_table.secrets.token_hex", lambda n: "cd" * n)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(ReceiptSpanProcessor(SimpleSpanProcessor(exporter), content="none"))
    patch.setattr(trace, "get_tracer", provider.get_tracer)
    try:
        with run("memo"):
            conversation = Conversation()
            for made in (requests or requests_of)(copy.deepcopy(steps)):
                request = made
                if form == "copies":
                    request = copy.deepcopy(made)
                elif form == "conversation":
                    conversation = _conversation(conversation, made["messages"])
                    request = {**made, "messages": conversation}
                with llm_call(**request):
                    pass
    finally:
        provider.shutdown()
    out = []
    for span in exporter.get_finished_spans():
        attributes = dict(span.attributes or {})
        if names.EPOCH in attributes:
            events = [dict(e.attributes or {}) for e in span.events]
            out.append(({k: v for k, v in attributes.items() if k.startswith("af.")}, events))
    return out


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(drawn=calls())
def test_llm_call_mints_what_it_mints_without_the_memo(
    drawn: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through `llm_call`, a run read with the memo gets the receipts and commits (or the
    unreadable verdicts) a run read without it gets."""
    with monkeypatch.context() as patch:
        kept = _minted(drawn, patch)
    with monkeypatch.context() as patch:
        patch.setattr(explicit_memo, "read", lambda request, run: None)
        whole = _minted(drawn, patch)
    assert repr(kept) == repr(whole)
    assert len(kept) == sum(step[0] == "call" for step in drawn)


def test_a_null_turned_nan_in_place_is_not_taken_from_the_memo() -> None:
    """orjson writes NaN as null: a message whose null became NaN in place is read again."""
    holder = _Run()
    part = {"type": "tool_call", "id": "c", "name": "f", "arguments": {"a": None}}
    messages: list[dict[str, Any]] = [{"role": "assistant", "parts": [part]}]
    explicit_memo.read({"messages": list(messages)}, holder)
    part["arguments"]["a"] = math.nan
    messages.append({"role": "user", "content": "b"})
    request = {"messages": list(messages)}
    found = explicit_memo.read(request, holder)
    assert found is not None
    assert found.prefix is None
    assert math.isnan(found.request.messages[0]["parts"][0]["arguments"]["a"])


def test_null_in_the_text_and_none_values_keep_the_memo_and_a_nan_does_not() -> None:
    """``null`` inside strings (a word, a tool result's JSON, a key) and None values keep the
    memo; a None that became NaN in place (the same bytes) is seen, and a message holding a NaN
    leaves the memo unused."""
    holder = _Run()
    tool = {"type": "tool_call", "id": "c", "name": "f", "arguments": {"null": 'x "null" \\'}}
    messages: list[Any] = [
        {"role": "user", "content": 'Why is it null? {"a": null}'},
        {"role": "assistant", "parts": [tool]},
    ]
    found = [explicit_memo.read({"messages": list(messages)}, holder)]
    nested = {"a": None, "b": [1, None]}
    for message in (
        {"role": "user", "content": "null, again"},
        {"role": "assistant", "parts": [{**tool, "arguments": nested}]},
        {"role": "user", "content": "b"},
    ):
        messages.append(message)
        found.append(explicit_memo.read({"messages": list(messages)}, holder))
    for before, now in itertools.pairwise(found):
        assert before is not None
        assert now is not None
        assert now.prefix is before.request.messages
    assert repr(found[-1].request) == repr(Request.from_dict({"messages": messages}))  # type: ignore[union-attr]
    nested["b"][1] = math.nan  # type: ignore[index]
    messages.append({"role": "assistant", "content": "c"})
    turned = explicit_memo.read({"messages": list(messages)}, holder)
    assert turned is not None
    assert turned.prefix is None
    assert math.isnan(turned.request.messages[3]["parts"][0]["arguments"]["b"][1])
    messages.append({"role": "user", "content": "d"})
    after = explicit_memo.read({"messages": list(messages)}, holder)
    assert after is not None
    assert after.prefix is None


def _conversation(before: Conversation, messages: list[dict[str, Any]]) -> Conversation:
    """``before`` with the messages appended since, or built anew when an earlier one changed."""
    fresh = Conversation(messages)
    if repr(fresh[: len(before)]) == repr(tuple(before)):  # repr tells True from 1
        return before.add(*messages[len(before) :])
    return fresh


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(drawn=calls())
def test_a_request_changed_in_place_mints_what_fresh_copies_mint(
    drawn: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caller that edits the dicts it handed an earlier call (a message, a tool call's
    arguments) gets the receipts and commits of a caller handing a fresh copy every call."""
    with monkeypatch.context() as patch:
        kept = _minted(drawn, patch)
    with monkeypatch.context() as patch:
        fresh = _minted(drawn, patch, "copies")
    assert repr(kept) == repr(fresh)


def test_arguments_changed_in_place_are_fingerprinted_as_they_are_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tool call's arguments dict changed in place after the call that was handed it: the next
    call's receipt names the message as changed, with the hash of its new content."""
    part = {"type": "tool_call", "id": "c", "name": "f", "arguments": {"a": 1}}
    steps = [("append", {"role": "assistant", "parts": [part]}), ("call",)]
    steps += [("edit", 0, 2), ("append", {"role": "user", "content": "b"}), ("call",)]
    with monkeypatch.context() as patch:
        kept = _minted(steps, patch)
    with monkeypatch.context() as patch:
        fresh = _minted(steps, patch, "copies")
    assert kept[1][0][names.RECEIPT_MESSAGES_KEPT] == 0
    assert kept == fresh


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(drawn=calls())
def test_a_conversation_mints_what_a_list_mints(
    drawn: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Handed as a `Conversation` (the fast path), a run's calls get byte for byte the receipts
    and commits (or the unreadable verdicts) the same messages get as a list of dicts."""
    with monkeypatch.context() as patch:
        listed = _minted(drawn, patch, "copies")
    with monkeypatch.context() as patch:
        conversed = _minted(drawn, patch, "conversation")
    assert repr(conversed) == repr(listed)


def test_a_conversation_added_to_reuses_the_last_messages_by_identity() -> None:
    """A Conversation added to since the last call reuses its messages, the very objects; one
    built anew from equal messages is read whole, and a list after it is too."""
    holder = _Run()
    first = Conversation([{"role": "user", "content": "a"}])
    second = first.add({"role": "assistant", "content": "b"}, {"role": "user", "content": "c"})
    found = [explicit_memo.read({"messages": given}, holder) for given in (first, second)]
    assert found[0] is not None
    assert found[1] is not None
    assert found[0].prefix is None
    assert found[1].prefix is found[0].request.messages
    assert found[1].request.messages == tuple(second)
    again = explicit_memo.read({"messages": Conversation(list(second))}, holder)
    assert again is not None
    assert again.prefix is None
    listed = explicit_memo.read({"messages": [dict(m) for m in second]}, holder)
    assert listed is not None
    assert listed.prefix is None
    assert repr(listed.request) == repr(Request.from_dict({"messages": list(second)}))


# Values `==` or orjson would take for another (a boolean for 1, -0.0 for 0.0), nested arguments,
# and values orjson refuses (bytes, a set, an object, a non-string key).
_DEEP: Any = st.recursive(
    _VALUE | _TEXT,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=6,
)
_ODD: Any = st.sampled_from([b"x", frozenset({1}), object(), {1: "a"}, math.inf, ("t", 1)])


@st.composite
def histories(draw: st.DrawFn) -> list[Any]:
    """Steps of one run along a longer history: besides `calls`' steps, an earlier message changed
    deep in place (a key added, dropped or given another value, a nested list grown), the list
    cut short, a message put in before the end, the list replaced by equal copies, and values
    orjson refuses slipped into an earlier or a new message."""
    steps: list[Any] = [
        ("append", _message(draw, index)) for index in range(draw(st.integers(1, 6)))
    ]
    steps.append(("call",))
    for index in range(draw(st.integers(2, 8))):
        change = draw(
            st.sampled_from(
                ["append", "append", "append", "deep", "drop", "cut", "insert", "replace", "odd"]
            )
        )
        at = draw(st.integers(0, 99))
        if change == "append":
            steps.append(("append", _message(draw, 10 + index)))
        elif change in ("deep", "drop"):
            steps.append((change, at, draw(st.text(max_size=2)), draw(_DEEP)))
        elif change == "cut":
            steps.append(("cut", draw(st.integers(1, 3))))
        elif change == "insert":
            steps.append(("insert", at, _message(draw, 10 + index)))
        elif change == "odd":
            steps.append(("odd", at, draw(_ODD), draw(st.booleans())))
        else:
            steps.append((change,))
        steps.append(("call",))
    return steps


def _arguments(message: dict[str, Any]) -> dict[str, Any] | None:
    parts = message.get("parts")
    return parts[0]["arguments"] if parts else None


def changed_requests(steps: list[Any]) -> Any:
    """`requests_of` for `histories`' steps: each change made to the very dicts (and list) the
    earlier calls were handed."""
    messages: list[dict[str, Any]] = []
    for step in steps:
        target = messages[step[1] % len(messages)] if messages and step[0] in _AT else None
        if step[0] == "append":
            messages.append(step[1])
        elif step[0] == "deep" and target is not None:
            arguments = _arguments(target)
            if arguments is None:
                target["content"] = f"{target['content']}{step[2]}"
            else:
                arguments[step[2]] = step[3]
                if isinstance(arguments.get("a"), list):
                    arguments["a"].append(step[3])
        elif step[0] == "drop" and target is not None:
            arguments = _arguments(target)
            if arguments is not None and arguments:
                del arguments[next(iter(arguments))]
        elif step[0] == "cut":
            del messages[max(1, len(messages) - step[1]) :]
        elif step[0] == "insert" and target is not None:
            messages.insert(step[1] % len(messages), step[2])
        elif step[0] == "replace":
            messages = copy.deepcopy(messages)
        elif step[0] == "odd" and target is not None:
            if step[3]:
                messages.append({"role": "user", "content": step[2]})
            elif (arguments := _arguments(target)) is not None:
                arguments["a"] = step[2]
            else:
                target["content"] = step[2]
        elif step[0] == "call":
            yield {"model": "m", "provider": "openai", "messages": list(messages)}


_AT = frozenset({"deep", "drop", "insert", "odd"})


def _minted_changed(steps: list[Any], patch: pytest.MonkeyPatch, form: str) -> list[Any]:
    """`_minted` over `changed_requests`: the caller's own dicts (``list``), a deep copy made at
    each call (``copies``), or the caller's dicts with the memo switched off (``whole``)."""
    if form == "whole":
        patch.setattr(explicit_memo, "read", lambda request, run: None)
    return _minted(steps, patch, "copies" if form == "copies" else "list", changed_requests)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(drawn=histories())
def test_a_history_changed_anywhere_mints_what_a_run_from_scratch_mints(
    drawn: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever a caller does to the history it handed earlier calls (changes deep inside an
    earlier message, cuts, inserts, a new list of equal copies, values orjson refuses), `llm_call`
    raises nothing and mints the receipts and commits of a run read without the memo and of a
    run handed fresh copies."""
    minted = {}
    for form in ("list", "whole", "copies"):
        with monkeypatch.context() as patch:
            minted[form] = repr(_minted_changed(drawn, patch, form))
    assert minted["list"] == minted["whole"]
    assert minted["list"] == minted["copies"]


@settings(max_examples=200, deadline=None)
@given(histories())
def test_the_memo_reads_a_changed_history_as_from_dict_does(drawn: list[Any]) -> None:
    """Along `histories`, each request the memo reads is `Request.from_dict` of it, or the memo
    declines (None) exactly where `from_dict` of a deep copy refuses or orjson cannot write the
    messages; a memo never survives a change before the end."""
    _reads_as_from_dict(drawn)


@settings(max_examples=200, deadline=None)
@given(histories(), st.integers(1, 3))
def test_chunks_of_a_few_messages_read_a_changed_history_as_from_dict_does(
    drawn: list[Any], chunk: int
) -> None:
    """The same with one to three messages a chunk, so that changes, cuts and appends fall on
    every side of a chunk's edge."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(explicit_memo, "CHUNK", chunk)
        _reads_as_from_dict(drawn)


def _reads_as_from_dict(drawn: list[Any]) -> None:
    holder = _Run()
    for request in changed_requests(copy.deepcopy(drawn)):
        before = holder.explicit
        found = explicit_memo.read(request, holder)
        try:
            expected = repr(Request.from_dict(copy.deepcopy(request)))
        except Exception:
            expected = None
        if found is None:
            assert holder.explicit is None
            continue
        assert repr(found.request) == expected
        if found.prefix is not None:
            assert before is not None
            assert found.prefix is before.messages
            assert found.request.messages[: len(found.prefix)] == found.prefix


def _holds_null(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_null(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_null(item) for item in value)
    return value is None or (isinstance(value, float) and not math.isfinite(value))


_JSON: Any = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers(-9, 9) | st.text() | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text() | _TEXT, inner),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_JSON, st.lists(_JSON, max_size=3))
def test_a_null_value_is_told_from_null_in_a_string(head: Any, more: list[Any]) -> None:
    """orjson's text of any JSON value holds a null value exactly where the value holds None, NaN
    or an infinity, whatever its strings say, also read from a later item on."""
    body = orjson.dumps([head, *more])
    assert explicit_memo._null_value(body) is _holds_null([head, *more])
    start = len(orjson.dumps([head])) - 1
    assert explicit_memo._null_value(body, start) is _holds_null(more)
