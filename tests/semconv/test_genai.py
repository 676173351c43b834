"""The OTel GenAI adapter: content slots, refs, placeholders, structured values, model/provider."""

from __future__ import annotations

import json
from typing import Any

import pytest

from af_otel import names
from af_otel.model import Request
from af_otel.semconv import NOTE_MODEL_FROM_RESPONSE, NOTE_MODEL_NOT_CAPTURED, adapt

USER = [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]


def span(**overrides: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-x",
        "gen_ai.response.model": "claude-x-2025",
        "gen_ai.input.messages": json.dumps(USER),
    }
    attrs.update({key.replace("__", "."): value for key, value in overrides.items()})
    return {key: value for key, value in attrs.items() if value is not None}


def test_system_instructions_become_system_parts() -> None:
    """`gen_ai.system_instructions` is the request's system, apart from the messages."""
    system = [{"type": "text", "content": "Be brief."}, {"type": "text", "content": "Cite."}]
    adapted = adapt(span(gen_ai__system_instructions=json.dumps(system)))
    assert adapted.request is not None
    assert adapted.request["system"] == system
    assert adapted.request["messages"] == USER


def test_structured_values_read_like_json_strings() -> None:
    """A structured attribute (tuple of dicts, as SDK maps allow) reads the same as its JSON."""
    tools = ({"type": "function", "name": "f", "parameters": {"type": "object"}},)
    as_json = adapt(span(gen_ai__tool__definitions=json.dumps(list(tools))))
    structured = adapt(span(gen_ai__input__messages=tuple(USER), gen_ai__tool__definitions=tools))
    assert as_json.request == structured.request
    assert structured.request is not None
    assert structured.request["tools"] == [dict(tools[0])]


def test_result_is_read_as_response() -> None:
    """The spec example's `result` key on tool_call_response is read as `response`."""
    messages = [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "c", "result": 4}]}]
    adapted = adapt(span(gen_ai__input__messages=json.dumps(messages)))
    assert adapted.request is not None
    assert adapted.request["messages"] == [
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c", "response": 4}]}
    ]


def test_params_are_read_by_table_and_choice_count_one_is_default() -> None:
    """Every gen_ai.request dial is read with its type; a choice count of 1 is the default."""
    adapted = adapt(
        span(
            gen_ai__request__temperature=0,
            gen_ai__request__max_tokens=256.0,
            gen_ai__request__top_p=1.0,
            gen_ai__request__top_k=40.0,
            gen_ai__request__stop_sequences=("a", "b"),
            gen_ai__request__seed=7,
            gen_ai__request__frequency_penalty=-0.5,
            gen_ai__request__presence_penalty=0.5,
            gen_ai__request__choice__count=1,
        )
    )
    assert adapted.request is not None
    assert adapted.request["params"] == {
        "temperature": 0,
        "max_tokens": 256,
        "top_p": 1.0,
        "top_k": 40.0,
        "stop_sequences": ["a", "b"],
        "seed": 7,
        "frequency_penalty": -0.5,
        "presence_penalty": 0.5,
    }


def test_wrongly_typed_dials_are_left_out() -> None:
    """A dial of the wrong type is not a dial: a bool temperature, a string max_tokens, NaN."""
    adapted = adapt(
        span(
            gen_ai__request__temperature=True,
            gen_ai__request__max_tokens="256",
            gen_ai__request__top_p=float("nan"),
            gen_ai__request__stop_sequences=("a", 1),
        )
    )
    assert adapted.request is not None
    assert adapted.request["params"] == {}


def test_model_is_the_request_model_and_provider_is_normalized() -> None:
    """The request model wins over the response model; `gen_ai.system` and aliases normalize."""
    adapted = adapt(span(gen_ai__provider__name=None, gen_ai__system="az.ai.openai"))
    assert adapted.request is not None
    assert (adapted.request["model"], adapted.request["provider"]) == (
        "claude-x",
        "azure.ai.openai",
    )


def test_model_falls_back_to_the_response_model_with_a_note() -> None:
    """Without a request model the response model is used, and the note says so."""
    fallback = adapt(span(gen_ai__request__model=None))
    assert fallback.request is not None
    assert fallback.request["model"] == "claude-x-2025"
    assert NOTE_MODEL_FROM_RESPONSE in fallback.notes
    none = adapt(span(gen_ai__request__model=None, gen_ai__response__model=None))
    assert none.request is not None
    assert "model" not in none.request
    assert NOTE_MODEL_NOT_CAPTURED in none.notes


def test_missing_tool_definitions_read_as_no_tools() -> None:
    """No `gen_ai.tool.definitions` reads as no tools, as an empty list does (the field ledger
    says whether the instrumentation would have recorded them)."""
    adapted = adapt(span())
    assert adapted.request is not None
    assert adapted.request["tools"] == []
    with_tools = adapt(span(gen_ai__tool__definitions="[]"))
    assert with_tools.request is not None
    assert with_tools.request["tools"] == []


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"gen_ai__input__messages": None}, names.REASON_NOT_CAPTURED),
        (
            {"gen_ai__input__messages": None, "gen_ai__input__messages_ref": "s3://b/k"},
            names.REASON_EXTERNAL,
        ),
        ({"gen_ai__system_instructions_ref": "file:///s.json"}, names.REASON_EXTERNAL),
        ({"gen_ai__tool__definitions_ref": "file:///t.json"}, names.REASON_EXTERNAL),
        ({"gen_ai__input__messages": "__REDACTED__"}, names.REASON_REDACTED),
        ({"gen_ai__input__messages": "****"}, names.REASON_REDACTED),
        ({"gen_ai__system_instructions": "[REDACTED]"}, names.REASON_REDACTED),
        (
            {"gen_ai__input__messages": '[{"role":"user","parts":[{"type":"text","content":"REDACTED"}]}]'},
            names.REASON_REDACTED,
        ),
        ({"gen_ai__input__messages": "[{"}, names.REASON_UNREADABLE),
        ({"gen_ai__input__messages": '{"role":"user"}'}, names.REASON_UNREADABLE),
        ({"gen_ai__input__messages": '[{"parts":[]}]'}, names.REASON_UNREADABLE),
        ({"gen_ai__input__messages": '[{"role":"user","parts":[{"content":"x"}]}]'}, names.REASON_UNREADABLE),
        ({"gen_ai__input__messages": '[{"role":"user","parts":[],"name":3}]'}, names.REASON_UNREADABLE),
        ({"gen_ai__input__messages": '[{"role":"user","content":5}]'}, names.REASON_UNREADABLE),
        ({"gen_ai__input__messages": "null"}, names.REASON_UNREADABLE),
        ({"gen_ai__tool__definitions": '[{"name":"f","type":5}]'}, names.REASON_UNREADABLE),
        ({"gen_ai__input__messages": '[{"role":"user","parts":[{"type":"x","v":NaN}]}]'}, names.REASON_UNREADABLE),
        ({"gen_ai__input__messages": b"[]"}, names.REASON_UNREADABLE),
        ({"gen_ai__tool__definitions": '[{"type":"function"}]'}, names.REASON_UNREADABLE),
    ],
)  # fmt: skip
def test_no_request_is_made_from_withheld_or_broken_content(
    overrides: dict[str, Any], reason: str
) -> None:
    """Absent, external, placeholder and unreadable content each give their own reason."""
    adapted = adapt(span(**overrides))
    assert (adapted.request, adapted.absent_reason) == (None, reason)


def test_content_present_beats_its_ref() -> None:
    """A slot with both content and a `_ref` (upload hook in span_and_upload mode) is read."""
    adapted = adapt(span(gen_ai__input__messages_ref="file:///m.json"))
    assert adapted.absent_reason is None


def test_a_message_that_mentions_redaction_is_content() -> None:
    """Only a whole-value placeholder withholds content; text about redaction is text."""
    messages = [{"role": "user", "parts": [{"type": "text", "content": "Why was it REDACTED?"}]}]
    adapted = adapt(span(gen_ai__input__messages=json.dumps(messages)))
    assert adapted.request is not None


def test_lone_surrogates_in_json_are_read() -> None:
    """Escaped lone surrogates (which orjson refuses) are read; canonical JSON replaces them."""
    raw = '[{"role":"user","parts":[{"type":"text","content":"a\\ud800b"}]}]'
    adapted = adapt(span(gen_ai__input__messages=raw))
    assert adapted.request is not None
    Request.from_dict(adapted.request)


def test_messages_are_read_by_the_request_models_rules() -> None:
    """A message spelled with `content` (a string or a list of parts) reads as its parts, as
    `Request.from_dict` reads it; the request handed on is already in that shape."""
    spelled = [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": [{"type": "text", "content": "hi"}, "there"]},
    ]
    adapted = adapt(span(gen_ai__input__messages=json.dumps(spelled)))
    assert adapted.request is not None
    assert adapted.request["messages"] == [
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
        {
            "role": "user",
            "parts": [{"type": "text", "content": "hi"}, {"type": "text", "content": "there"}],
        },
    ]


def test_unknown_part_types_are_kept_as_they_are() -> None:
    """Parts of types af_otel does not know are kept, field for field."""
    part = {"type": "server_tool_call", "id": "s1", "name": "web", "server_tool_call": {"q": "x"}}
    messages = [{"role": "assistant", "parts": [part]}]
    adapted = adapt(span(gen_ai__input__messages=json.dumps(messages)))
    assert adapted.request is not None
    assert adapted.request["messages"] == messages
