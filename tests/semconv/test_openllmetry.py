"""The OpenLLMetry adapter, both eras: indexed prompts and functions (<=0.54), GenAI keys (>=0.55)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from af_otel import names
from af_otel.semconv import adapt


def legacy(**extra: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "llm.request.type": "chat",
        "gen_ai.system": "Azure",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "hi",
    }
    attrs.update(extra)
    return {key: value for key, value in attrs.items() if value is not None}


def test_indexed_prompts_rebuild_in_index_order_whatever_the_key_order() -> None:
    """Keys arrive in any order; messages come out in index order, with tool calls and results."""
    attrs = legacy(
        **{
            "gen_ai.prompt.2.tool_call_id": "c1",
            "gen_ai.prompt.2.content": "4",
            "gen_ai.prompt.2.role": "tool",
            "gen_ai.prompt.1.tool_calls.1.name": "g",
            "gen_ai.prompt.1.tool_calls.0.arguments": '{"a":1}',
            "gen_ai.prompt.1.tool_calls.0.name": "f",
            "gen_ai.prompt.1.tool_calls.0.id": "c0",
            "gen_ai.prompt.1.tool_calls.1.id": "c1",
            "gen_ai.prompt.1.role": "assistant",
        }
    )
    adapted = adapt(dict(reversed(list(attrs.items()))))
    assert adapted.convention == "openllmetry-legacy"
    assert adapted.request is not None
    assert adapted.request["messages"] == [
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "c0", "name": "f", "arguments": '{"a":1}'},
                {"type": "tool_call", "id": "c1", "name": "g"},
            ],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "4"}]},
    ]
    assert adapted.request["provider"] == "azure.ai.openai"


def test_list_content_is_read_as_openai_blocks() -> None:
    """List content was written as the JSON of OpenAI's blocks; text and images become parts."""
    blocks = [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]
    adapted = adapt(legacy(**{"gen_ai.prompt.0.content": json.dumps(blocks)}))
    assert adapted.request is not None
    assert adapted.request["messages"][0]["parts"] == [  # type: ignore[index]
        {"type": "text", "content": "look"},
        {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "iVBORw0KGgo="},
    ]


def test_text_that_only_looks_like_a_list_stays_text() -> None:
    """A message that is a JSON list but not of typed blocks is the user's text."""
    adapted = adapt(legacy(**{"gen_ai.prompt.0.content": "[1, 2, 3]"}))
    assert adapted.request is not None
    assert adapted.request["messages"][0]["parts"] == [  # type: ignore[index]
        {"type": "text", "content": "[1, 2, 3]"}
    ]


def test_functions_become_tools_and_null_parameters_are_dropped() -> None:
    """`llm.request.functions.N.*` are function tools; `parameters` "null" means none."""
    adapted = adapt(
        legacy(
            **{
                "llm.request.functions.0.name": "f",
                "llm.request.functions.0.description": "does f",
                "llm.request.functions.0.parameters": '{"type":"object"}',
                "llm.request.functions.1.name": "g",
                "llm.request.functions.1.parameters": "null",
            }
        )
    )
    assert adapted.request is not None
    assert adapted.request["tools"] == [
        {
            "type": "function",
            "name": "f",
            "description": "does f",
            "parameters": {"type": "object"},
        },
        {"type": "function", "name": "g"},
    ]


def test_completions_prompt_is_a_user_message() -> None:
    """The completions API wrote `gen_ai.prompt.0.user`."""
    attrs = legacy(**{"gen_ai.prompt.0.role": None, "gen_ai.prompt.0.content": None})
    attrs["gen_ai.prompt.0.user"] = "Once upon"
    adapted = adapt({**attrs, "llm.request.type": "completion"})
    assert adapted.request is not None
    assert adapted.request["messages"] == [
        {"role": "user", "parts": [{"type": "text", "content": "Once upon"}]}
    ]


def test_llm_prefixed_dials_are_read() -> None:
    """Dials OpenLLMetry kept under `llm.*` are read as their GenAI names."""
    adapted = adapt(
        legacy(
            **{
                "gen_ai.request.temperature": 0.1,
                "llm.frequency_penalty": 0.2,
                "llm.presence_penalty": 0.3,
                "llm.top_k": 5,
                "llm.chat.stop_sequences": ("x",),
            }
        )
    )
    assert adapted.request is not None
    assert adapted.request["params"] == {
        "temperature": 0.1,
        "frequency_penalty": 0.2,
        "presence_penalty": 0.3,
        "top_k": 5,
        "stop_sequences": ["x"],
    }


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"gen_ai.prompt.0.role": None, "gen_ai.prompt.0.content": None}, names.REASON_NOT_CAPTURED),
        ({"gen_ai.prompt.2.role": "user"}, names.REASON_CUT),  # index 1 is missing
        ({"gen_ai.prompt.0.role": None}, names.REASON_UNREADABLE),
        ({"gen_ai.prompt.0.content": 42}, names.REASON_UNREADABLE),
        ({"gen_ai.prompt.0.content": "__REDACTED__"}, names.REASON_REDACTED),
        ({"gen_ai.prompt.0.tool_calls.1.name": "f"}, names.REASON_CUT),
        ({"gen_ai.prompt.0.tool_calls.0.id": "c"}, names.REASON_UNREADABLE),  # no name
        ({"llm.request.functions.0.parameters": "{}"}, names.REASON_UNREADABLE),  # no name
        ({"llm.request.functions.0.name": "f", "llm.request.functions.0.parameters": "{"},
         names.REASON_UNREADABLE),
        ({"llm.request.functions.0.name": "f", "llm.request.functions.0.parameters": "[1]"},
         names.REASON_UNREADABLE),
        ({"llm.request.functions.0.name": "f", "llm.request.functions.0.description": "****"},
         names.REASON_REDACTED),
    ],
)  # fmt: skip
def test_legacy_spans_without_a_whole_request_give_a_reason(
    extra: dict[str, Any], reason: str
) -> None:
    """Holes, missing roles, wrong types and placeholders never yield a request."""
    adapted = adapt(legacy(**extra))
    assert (adapted.request, adapted.absent_reason) == (None, reason)


def test_new_era_is_recognized_by_its_own_keys() -> None:
    """>=0.55 spans carry GenAI content plus keys only OpenLLMetry writes."""
    messages = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}])
    base = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": messages}
    for marker in ("gen_ai.is_streaming", "gen_ai.openai.api_base", "traceloop.workflow.name"):
        assert adapt({**base, marker: "x"}).convention == "openllmetry"
    # Indexed prompts next to GenAI content: the GenAI content is the record.
    assert adapt({**base, "gen_ai.prompt.0.role": "user"}).convention == "openllmetry"
