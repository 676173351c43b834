"""How af_otel reads the records of LiteLLM's callback and of LlamaIndex under OpenInference
(af_otel/semconv/litellm.py, llama_index.py), on span attributes the real instrumentations wrote
(fixtures/README.md); the stacks' wire tests hold the same readings against the bodies sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from af_otel import names
from af_otel.model import Request
from af_otel.semconv import adapt, content_keys, is_llm_call, ledger
from af_otel.semconv.coerce import is_placeholder

FIXTURES: Final = Path(__file__).resolve().parent / "fixtures"


def _load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return loaded


LITELLM: Final = _load("litellm_request.json")
RAW: Final = _load("litellm_raw_gen_ai_request.json")
PREPARE: Final = _load("llama_index_prepare_chat_with_tools.json")
STREAM: Final = _load("llama_index_astream_chat.json")


def test_litellm_tool_calls_and_results_are_read_from_its_own_keys() -> None:
    adapted = adapt(LITELLM, "litellm_request")
    assert adapted.convention == "litellm"
    assert adapted.request is not None
    messages = adapted.request["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    (call,) = messages[2]["parts"]
    assert call == {
        "type": "tool_call",
        "id": "call_09fe1540",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    }
    (result,) = messages[3]["parts"]
    assert result["type"] == "tool_call_response"
    assert result["id"] == "call_09fe1540"
    assert result["response"] == "Paris: 18C and sunny"
    assert [t["name"] for t in adapted.request["tools"]] == ["get_weather", "get_time"]
    assert adapted.request["params"] == {"temperature": 0.3, "max_tokens": 400}


def test_litellm_ledger_names_what_the_callback_leaves_off() -> None:
    adapted = adapt(LITELLM, "litellm_request")
    assert adapted.request is not None
    request = Request.from_dict(dict(adapted.request))
    missing = ledger.unrecorded(request, "litellm", adapted.convention, adapted.notes)
    assert {"tool_choice", "top_p"} <= set(missing)
    assert not {"temperature", "tools"} & set(missing)  # shown on this span
    without = {k: v for k, v in LITELLM.items() if k != "gen_ai.request.temperature"}
    adapted = adapt(without, "litellm_request")
    assert adapted.request is not None
    request = Request.from_dict(dict(adapted.request))
    # written only when truthy: a span without it may have sent temperature 0
    assert "temperature" in ledger.unrecorded(request, "litellm", "litellm", adapted.notes)


@pytest.mark.parametrize(
    "calls",
    ["not a list", [{"id": "c", "function": "get_weather"}], [{"id": "c"}], [7]],
)
def test_a_litellm_tool_call_it_cannot_read_makes_the_record_unreadable(calls: Any) -> None:
    messages = json.loads(LITELLM["gen_ai.input.messages"])
    messages[2]["tool_calls"] = calls
    adapted = adapt({**LITELLM, "gen_ai.input.messages": json.dumps(messages)}, "litellm_request")
    assert adapted.request is None
    assert adapted.absent_reason == names.REASON_UNREADABLE


def test_the_raw_request_child_is_not_an_llm_call() -> None:
    """Its values are Python repr (not JSON) and its model is the response's: never read."""
    assert not is_llm_call(RAW, "raw_gen_ai_request")
    assert RAW["llm.openai.model"] != LITELLM["gen_ai.request.model"]
    assert is_llm_call(LITELLM, "litellm_request")


def test_llama_index_prepare_span_is_not_an_llm_call() -> None:
    assert not is_llm_call(PREPARE, "OpenAI._prepare_chat_with_tools")
    assert is_llm_call(STREAM, "OpenAI.astream_chat")
    # the same attributes under a call's name are a call: the method decides, not the keys
    assert is_llm_call(PREPARE, "OpenAI.achat_with_tools")


def test_llama_index_dials_are_unrecorded_never_not_set() -> None:
    """Its invocation parameters are the LLM's metadata: no dial is read, and none counts as
    recorded, so none can read as left to the provider."""
    adapted = adapt(STREAM, "OpenAI.astream_chat")
    assert adapted.request is not None
    assert adapted.request["params"] == {}
    assert adapted.request["model"] == "gpt-4o-mini"
    request = Request.from_dict(dict(adapted.request))
    scope = "openinference.instrumentation.llama_index"
    missing = ledger.unrecorded(request, scope, adapted.convention, adapted.notes)
    assert {"temperature", "max_tokens", "top_p", "tool_choice"} <= set(missing)
    assert "tools" not in missing


@given(st.dictionaries(st.sampled_from(["num_output", "temperature", "max_tokens"]), st.integers()))
def test_llama_index_metadata_never_becomes_a_dial(extra: dict[str, int]) -> None:
    decoded = json.loads(STREAM["llm.invocation_parameters"])
    attributes = {**STREAM, "llm.invocation_parameters": json.dumps({**decoded, **extra})}
    adapted = adapt(attributes, "OpenAI.astream_chat")
    assert adapted.request is not None
    assert adapted.request["params"] == {}


PYDANTIC: Final = _load("pydantic_ai_chat.json")


def test_pydantic_ai_tools_carry_the_strict_flag_it_sends() -> None:
    adapted = adapt(PYDANTIC, "chat gpt-4o-mini")
    assert adapted.request is not None
    tools = {t["name"]: t for t in adapted.request["tools"]}
    assert tools["get_weather"].get("strict") is True
    assert "strict" not in tools["get_time"]


def test_pydantic_ai_tool_results_are_openai_tool_messages() -> None:
    adapted = adapt(PYDANTIC, "chat gpt-4o-mini")
    assert adapted.request is not None
    roles = [m["role"] for m in adapted.request["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    (result,) = adapted.request["messages"][-1]["parts"]
    assert result["type"] == "tool_call_response"
    assert result["id"] == "call_09fe1540"


def test_pydantic_ai_other_providers_stand_as_recorded() -> None:
    """The strict flag and the tool turns are OpenAI's model classes' rules: elsewhere the
    record stands."""
    anthropic = {**PYDANTIC, "gen_ai.provider.name": "anthropic", "gen_ai.system": "anthropic"}
    adapted = adapt(anthropic, "chat claude")
    assert adapted.request is not None
    assert all("strict" not in t for t in adapted.request["tools"])
    assert adapted.request["messages"][-1]["role"] == "user"


@pytest.mark.parametrize(
    "parameters",
    ["not json", '{"function_tools": "x"}', '{"function_tools": [], "native_tools": [{}]}', "[]"],
)
def test_pydantic_ai_unexpected_parameters_leave_the_recorded_tools(parameters: str) -> None:
    adapted = adapt({**PYDANTIC, "model_request_parameters": parameters}, "chat gpt-4o-mini")
    assert adapted.request is not None
    assert all("strict" not in t for t in adapted.request["tools"])


def test_pydantic_ai_ledger_names_tool_choice_unrecorded() -> None:
    adapted = adapt(PYDANTIC, "chat gpt-4o-mini")
    assert adapted.request is not None
    request = Request.from_dict(dict(adapted.request))
    missing = ledger.unrecorded(request, "pydantic-ai", adapted.convention, adapted.notes)
    assert {"tool_choice", "parallel_tool_calls", "stop_sequences"} <= set(missing)
    assert not {"temperature", "max_tokens", "tools", "seed"} & set(missing)


@pytest.mark.parametrize(
    "operation",
    [
        "invoke_agent",
        "invoke_workflow",
        "gen_ai.invocation.internal",
        "handle_conversation_turn",
        "create_agent",
        "execute_tool",
        "embeddings",
    ],
)
def test_agent_and_workflow_operations_old_and_new_are_not_llm_calls(operation: str) -> None:
    attributes = {"gen_ai.operation.name": operation, "gen_ai.request.model": "gpt-4o-mini"}
    assert not is_llm_call(attributes, f"{operation} travel")
    assert is_llm_call({**attributes, "gen_ai.operation.name": "chat"}, "chat gpt-4o-mini")


AGENTS_ECHO: Final = _load("openai_agents_openinference_response.json")
LITELLM_OI: Final = _load("litellm_openinference_completion.json")


def test_openai_agents_echoed_settings_and_tools_never_stand_for_the_request() -> None:
    adapted = adapt(AGENTS_ECHO, "response")
    assert adapted.request is not None
    assert adapted.request["params"] == {}
    assert adapted.request["tools"] == []
    request = Request.from_dict(dict(adapted.request))
    scope = "openinference.instrumentation.openai_agents"
    missing = ledger.unrecorded(request, scope, adapted.convention, adapted.notes)
    assert {"model", "tools", "temperature", "top_p", "tool_choice", "max_tokens"} <= set(missing)
    # the input items are the request's: the tool result keeps its call id
    (result,) = adapted.request["messages"][-1]["parts"]
    assert result["id"] == "call_w1"


def test_an_openinference_span_without_an_echo_keeps_its_settings() -> None:
    decoded = json.loads(AGENTS_ECHO["llm.invocation_parameters"])
    plain = {k: v for k, v in decoded.items() if k not in ("id", "created_at")}
    adapted = adapt({**AGENTS_ECHO, "llm.invocation_parameters": json.dumps(plain)}, "response")
    assert adapted.request is not None
    assert adapted.request["params"].get("temperature") == 0.3


def test_litellm_openinference_model_and_tool_call_ids_are_the_sent_ones() -> None:
    adapted = adapt(LITELLM_OI, "completion")
    assert adapted.request is not None
    assert adapted.request["model"] == "gpt-4o-mini"
    (result,) = adapted.request["messages"][-1]["parts"]
    assert result["id"] == "call_09fe1540"


@pytest.mark.parametrize(
    "input_value",
    ["not json", '{"messages": []}', '{"messages": "x"}', '{"messages": [1, 2, 3, 4]}'],
)
def test_litellm_openinference_ids_are_restored_only_where_the_arguments_line_up(
    input_value: str,
) -> None:
    adapted = adapt({**LITELLM_OI, "input.value": input_value}, "completion")
    assert adapted.request is not None
    (result,) = adapted.request["messages"][-1]["parts"]
    assert "id" not in result


def test_a_model_name_with_another_prefix_is_not_a_routing_name() -> None:
    attributes = {**LITELLM_OI, "llm.model_name": "meta-llama/Llama-3"}
    adapted = adapt(attributes, "completion")
    assert adapted.request is not None
    assert adapted.request["model"] == "openai/gpt-4o-mini"  # as recorded: not a routing name


def _content(**size: int) -> st.SearchStrategy[str]:
    """Text a model turn may hold, never a redaction placeholder (``REDACTED``, ``****``): a
    record holding one withholds its content (content-redacted, tested apart). Hypothesis also
    draws the code's own string constants, the placeholder words among them."""
    return st.text(**size).filter(lambda t: not is_placeholder(t))


_CALLS = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.text(max_size=8),
            "type": st.just("function"),
            "function": st.fixed_dictionaries(
                {"name": _content(min_size=1, max_size=8), "arguments": _content(max_size=16)}
            ),
        }
    ),
    max_size=3,
)


def test_a_redacted_tool_call_withholds_the_turn() -> None:
    """The case the drawn calls leave out: LiteLLM's record with a placeholder for a call's
    arguments is no request at all, never one read with the placeholder as content."""
    messages = json.loads(LITELLM["gen_ai.input.messages"])
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "REDACTED"}}
    messages[2]["tool_calls"] = [call]
    adapted = adapt({**LITELLM, "gen_ai.input.messages": json.dumps(messages)}, "litellm_request")
    assert adapted.request is None
    assert adapted.absent_reason == names.REASON_REDACTED


@given(_CALLS, st.lists(_content(max_size=8), max_size=2))
def test_litellm_keeps_every_tool_call_it_recorded(calls: list[Any], texts: list[str]) -> None:
    """Whatever an assistant turn holds beside its tool calls, every recorded call is a
    tool_call part of that turn, in order, after its text."""
    messages = json.loads(LITELLM["gen_ai.input.messages"])
    messages[2]["parts"] = [{"type": "text", "content": t} for t in texts]
    messages[2]["tool_calls"] = calls
    adapted = adapt({**LITELLM, "gen_ai.input.messages": json.dumps(messages)}, "litellm_request")
    assert adapted.request is not None
    assistant = adapted.request["messages"][2]
    found = [p for p in assistant["parts"] if p["type"] == "tool_call"]
    assert [p["name"] for p in found] == [c["function"]["name"] for c in calls]
    assert all(
        p["type"] == "text" for p in assistant["parts"][: len(assistant["parts"]) - len(found)]
    )


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=4),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=12,
    )
)
def test_litellm_reading_never_raises(value: Any) -> None:
    adapted = adapt({**LITELLM, "gen_ai.input.messages": json.dumps([value])}, "litellm_request")
    assert (adapted.request is None) == (adapted.absent_reason is not None)


def test_a_content_stripper_removes_pydantic_ai_request_parameters() -> None:
    """They hold the instructions' text and the tool definitions: content, as the messages are."""
    keys = content_keys(PYDANTIC)
    assert "model_request_parameters" in keys
    assert "gen_ai.input.messages" in keys
    assert "gen_ai.request.temperature" not in keys
