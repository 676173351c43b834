"""The Responses API as each convention records it: server-held history and its tell-tales,
nested settings, OpenInference's numbering and sealed reasoning items, the Responses ledger."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from af_otel import names
from af_otel.model import Request
from af_otel.semconv import Convention, adapt, registered, responses

M = "llm.input_messages"


def oi_span(invocation: dict[str, Any], **extra: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.provider": "openai",
        "llm.system": "openai",
        "llm.invocation_parameters": json.dumps({"model": "gpt-5-mini", **invocation}),
    }
    attrs.update(extra)
    return attrs


def request(*messages: dict[str, Any], tools: bool = True) -> Request:
    tool = [{"type": "function", "name": "get_time", "parameters": {"type": "object"}}]
    return Request.from_dict(
        {"messages": list(messages), "tools": tool if tools else [], "provider": "openai"}
    )


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def call(call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": call_id, "name": "get_time", "arguments": {}}],
    }


def result(call_id: str) -> dict[str, Any]:
    return {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": call_id, "response": "09:00"}],
    }


GENAI_RESPONSES = {"openai.api.type": "responses"}


def test_the_recorded_previous_response_id_is_the_detail() -> None:
    """OpenInference records previous_response_id (or a conversation) in its invocation
    parameters: that id is what the call continues, whatever the request shows."""
    attrs = oi_span({"previous_response_id": "resp_8"})
    assert responses.held_history(attrs, request(user("hi"))) == "resp_8"
    attrs = oi_span({"conversation": {"id": "conv_1"}})
    assert responses.held_history(attrs, None) == "conv_1"
    assert responses.held_history(oi_span({"store": False}), request(user("hi"))) is None


def test_a_tool_result_without_its_call_is_a_tell_tale() -> None:
    """Anywhere: a tool result whose call is not in the request shows history it does not carry;
    a call under an item id (OpenLLMetry's fc_...) may be that result's call, so is counted."""
    orphan = request(result("call_1"))
    assert responses.held_history({}, orphan) == responses.TELLTALE_ORPHAN_RESULT
    paired = request(user("time?"), call("call_1"), result("call_1"))
    assert responses.held_history(GENAI_RESPONSES, paired) is None
    item_id = request(user("time?"), call("fc_1"), result("call_1"))
    assert responses.held_history(GENAI_RESPONSES, item_id) is None


def test_a_responses_input_that_starts_mid_conversation_is_a_tell_tale() -> None:
    """On the Responses API (genai's openai.api.type, OpenLLMetry's span name) an input whose
    first turn is not the user's continues something; on Chat Completions it is not read so."""
    started = request(
        {"role": "assistant", "parts": [{"type": "text", "content": "Hello."}]}, user("hi")
    )
    assert responses.held_history(GENAI_RESPONSES, started) == responses.TELLTALE_MID_CONVERSATION
    assert responses.held_history({}, started, "openai.response") == (
        responses.TELLTALE_MID_CONVERSATION
    )
    assert responses.held_history({}, started, "chat gpt-4o") is None


@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=6), st.data())
def test_whole_conversations_show_no_tell_tale_and_a_cut_one_does(
    calls_per_turn: list[int], data: st.DataObject
) -> None:
    """A conversation in which every result follows its call shows nothing; cut just after a
    call that has a result, the first item left is that result: the orphan tell-tale."""
    messages: list[dict[str, Any]] = []
    cuts: list[int] = []
    for turn, count in enumerate(calls_per_turn):
        messages.append(user(f"q{turn}"))
        for index in range(count):
            messages.append(call(f"call_{turn}_{index}"))
            cuts.append(len(messages))
            messages.append(result(f"call_{turn}_{index}"))
    assert responses.held_history(GENAI_RESPONSES, request(*messages)) is None
    if cuts:
        cut = data.draw(st.sampled_from(cuts))
        found = responses.held_history(GENAI_RESPONSES, request(*messages[cut:]))
        assert found == responses.TELLTALE_ORPHAN_RESULT


def test_nested_settings_are_read_under_the_normalized_names() -> None:
    """reasoning.effort/summary, text.format, truncation and store from the recorded arguments."""
    fmt = {"type": "json_schema", "name": "a", "schema": {"type": "object"}, "strict": True}
    arguments = {
        "reasoning": {"effort": "low", "summary": "auto"},
        "text": {"format": fmt},
        "truncation": "auto",
        "store": False,
        "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": []},
    }
    adapted = adapt(oi_span(arguments, **{f"{M}.0.message.role": "user"}))
    assert adapted.request is not None
    params = adapted.request["params"]
    assert params["reasoning_effort"] == "low"
    assert params["reasoning_summary"] == "auto"
    assert params["response_format"] == fmt
    assert params["truncation"] == "auto"
    assert params["store"] is False
    assert params["tool_choice"] == arguments["tool_choice"]


def test_openinference_numbering_from_one_is_no_hole_on_the_responses_api() -> None:
    """Without instructions OpenInference numbers a Responses input from 1: that is the whole
    input, not a lost message; a Chat Completions span with the same hole is still cut."""
    holed = {f"{M}.1.message.role": "user", f"{M}.1.message.content": "hi"}
    adapted = adapt(oi_span({"previous_response_id": "resp_1"}, **holed), "Response")
    assert adapted.request is not None
    assert [m["role"] for m in adapted.request["messages"]] == ["user"]
    chat = adapt(oi_span({"temperature": 0.1}, **holed), "ChatCompletion")
    assert chat.request is None
    assert chat.absent_reason == names.REASON_CUT


def test_a_sealed_reasoning_item_is_a_reasoning_part_with_its_encrypted_content() -> None:
    """A replayed reasoning item with only its encrypted content is not unreadable: it is a
    reasoning part that carries it (and the thinking-replay rule then calls it sealed)."""
    extra = {
        f"{M}.0.message.role": "user",
        f"{M}.0.message.content": "hi",
        f"{M}.1.message.role": "assistant",
        f"{M}.1.message.contents.0.message_content.type": "reasoning",
        f"{M}.1.message.contents.0.message_content.encrypted_content": "gAAAA",
    }
    adapted = adapt(oi_span({"store": False}, **extra))
    assert adapted.request is not None
    part = adapted.request["messages"][1]["parts"][0]
    assert part == {"type": "reasoning", "content": "", "encrypted_content": "gAAAA"}


def test_the_responses_rows_of_the_ledger() -> None:
    """What each instrumentation does not record of a Responses call is named; OpenInference
    records all of it but a bare call's arguments; nothing is added off the Responses API."""
    req = request(user("time?"), call("call_1"), result("call_1"))
    genai = responses.unrecorded(req, "genai", GENAI_RESPONSES)
    assert {"previous_response_id", "reasoning.items", "tools.strict", "store"} <= set(genai)
    assert "tool_call.id" not in genai
    openllmetry = responses.unrecorded(req, "openllmetry", {}, "openai.response")
    assert {"tool_call.id", "reasoning.items"} <= set(openllmetry)
    assert "reasoning_effort" not in openllmetry
    bare = Request.from_dict(
        {
            "messages": [
                user("t"),
                {"role": "assistant", "parts": [{"type": "tool_call", "id": "c", "name": "f"}]},
            ],
            "provider": "openai",
        }
    )
    assert responses.unrecorded(bare, "openinference", oi_span({"max_output_tokens": 64})) == (
        responses.CALL_ARGUMENTS,
    )
    assert responses.unrecorded(req, "genai", {}) == ()


def test_each_family_tells_its_own_responses_calls() -> None:
    """A Responses call is told by the tell-tale of the family that writes it (genai-openai's API
    type, OpenLLMetry's span name, OpenInference's arguments); a family registered with a
    tell-tale of its own is asked too, and one unregistered is not."""
    assert responses.is_responses({"openai.api.type": "responses"})
    assert not responses.is_responses({"openai.api.type": "chat_completions"})
    assert responses.is_responses({}, "openai.response")
    assert responses.is_responses(oi_span({"previous_response_id": "resp_1"}))
    assert responses.is_responses({"input.value": json.dumps({"input": [], "model": "m"})})
    assert not responses.is_responses(oi_span({"temperature": 0.2}))
    toy = Convention("toy-responses", responses_call=lambda a, name: name == "toy.responses")
    assert not responses.is_responses({}, "toy.responses")
    with registered(toy):
        assert responses.is_responses({}, "toy.responses")
    assert not responses.is_responses({}, "toy.responses")
