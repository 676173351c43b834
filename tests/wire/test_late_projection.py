"""Late pairing through a convention's projection (docs/processor.md, Late pairing): OpenLLMetry
writes its Responses span after the response and its record of ``input`` leaves reasoning items
out and names a function call by the item's own id, so its record vouches for a body only once
both are seen as OpenLLMetry keeps a Responses request (`openllmetry.responses_kept`). Anything
that projection keeps must be equal, two bodies it cannot tell apart go to neither, and a family
that declares no projection is held to the body as it is. The spans are written as OpenLLMetry
0.62 writes them (read from its wrapper and measured on tests/wire/test_responses.py); real SDK
spans, a real httpx client (its MockTransport answers), the tap, under each pipeline form."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from af_otel import canonical_json, names, verify
from af_otel.model import FrozenDict, Request
from af_otel.processor.wire_source import record_differs, vouches
from af_otel.reader.replay import replay
from af_otel.reader.verify import VerdictStatus
from af_otel.semconv import projection, read_call, tables
from af_otel.semconv.conventions.openllmetry import RESPONSES_ENDPOINT, responses_kept
from af_otel.store import LocalStore
from af_otel.wire import openai_responses, uninstall
from af_otel.wire.endpoints import BY_NAME
from af_otel.wire.tail import read_sent
from tests.builders import Pipeline, make_pipeline
from tests.wire.test_pairing import _by_name, exporter_pipeline

RESPONSES: Final = "https://api.openai.com/v1/responses"
SCOPE: Final = "opentelemetry.instrumentation.openai.v1"  # OpenLLMetry's OpenAI 1.x scope
FORMS: Final = ("processor", "exporter", "exporter-untagged")
INSTRUCTIONS: Final = "You are a weather agent."
TOOL: Final = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture(params=FORMS)
def pipeline(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pipeline]:
    store = LocalStore(tmp_path / "store")
    if request.param == "processor":
        made = make_pipeline(store, scope=SCOPE)
    else:
        made = exporter_pipeline(store, tagged=request.param == "exporter")
        made = replace(made, tracer=made.provider.get_tracer(SCOPE))
    yield made
    made.provider.shutdown()
    uninstall()


def _body(question: str = "Weather in Paris?", sealed: str = "gAAAAenc0001") -> dict[str, Any]:
    """A stateless Responses body replaying a reasoning item and a function call with its
    result, as the openai client sends it."""
    return {
        "model": "gpt-5-mini",
        "instructions": INSTRUCTIONS,
        "input": [
            {"role": "user", "content": question},
            {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": sealed},
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city": "Oslo"}',
                "status": "completed",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "13C, dry"},
        ],
        "tools": [{**TOOL, "strict": True}],
        "reasoning": {"effort": "low"},
        "store": False,
    }


def _recorded(question: str = "Weather in Paris?") -> list[dict[str, Any]]:
    """``gen_ai.input.messages`` as OpenLLMetry writes it for `_body`: the instructions as a
    system message, no reasoning item, the function call under its item id."""
    return [
        {"role": "system", "parts": [{"type": "text", "content": INSTRUCTIONS}]},
        {"role": "user", "parts": [{"type": "text", "content": question}]},
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "name": "get_weather",
                    "id": "fc_1",
                    "arguments": {"city": "Oslo"},
                }
            ],
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "call_1", "response": "13C, dry"}],
        },
    ]


def _send(body: dict[str, Any]) -> None:
    answer = httpx.Response(200, json={"id": "resp_1", "object": "response", "output": []})
    with httpx.Client(transport=httpx.MockTransport(lambda _: answer)) as client:
        client.post(RESPONSES, content=orjson.dumps(body))


def _written_after(
    pipeline: Pipeline,
    name: str,
    start: int,
    messages: list[dict[str, Any]],
    answer: str | None = None,
    *,
    marked: bool = True,
) -> None:
    """OpenLLMetry's Responses span: started once the response is in, back-dated to the call's
    start, and ended at once; ``answer`` its output's text, if recorded (``marked=False``:
    without the key that tells OpenLLMetry's)."""
    attributes: dict[str, Any] = {
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-5-mini",
        "gen_ai.is_streaming": False,
        "gen_ai.operation.name": "chat",
        "gen_ai.response.id": "resp_1",
        "gen_ai.request.reasoning_effort": "low",
        "gen_ai.input.messages": json.dumps(messages),
        "gen_ai.tool.definitions": json.dumps([TOOL]),
    }
    if not marked:
        del attributes["gen_ai.is_streaming"]
    if answer is not None:
        output = [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
        attributes["gen_ai.output.messages"] = json.dumps(output)
    span = pipeline.tracer.start_span(name, start_time=start, attributes=attributes)
    span.end()


def test_openllmetrys_record_vouches_for_its_body_seen_as_it_keeps_it(pipeline: Pipeline) -> None:
    """The record leaves the reasoning item out and names the call by its item id: seen through
    OpenLLMetry's projection it says what the body says, so the late span takes the body,
    verifies, says its record differs on the messages, and replays the body exactly."""
    body = _body()
    start = time.time_ns()
    _send(body)
    _written_after(pipeline, "openai.response", start, _recorded())
    source, view = _by_name(pipeline)["openai.response"]
    assert source == names.SOURCE_WIRE
    assert verify(view).status == VerdictStatus.VERIFIED
    assert view.record_differs == ("messages",)
    assert canonical_json(replay(view, store=pipeline.store).body) == canonical_json(body)


def _edit_question(m: list[dict[str, Any]]) -> None:
    m[1]["parts"][0]["content"] = "Weather in Lima?"


def _edit_arguments(m: list[dict[str, Any]]) -> None:
    m[2]["parts"][0]["arguments"] = {"city": "Lima"}


def _edit_tool_name(m: list[dict[str, Any]]) -> None:
    m[2]["parts"][0]["name"] = "get_time"


def _edit_result(m: list[dict[str, Any]]) -> None:
    m[3]["parts"][0]["response"] = "30C, wet"


def _edit_result_id(m: list[dict[str, Any]]) -> None:
    m[3]["parts"][0]["id"] = "call_9"


def _edit_instructions(m: list[dict[str, Any]]) -> None:
    m[0]["parts"][0]["content"] = "You are a pirate."


def _drop_result(m: list[dict[str, Any]]) -> None:
    del m[3]


def _edit_role(m: list[dict[str, Any]]) -> None:
    m[1]["role"] = "assistant"


EDITS: Final[dict[str, Callable[[list[dict[str, Any]]], None]]] = {
    "question": _edit_question,
    "arguments": _edit_arguments,
    "tool-name": _edit_tool_name,
    "result": _edit_result,
    "result-call-id": _edit_result_id,
    "instructions": _edit_instructions,
    "dropped-result": _drop_result,
    "role": _edit_role,
}


@pytest.mark.parametrize("edit", EDITS.values(), ids=EDITS.keys())
def test_a_record_that_differs_on_what_the_projection_keeps_is_not_vouched(
    pipeline: Pipeline, edit: Callable[[list[dict[str, Any]]], None]
) -> None:
    """A text, an argument, a tool name, a result or its call id, the instructions, a role, or
    a whole message the record says otherwise than the body: the projection keeps each, so the
    late span does not take the body and its record stands."""
    messages = _recorded()
    edit(messages)
    start = time.time_ns()
    _send(_body())
    _written_after(pipeline, "openai.response", start, messages)
    source, view = _by_name(pipeline)["openai.response"]
    assert source == names.SOURCE_INSTRUMENTATION
    assert verify(view).status != VerdictStatus.VERIFIED


def test_two_bodies_that_differ_only_where_the_projection_looks_away_go_to_neither(
    pipeline: Pipeline,
) -> None:
    """Two bodies that differ only in the reasoning they replay, which the record does not keep:
    both fit the record, whose is which is unknown, so the late span takes neither."""
    start = time.time_ns()
    _send(_body(sealed="gAAAAenc0001"))
    _send(_body(sealed="gAAAAenc0002"))
    _written_after(pipeline, "openai.response", start, _recorded())
    assert _by_name(pipeline)["openai.response"][0] == names.SOURCE_INSTRUMENTATION


def test_a_family_that_declares_no_projection_is_held_to_the_body_as_it_is(
    pipeline: Pipeline,
) -> None:
    """The same record written by a GenAI instrumentation (no OpenLLMetry marker, a scope of its
    own): the GenAI family declares no projection, and the dropped reasoning item is a
    difference, so the body stays unclaimed."""
    pipeline = replace(pipeline, tracer=pipeline.provider.get_tracer("test"))
    start = time.time_ns()
    _send(_body())
    _written_after(pipeline, "chat gpt-5-mini", start, _recorded(), marked=False)
    assert _by_name(pipeline)["chat gpt-5-mini"][0] == names.SOURCE_INSTRUMENTATION


# -- the projection itself ------------------------------------------------------------------------


def _sent(body: dict[str, Any]) -> Request:
    found, _ = read_sent(RESPONSES_ENDPOINT, orjson.dumps(body), (), b"/v1/responses")
    assert found is not None
    return found.request


def test_openllmetry_declares_its_projection_for_the_responses_endpoint() -> None:
    """The projection is OpenLLMetry's, for the Responses endpoint only, named as the wire names
    it; every projection any family declares is for an endpoint the tap reads."""
    assert RESPONSES_ENDPOINT == openai_responses.NAME
    assert projection("openllmetry", RESPONSES_ENDPOINT) is responses_kept
    assert projection("openllmetry", "openai.chat") is None
    assert projection("genai", RESPONSES_ENDPOINT) is None
    declared = {name for c in tables().conventions for name, _ in c.projections}
    assert declared <= set(BY_NAME)


def test_the_projection_leaves_out_reasoning_and_tool_call_ids_only() -> None:
    """Of `_body` read from the wire: the reasoning message goes, the tool call loses its id, and
    every other message is the very object read (nothing else is touched)."""
    sent = _sent(_body())
    kept = [responses_kept(m) for m in sent.messages]
    assert kept[1] is None  # the reasoning item
    assert kept[0] is sent.messages[0]
    assert kept[3] is sent.messages[3]
    assert kept[2] is not None
    assert kept[2]["parts"] == (
        {k: v for k, v in sent.messages[2]["parts"][0].items() if k != "id"},
    )


_TEXT = st.text(min_size=1, max_size=12)
_PART = st.one_of(
    st.builds(lambda t: {"type": "text", "content": t}, _TEXT),
    st.builds(
        lambda i, n: {"type": "tool_call", "id": i, "name": n, "arguments": {}}, _TEXT, _TEXT
    ),
    st.builds(lambda i, t: {"type": "tool_call_response", "id": i, "response": t}, _TEXT, _TEXT),
    st.builds(lambda t: {"type": "reasoning", "content": t}, _TEXT),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_PART, min_size=1, max_size=4), st.sampled_from(["user", "assistant", "tool"]))
def test_the_projection_keeps_every_part_but_reasoning_whole_and_in_order(
    parts: list[dict[str, Any]], role: str
) -> None:
    """For drawn messages: the kept parts are the message's non-reasoning parts in order, each
    equal but for a tool call's id; a message of reasoning alone is not kept; seeing a kept
    message again changes nothing."""
    message = FrozenDict(role=role, parts=tuple(FrozenDict(p) for p in parts))
    kept = responses_kept(message)
    others = [p for p in parts if p["type"] != "reasoning"]
    if not others:
        assert kept is None
        return
    assert kept is not None
    assert kept["role"] == role
    expected = [
        {k: v for k, v in p.items() if not (k == "id" and p["type"] == "tool_call")} for p in others
    ]
    assert [dict(p) for p in kept["parts"]] == expected
    assert responses_kept(kept) == kept


def _turns(count: int, edited: int | None = None) -> tuple[list[dict[str, Any]], list[Any]]:
    """A conversation's bodies and OpenLLMetry's records of them, call by call: each body the last
    one's items, then that call's reasoning and answer (`_answer`) and a new question. ``edited``:
    the call whose record says its newest question otherwise."""
    bodies, records = [], []
    body, record = _body(), _recorded()
    for call in range(1, count + 1):
        if call > 1:
            question = f"And in city {call}?"
            body = {**body, "input": [*body["input"], *_turn_items(call - 1, question)]}
            record = [*record, *_turn_record(call - 1, question)]
        bodies.append(body)
        shown = json.loads(json.dumps(record))
        if call == edited:
            shown[-1]["parts"][0]["content"] = "Something else?"
        records.append(shown)
    return bodies, records


def _answer(call: int) -> str:
    return f"Answer {call}: mild and dry."


def _turn_items(answered: int, question: str) -> list[dict[str, Any]]:
    sealed = f"gAAAAenc{answered:04d}"
    return [
        {"id": f"rs_a{answered}", "type": "reasoning", "summary": [], "encrypted_content": sealed},
        {"role": "assistant", "content": [{"type": "output_text", "text": _answer(answered)}]},
        {"role": "user", "content": question},
    ]


def _turn_record(answered: int, question: str) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "parts": [{"type": "text", "content": _answer(answered)}]},
        {"role": "user", "parts": [{"type": "text", "content": question}]},
    ]


@pytest.mark.parametrize("edited", [None, 2, 4], ids=["intact", "second-edited", "last-edited"])
def test_a_conversation_claimed_late_call_by_call_keeps_its_parent_chain(
    pipeline: Pipeline, edited: int | None
) -> None:
    """Four calls of one conversation, each span written after its call: every call is taken
    from the wire (the run's memo sees and compares only each call's new messages), verifies,
    and has the call before it as its parent. A record that says one question otherwise leaves
    that call to its record, never verified; the call after it names the hole its parent leaves
    (a caveat about that other call: its own receipt came from its body, so it verifies), and the
    calls past that chain from the wire again."""
    bodies, records = _turns(4, edited)
    with pipeline.tracer.start_as_current_span("agent"):
        for call, (body, record) in enumerate(zip(bodies, records, strict=True), start=1):
            start = time.time_ns()
            _send(body)
            _written_after(pipeline, f"call {call}", start, record, _answer(call))
    found = _by_name(pipeline)
    for call, body in enumerate(bodies, start=1):
        source, view = found[f"call {call}"]
        if call == edited:
            assert source == names.SOURCE_INSTRUMENTATION
            assert verify(view).status != VerdictStatus.VERIFIED
            continue
        if edited is not None and call == edited + 1:
            # Its body extends the edited call's, whose receipt is the record's: the call names
            # the hole before it, a caveat about that other call; its own receipt came from its
            # body, which its view equals, so it verifies all the same.
            assert source == names.SOURCE_WIRE
            assert "unrecorded-call" in {g.kind for g in view.gaps}
            assert verify(view).status == VerdictStatus.VERIFIED, (call, view.gaps)
            assert canonical_json(replay(view, store=pipeline.store).body) == canonical_json(body)
            continue
        assert source == names.SOURCE_WIRE, call
        assert verify(view).status == VerdictStatus.VERIFIED, (call, view.gaps)
        assert canonical_json(replay(view, store=pipeline.store).body) == canonical_json(body)
        parent = found[f"call {call - 1}"][1].epoch if call > 1 else 0
        assert view.parent == parent, call


# -- the vouch over drawn conversations -----------------------------------------------------------

_WORD = st.text(alphabet="abcdefghij ", min_size=1, max_size=8)
_ITEM = st.one_of(
    st.tuples(st.just("user"), _WORD),
    st.tuples(st.just("reasoning"), _WORD),
    st.tuples(st.just("call"), _WORD),
)


def _drawn_body(items: list[tuple[str, str]]) -> dict[str, Any]:
    """A Responses body of the drawn items: user texts, reasoning items, function calls (under an
    item id) with their outputs."""
    body: list[dict[str, Any]] = []
    for index, (kind, word) in enumerate(items):
        if kind == "user":
            body.append({"role": "user", "content": word})
        elif kind == "reasoning":
            reasoning = {"type": "reasoning", "summary": [], "encrypted_content": word}
            body.append({"id": f"rs_{index}", **reasoning})
        else:
            call = {"type": "function_call", "id": f"fc_{index}", "call_id": f"call_{index}"}
            arguments = json.dumps({"city": word})
            body.append({**call, "name": "get_weather", "arguments": arguments})
            body.append(
                {"type": "function_call_output", "call_id": f"call_{index}", "output": word}
            )
    return {"model": "gpt-5-mini", "instructions": INSTRUCTIONS, "input": body}


def _drawn_record(items: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """``gen_ai.input.messages`` as OpenLLMetry writes it for `_drawn_body`."""
    record: list[dict[str, Any]] = [
        {"role": "system", "parts": [{"type": "text", "content": INSTRUCTIONS}]}
    ]
    for index, (kind, word) in enumerate(items):
        if kind == "user":
            record.append({"role": "user", "parts": [{"type": "text", "content": word}]})
        elif kind == "call":
            part = {"type": "tool_call", "name": "get_weather", "id": f"fc_{index}"}
            record.append({"role": "assistant", "parts": [{**part, "arguments": {"city": word}}]})
            result = {"type": "tool_call_response", "id": f"call_{index}", "response": word}
            record.append({"role": "tool", "parts": [result]})
    return record


def _drawn_attributes(record: list[dict[str, Any]], *, edit: bool = False) -> dict[str, Any]:
    """OpenLLMetry's span attributes holding ``record`` (``edit``: its last text edited)."""
    if edit:
        record = json.loads(json.dumps(record))
        record[-1]["parts"][0]["content"] += "!"
    return {
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-5-mini",
        "gen_ai.is_streaming": False,
        "gen_ai.input.messages": json.dumps(record),
    }


def _drawn(items: list[tuple[str, str]]) -> tuple[Request, Request]:
    """`_drawn_body` as the tap reads it, and its record as the convention reads it."""
    attributes = _drawn_attributes(_drawn_record(items))
    recorded = read_call(attributes, "openai.response", remember=False).request
    assert recorded is not None
    return recorded, _sent(_drawn_body(items))


class _Run:
    """A run's memos, as `RunState` holds them."""

    compared: Any = None
    projected: Any = None


@settings(max_examples=80, deadline=None)
@given(st.lists(_ITEM, min_size=1, max_size=8), st.data())
def test_a_drawn_record_vouches_exactly_when_nothing_it_keeps_is_edited(
    items: list[tuple[str, str]], data: st.DataObject
) -> None:
    """OpenLLMetry's record of any drawn body vouches for it through the projection (and, where
    the body replays reasoning or calls under an item id, not without it); the record with any
    one kept text edited does not."""
    recorded, sent = _drawn(items)
    seen = projection("openllmetry", RESPONSES_ENDPOINT)
    differs = record_differs(recorded, sent)
    assert vouches(recorded, sent, differs, seen)
    if any(kind != "user" for kind, _ in items):
        assert not vouches(recorded, sent, differs, None)
    texts = [
        (m, p)
        for m, message in enumerate(recorded.messages)
        for p, part in enumerate(message["parts"])
        if part.get("type") in ("text", "tool_call_response")
    ]
    m, p = data.draw(st.sampled_from(texts))
    part = recorded.messages[m]["parts"][p]
    key = "content" if part["type"] == "text" else "response"
    edited_part = FrozenDict(part, **{key: str(part[key]) + "!"})
    parts = (
        *recorded.messages[m]["parts"][:p],
        edited_part,
        *recorded.messages[m]["parts"][p + 1 :],
    )
    messages = list(recorded.messages)
    messages[m] = FrozenDict(messages[m], parts=parts)
    edited = replace(recorded, messages=tuple(messages))
    assert not vouches(edited, sent, record_differs(edited, sent), seen)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(_ITEM, min_size=1, max_size=3), min_size=2, max_size=5), st.data())
def test_the_runs_memo_vouches_as_the_whole_view_does(
    chunks: list[list[tuple[str, str]]], data: st.DataObject
) -> None:
    """Calls of one drawn conversation, each read from its tail and from the run's last record as
    the engine reads them: the vouch with the run's projected memo says what the vouch over the
    whole view says, call by call, with a drawn call's newest record text edited."""
    edited = data.draw(st.integers(0, len(chunks)))  # == len(chunks): no call edited
    seen = projection("openllmetry", RESPONSES_ENDPOINT)
    run = _Run()
    layouts: tuple[Any, ...] = ()
    remembered = None
    items: list[tuple[str, str]] = []
    for index, chunk in enumerate(chunks):
        items += [*chunk, ("user", f"q{index}")]
        body = orjson.dumps(_drawn_body(items))
        found, layouts = read_sent(RESPONSES_ENDPOINT, body, layouts, b"/v1/responses")
        assert found is not None
        attributes = _drawn_attributes(_drawn_record(items), edit=index == edited)
        call = read_call(attributes, "openai.response", seen=remembered)
        remembered = call.seen
        assert call.request is not None
        prefixes = (call.prefix, found.prefix)
        differs = record_differs(call.request, found.request, run, prefixes)
        whole = vouches(
            call.request, found.request, record_differs(call.request, found.request), seen
        )
        assert vouches(call.request, found.request, differs, seen, run, prefixes) == whole
        assert whole == (index != edited)
