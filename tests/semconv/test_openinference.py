"""The OpenInference adapter: flattened messages, contents, tool calls, tools and dials."""

from __future__ import annotations

import json
from typing import Any

import pytest

from af_otel import names
from af_otel.model import Request
from af_otel.semconv import (
    NOTE_MODEL_FROM_RESPONSE,
    NOTE_PARAMS_UNREADABLE,
    adapt,
    ledger,
)

from . import expected

M = "llm.input_messages"


def span(**extra: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.provider": "azure",
        "llm.system": "openai",
        "llm.model_name": "gpt-4o-2024-08-06",
        "llm.invocation_parameters": json.dumps({"model": "gpt-4o", "temperature": 0.3}),
        f"{M}.0.message.role": "user",
        f"{M}.0.message.content": "hi",
    }
    attrs.update(extra)
    return {key: value for key, value in attrs.items() if value is not None}


def test_contents_become_parts_and_data_urls_become_blobs() -> None:
    """`message.contents.M.message_content.*` rebuild text, image URI and inline image parts."""
    adapted = adapt(
        span(
            **{
                f"{M}.0.message.content": None,
                f"{M}.0.message.name": "alice",
                f"{M}.0.message.contents.0.message_content.type": "text",
                f"{M}.0.message.contents.0.message_content.text": "look",
                f"{M}.0.message.contents.1.message_content.type": "image",
                f"{M}.0.message.contents.1.message_content.image.image.url": "https://x/y.png",
                f"{M}.0.message.contents.2.message_content.type": "image",
                f"{M}.0.message.contents.2.message_content.image.image.url": "data:image/jpeg;base64,/9j/",
            }
        )
    )
    assert adapted.request is not None
    assert adapted.request["messages"] == [
        {
            "role": "user",
            "name": "alice",
            "parts": [
                {"type": "text", "content": "look"},
                {"type": "uri", "modality": "image", "uri": "https://x/y.png"},
                {"type": "blob", "modality": "image", "mime_type": "image/jpeg", "content": "/9j/"},
            ],
        }
    ]


def test_tool_calls_results_and_legacy_function_calls() -> None:
    """Assistant text precedes its tool calls; a tool message is one tool_call_response."""
    adapted = adapt(
        span(
            **{
                f"{M}.1.message.role": "assistant",
                f"{M}.1.message.content": "checking",
                f"{M}.1.message.tool_calls.0.tool_call.id": "c0",
                f"{M}.1.message.tool_calls.0.tool_call.function.name": "f",
                f"{M}.1.message.tool_calls.0.tool_call.function.arguments": "",
                f"{M}.2.message.role": "tool",
                f"{M}.2.message.tool_call_id": "c0",
                f"{M}.2.message.content": "done",
                f"{M}.3.message.role": "assistant",
                f"{M}.3.message.function_call_name": "g",
                f"{M}.3.message.function_call_arguments_json": "{}",
            }
        )
    )
    assert adapted.request is not None
    assert adapted.request["messages"][1:] == [  # type: ignore[index]
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "checking"},
                {"type": "tool_call", "id": "c0", "name": "f"},
            ],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c0", "response": "done"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "name": "g", "arguments": "{}"}]},
    ]


def test_tools_from_json_schema_or_flat_fields_and_anthropic_input_schema() -> None:
    """Tools come from OpenAI's nested object, Anthropic's `input_schema`, or flat tool fields."""
    adapted = adapt(
        span(
            **{
                "llm.tools.0.tool.json_schema": json.dumps(
                    {
                        "type": "function",
                        "function": {"name": "a", "parameters": {"type": "object"}},
                    }
                ),
                "llm.tools.1.tool.json_schema": json.dumps(
                    {"name": "b", "description": "B", "input_schema": {"type": "object"}}
                ),
                "llm.tools.2.tool.name": "c",
                "llm.tools.2.tool.parameters": '{"type":"object"}',
            }
        )
    )
    assert adapted.request is not None
    assert adapted.request["tools"] == [
        {"type": "function", "name": "a", "parameters": {"type": "object"}},
        {"type": "function", "name": "b", "description": "B", "parameters": {"type": "object"}},
        {"type": "function", "name": "c", "parameters": {"type": "object"}},
    ]


def test_dials_and_model_come_from_the_invocation_parameters() -> None:
    """The caller's argument names map to GenAI dials; the model is the requested one."""
    params = {
        "model": "gpt-4o",
        "max_completion_tokens": 100,
        "stop": "END",
        "n": 1,
        "tool_choice": "required",
        "logprobs": True,
    }
    adapted = adapt(span(**{"llm.invocation_parameters": json.dumps(params)}))
    assert adapted.request is not None
    assert adapted.request["params"] == {
        "max_tokens": 100,
        "stop_sequences": ["END"],
        "tool_choice": "required",
    }
    assert (adapted.request["model"], adapted.request["provider"]) == ("gpt-4o", "azure.ai.openai")


def test_model_falls_back_to_llm_model_name_with_a_note() -> None:
    """Without invocation parameters, `llm.model_name` (a response model here) is used, noted."""
    adapted = adapt(span(**{"llm.invocation_parameters": None}))
    assert adapted.request is not None
    assert adapted.request["model"] == "gpt-4o-2024-08-06"
    assert NOTE_MODEL_FROM_RESPONSE in adapted.notes
    newer = adapt(span(**{"llm.request.model_name": "gpt-4o-mini"}))
    assert newer.request is not None
    assert newer.request["model"] == "gpt-4o-mini"


@pytest.mark.parametrize("value", ["__REDACTED__", "{bad", "[1]", 7])
def test_unreadable_dials_leave_params_empty_with_a_note(value: object) -> None:
    """Dials that cannot be read are not guessed: params are empty and the note says why."""
    adapted = adapt(span(**{"llm.invocation_parameters": value}))
    assert adapted.request is not None
    assert adapted.request["params"] == {}
    assert NOTE_PARAMS_UNREADABLE in adapted.notes


def test_completion_prompts_are_user_messages() -> None:
    """`llm.prompts.N.prompt.text` (completions API) are user turns when no messages exist."""
    adapted = adapt(
        span(**{f"{M}.0.message.role": None, f"{M}.0.message.content": None,
                "llm.prompts.0.prompt.text": "Once upon"})
    )  # fmt: skip
    assert adapted.request is not None
    assert adapted.request["messages"] == [
        {"role": "user", "parts": [{"type": "text", "content": "Once upon"}]}
    ]


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({f"{M}.0.message.role": None, f"{M}.0.message.content": None}, names.REASON_NOT_CAPTURED),
        ({f"{M}.0.message.content": "__REDACTED__"}, names.REASON_REDACTED),
        ({f"{M}.2.message.role": "user"}, names.REASON_CUT),
        ({f"{M}.0.message.role": 3}, names.REASON_UNREADABLE),
        ({f"{M}.0.message.name": ["x"]}, names.REASON_UNREADABLE),
        ({f"{M}.0.message.tool_calls.0.tool_call.id": "c"}, names.REASON_UNREADABLE),
        ({f"{M}.0.message.contents.1.message_content.type": "text"}, names.REASON_CUT),
        ({f"{M}.0.message.contents.0.message_content.text": "x"}, names.REASON_UNREADABLE),
        ({f"{M}.0.message.contents.0.message_content.type": "image",
          f"{M}.0.message.contents.0.message_content.image.image.url": "__REDACTED__"},
         names.REASON_REDACTED),
        ({"llm.tools.0.tool.json_schema": "__REDACTED__"}, names.REASON_REDACTED),
        ({"llm.tools.0.tool.json_schema": '{"type":"function"}'}, names.REASON_UNREADABLE),
        ({"llm.tools.1.tool.json_schema": '{"name":"f"}'}, names.REASON_CUT),
    ],
)  # fmt: skip
def test_spans_without_a_whole_request_give_a_reason(extra: dict[str, Any], reason: str) -> None:
    """Hidden, placeholder, holed or mistyped content never yields a request."""
    adapted = adapt(span(**extra))
    assert (adapted.request, adapted.absent_reason) == (None, reason)


def test_anthropic_thinking_and_tool_use_entries_read_as_the_request_held_them() -> None:
    """openinference-anthropic's reasoning entry is a reasoning part with its signature, and its
    tool_use entry (a copy of the tool call) is not a part of its own."""
    a = f"{M}.1.message"
    adapted = adapt(
        span(
            **{
                f"{a}.role": "assistant",
                f"{a}.contents.0.message_content.type": "reasoning",
                f"{a}.contents.0.message_content.text": "Weighing it.",
                f"{a}.contents.0.message_content.signature": "sig==",
                f"{a}.contents.1.message_content.type": "tool_use",
                f"{a}.contents.1.tool_call.id": "t1",
                f"{a}.contents.1.tool_call.function.name": "get_time",
                f"{a}.tool_calls.0.tool_call.id": "t1",
                f"{a}.tool_calls.0.tool_call.function.name": "get_time",
                f"{a}.tool_calls.0.tool_call.function.arguments": "{}",
            }
        )
    )
    assert adapted.request is not None
    parts = adapted.request["messages"][1]["parts"]  # type: ignore[index]
    assert parts == [
        {"type": "reasoning", "content": "Weighing it.", "signature": "sig=="},
        {"type": "tool_call", "id": "t1", "name": "get_time", "arguments": "{}"},
    ]


def test_steering_settings_are_read_from_the_invocation_parameters() -> None:
    """tool_choice, parallel_tool_calls, response_format, reasoning_effort and thinking are read."""
    given = {
        "model": "gpt-4o",
        "tool_choice": "none",
        "parallel_tool_calls": False,
        "response_format": {"type": "json_object"},
        "reasoning_effort": "low",
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    adapted = adapt(span(**{"llm.invocation_parameters": json.dumps(given)}))
    assert adapted.request is not None
    params = adapted.request["params"]
    assert params == {k: v for k, v in given.items() if k != "model"}


def test_a_model_taken_from_the_response_is_named_unrecorded() -> None:
    """Without a request model on the span, `model` is an unrecorded field."""
    plain = span(**{"llm.invocation_parameters": json.dumps({"temperature": 0.3})})
    adapted = adapt(plain)
    assert adapted.request is not None
    request = Request.from_dict(adapted.request)
    scope = "openinference.instrumentation.openai"
    assert "model" in ledger.unrecorded(request, scope, "openinference", adapted.notes)
    whole = adapt(span())
    assert whole.request is not None
    named = Request.from_dict(whole.request)
    assert "model" not in ledger.unrecorded(named, scope, "openinference", whole.notes)


def test_an_anthropic_request_reads_back_in_the_messages_api_shape() -> None:
    """openinference-anthropic's system message is the request's system, and tool results it split
    off a user turn join that turn again: the same request as genai-anthropic records it."""
    attrs = {
        "openinference.span.kind": "LLM",
        "llm.provider": "anthropic",
        "llm.invocation_parameters": json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 256}),
        f"{M}.0.message.role": "system",
        f"{M}.0.message.content": "You are a helpful assistant.",
        f"{M}.1.message.role": "user",
        f"{M}.1.message.content": "What is the weather in Paris?",
        f"{M}.2.message.role": "assistant",
        f"{M}.2.message.tool_calls.0.tool_call.id": "call_1",
        f"{M}.2.message.tool_calls.0.tool_call.function.name": "get_weather",
        f"{M}.2.message.tool_calls.0.tool_call.function.arguments": '{"city":"Paris"}',
        f"{M}.3.message.role": "tool",
        f"{M}.3.message.tool_call_id": "call_1",
        f"{M}.3.message.content": "18C and sunny",
        "llm.tools.0.tool.json_schema": json.dumps(expected.WEATHER_TOOL),
    }
    adapted = adapt(attrs)
    assert adapted.request is not None
    assert Request.from_dict(adapted.request) == Request.from_dict(expected.anthropic_weather())
