"""Reading a sent body from its tail (af_otel/wire/tail.py): over drawn runs of bodies with appends,
edits anywhere, changed members and reserialized or reordered bodies, the tail read gives the very
request the whole read gives, and the processor mints the very same receipts and commits."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import names, wire
from af_otel.canonical import canonical_json
from af_otel.model import Request
from af_otel.processor import ReceiptSpanProcessor, run, wire_source
from af_otel.wire import tail

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
_ARGS = st.dictionaries(st.sampled_from(["a", "b"]), st.integers(-9, 9) | _TEXT | st.none())


def _chat(draw: st.DrawFn, index: int) -> dict[str, Any]:
    kind = draw(st.sampled_from(["user", "assistant", "call", "tool", "system"]))
    if kind == "call":
        call = {"id": f"c{index}", "type": "function"}
        call["function"] = {"name": "f", "arguments": orjson.dumps(draw(_ARGS)).decode()}
        return {"role": "assistant", "content": draw(st.none() | _TEXT), "tool_calls": [call]}
    if kind == "tool":
        return {"role": "tool", "tool_call_id": f"c{index}", "content": draw(_TEXT)}
    return {"role": kind, "content": draw(_TEXT | st.lists(st.just({"type": "text", "text": "t"})))}


def _anthropic(draw: st.DrawFn, index: int) -> dict[str, Any]:
    block = draw(
        st.sampled_from(
            [
                {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}},
                {"type": "tool_use", "id": f"t{index}", "name": "f", "input": {"a": 1}},
                {"type": "tool_result", "tool_use_id": "t", "content": "x", "is_error": True},
                {"type": "thinking", "thinking": "", "signature": "c2ln"},
            ]
        )
    )
    content: Any = draw(_TEXT) if draw(st.booleans()) else [block]
    return {"role": draw(st.sampled_from(["user", "assistant"])), "content": content}


def _responses(draw: st.DrawFn, index: int) -> Any:
    return draw(
        st.sampled_from(
            [
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "q"}],
                },
                {"role": "assistant", "content": "a", "id": f"m{index}", "status": "done"},
                {"type": "function_call", "call_id": f"c{index}", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": f"c{index}", "output": "o"},
                {"type": "reasoning", "summary": [], "encrypted_content": "e", "id": "r"},
                {"type": "item_reference", "id": f"i{index}"},
            ]
        )
    )


def _rest(draw: st.DrawFn, endpoint: str) -> dict[str, Any]:
    rest: dict[str, Any] = {"model": draw(st.sampled_from(["m1", "m2"]))}
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    if endpoint == wire.ANTHROPIC_MESSAGES:
        tools = [{"name": "f", "input_schema": {"type": "object"}}]
        rest["max_tokens"] = draw(st.integers(1, 3))
        rest["system"] = draw(st.none() | _TEXT | st.just([{"type": "text", "text": "s"}]))
    if endpoint == wire.OPENAI_RESPONSES:
        rest["instructions"] = draw(st.none() | _TEXT)
        rest["previous_response_id"] = draw(st.none() | st.just("resp_1"))
    if draw(st.booleans()):
        rest["tools"] = tools
    rest["temperature"] = draw(st.none() | st.floats(0, 2))
    rest["logit_bias"] = draw(st.none() | st.just({"1": 2}))
    return rest


_ELEMENTS: dict[str, Callable[[st.DrawFn, int], Any]] = {
    wire.OPENAI_CHAT: _chat,
    wire.ANTHROPIC_MESSAGES: _anthropic,
    wire.OPENAI_RESPONSES: _responses,
}
_KEYS = {wire.OPENAI_CHAT: "messages", wire.ANTHROPIC_MESSAGES: "messages"}


def _encode(draw: st.DrawFn, key: str, items: list[Any], rest: dict[str, Any]) -> bytes:
    """The body as a client writes it: the array first, last or among the members; compact, with
    spaces, or (rarely) a separate key spelled like the array's inside a member before it."""
    members = [(k, v) for k, v in rest.items() if v is not None]
    if draw(st.integers(0, 9)) == 0:
        members.insert(0, ("metadata", {key: [1]}))
    at = draw(st.integers(0, len(members)))
    body = dict([*members[:at], (key, items), *members[at:]])
    style = draw(st.sampled_from(["orjson", "spaced", "indent"]))
    if style == "orjson":
        return orjson.dumps(body)
    if style == "spaced":
        return json.dumps(body, ensure_ascii=False).encode()
    return json.dumps(body, indent=1).encode()


@st.composite
def runs(draw: st.DrawFn) -> tuple[str, list[bytes]]:
    """A run of bodies: each appends elements, or edits one anywhere, drops the last, changes
    the members, or is written another way."""
    endpoint = draw(st.sampled_from(sorted(_ELEMENTS)))
    key = _KEYS.get(endpoint, "input")
    element = _ELEMENTS[endpoint]
    items = [element(draw, 0)]
    rest = _rest(draw, endpoint)
    style = draw(st.randoms(use_true_random=False))
    bodies = []
    for step in range(draw(st.integers(2, 7))):
        change = draw(st.sampled_from(["append"] * 4 + ["edit", "drop", "rest", "same"]))
        if change == "append":
            items += [element(draw, step) for _ in range(draw(st.integers(1, 3)))]
        elif change == "edit" and items:
            items[draw(st.integers(0, len(items) - 1))] = element(draw, step + 50)
        elif change == "drop" and len(items) > 1:
            items.pop()
        elif change == "rest":
            rest = _rest(draw, endpoint)
        style.random()
        bodies.append(_encode(draw, key, list(items), rest))
    return endpoint, bodies


def _plain(found: tail.Sent | None) -> Any:
    if found is None:
        return None
    request = canonical_json(found.request.to_dict())
    return (found.request, request, found.unread, found.held, found.sealed)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_a_body_read_from_its_tail_is_the_body_read_whole(drawn: tuple[str, list[bytes]]) -> None:
    """Each body of a run, read with the run's layouts, gives what reading it whole gives."""
    endpoint, bodies = drawn
    layouts: tuple[tail.Layout, ...] = ()
    for body in bodies:
        found, layouts = tail.read_sent(endpoint, body, layouts)
        whole, _ = tail.read_sent(endpoint, body)
        assert _plain(found) == _plain(whole)
        if found is not None and found.prefix is not None:
            assert found.request.messages[: len(found.prefix)] == found.prefix


def test_an_appended_body_is_read_from_its_tail() -> None:
    """A body that appends to the last one holds the last one's messages, the very objects."""
    first = orjson.dumps({"messages": [{"role": "user", "content": "a"}], "model": "m"})
    second = orjson.dumps(
        {
            "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
            "model": "m",
        }
    )
    found, layouts = tail.read_sent(wire.OPENAI_CHAT, first)
    assert found is not None
    assert found.prefix is None
    assert len(layouts) == 1
    again, layouts = tail.read_sent(wire.OPENAI_CHAT, second, layouts)
    assert again is not None
    assert again.prefix is found.request.messages
    assert again.request.messages[0] is found.request.messages[0]
    edited = second.replace(b'"a"', b'"z"')
    other, _ = tail.read_sent(wire.OPENAI_CHAT, edited, layouts)
    assert other is not None
    assert other.prefix is None


def test_a_key_repeated_after_the_array_is_read_whole() -> None:
    """orjson keeps the last of two equal keys: a body naming the array's key again after it
    is read whole, to the same request."""
    first = b'{"messages":[{"role":"user","content":"a"}],"model":"m"}'
    second = b'{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],'
    second += b'"model":"m","messages":[{"role":"user","content":"c"}]}'
    _, layouts = tail.read_sent(wire.OPENAI_CHAT, first)
    found, _ = tail.read_sent(wire.OPENAI_CHAT, second, layouts)
    whole, _ = tail.read_sent(wire.OPENAI_CHAT, second)
    assert found is not None
    assert found.prefix is None
    assert _plain(found) == _plain(whole)
    assert [m["parts"][0]["content"] for m in found.request.messages] == ["c"]


def _minted(bodies: list[bytes], monkeypatch: pytest.MonkeyPatch, tmp: Any) -> list[Any]:
    """Each body sent under a chat span through the processor with the tap; what each span got."""
    monkeypatch.setattr("af_otel.processor.run_table.secrets.token_hex", lambda n: "ab" * n)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=tmp))
    tracer = provider.get_tracer("test")
    transport = httpx.MockTransport(lambda r: httpx.Response(200, json={}))
    try:
        with httpx.Client(transport=transport) as client, run("tail"):
            for body in bodies:
                with tracer.start_as_current_span(
                    "chat m",
                    attributes={"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"},
                ):
                    client.post("https://api.openai.com/v1/chat/completions", content=body)
    finally:
        provider.shutdown()
    out = []
    for span in exporter.get_finished_spans():
        if names.EPOCH not in (span.attributes or {}):
            continue  # the run's close record
        attributes = {k: v for k, v in (span.attributes or {}).items() if k.startswith("af.")}
        events = [dict(e.attributes or {}) for e in span.events if e.name == names.COMMIT_EVENT]
        out.append((attributes, events))
    return out


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(st.sampled_from(["append", "edit", "rest"]), min_size=2, max_size=6))
def test_receipts_and_commits_are_those_of_whole_reads(
    steps: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Through the processor, a run read from its bodies' tails mints the receipts and commits
    a run read whole mints (no layouts kept)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "q0"}]
    rest: dict[str, Any] = {"model": "m", "temperature": 0.5}
    bodies = []
    for index, step in enumerate(steps):
        if step == "append":
            messages += [
                {"role": "assistant", "content": f"a{index}"},
                {"role": "user", "content": "q"},
            ]
        elif step == "edit":
            messages[0] = {"role": "user", "content": f"edited {index}"}
        else:
            rest = {
                **rest,
                "temperature": index / 10,
                "tools": [{"type": "function", "function": {"name": "f"}}],
            }
        bodies.append(orjson.dumps({"messages": messages, **rest}))
    with monkeypatch.context() as patch:
        kept = _minted(bodies, patch, tmp_path_factory.mktemp("tail"))
    with monkeypatch.context() as patch:
        patch.setattr(tail, "MAX_LAYOUTS", 0)
        whole = _minted(bodies, patch, tmp_path_factory.mktemp("whole"))
    assert kept == whole
    assert len(kept) == len(bodies)
    assert all(a[names.RECEIPT_SOURCE] == names.SOURCE_WIRE for a, _ in kept)


_TURN = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "system", "developer"]),
        "content": st.sampled_from(["a", "b", "cut"]),
    }
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(_TURN, max_size=3), st.booleans(), st.booleans()), max_size=6))
def test_the_record_compared_from_its_new_messages_says_what_a_whole_compare_says(
    steps: list[tuple[list[dict[str, Any]], bool, bool]],
) -> None:
    """Along a run whose record and body grow together (the record sometimes cutting a new
    message, sometimes read afresh), comparing only the new messages names the very fields a
    whole comparison names."""
    held = SimpleNamespace(compared=None)
    recorded = sent = Request()
    for turns, cut, afresh in steps:
        new = tuple(Request.from_dict({"messages": turns}).messages)
        mine = tuple(
            Request.from_dict({"messages": [{**t, "content": "c"} for t in turns]}).messages
        )
        before = (None, None) if afresh else (recorded.messages, sent.messages)
        recorded = Request(messages=recorded.messages + (mine if cut else new), system=())
        sent = Request(messages=sent.messages + new)
        found = wire_source.record_differs(recorded, sent, held, before)
        assert found == wire_source.record_differs(recorded, sent)
