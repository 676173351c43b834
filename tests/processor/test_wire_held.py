"""The server-held history with the wire tap on: a call minted from its record names what its
record shows, and a call minted from the body the client sent takes the wire reader's word (the
record's held-history scan is not made for it). Real SDK spans, a real httpx client over a
MockTransport, the processor's own tap."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from af_otel import names
from af_otel.semconv import responses
from tests.builders import Pipeline, start_attributes, tapped_pipeline

CHAT = "https://api.openai.com/v1/chat/completions"
# A tool result whose call is not in the request: the record shows history it does not carry.
ORPHAN = [
    {"role": "user", "parts": [{"type": "text", "content": "the time?"}]},
    {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "call_9", "response": "noon"}],
    },
]


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    yield from tapped_pipeline(tmp_path)


def _call(pipeline: Pipeline, body: dict[str, Any] | None) -> Any:
    attributes = {
        **start_attributes("gpt-4o", provider="openai"),
        "server.address": "api.openai.com",
    }
    with pipeline.tracer.start_as_current_span("chat gpt-4o", attributes=attributes) as span:
        if body is not None:
            answer = httpx.Response(200, json={"id": "x", "choices": []})
            with httpx.Client(transport=httpx.MockTransport(lambda _: answer)) as client:
                client.post(CHAT, content=orjson.dumps(body))
        span.set_attribute("gen_ai.input.messages", json.dumps(ORPHAN))
    (out,) = [s for s in pipeline.spans() if s.name == "chat gpt-4o"]
    return out.attributes


def test_a_call_minted_from_its_record_names_the_held_history_it_shows(
    pipeline: Pipeline,
) -> None:
    """No body sent under the span: the receipt comes from the record, whose orphaned tool
    result is named as server-held history."""
    attributes = _call(pipeline, None)
    assert attributes[names.RECEIPT_STATE] == names.STATE_MINTED
    assert attributes[names.HELD_HISTORY] == responses.TELLTALE_ORPHAN_RESULT
    assert names.GAP_HELD_HISTORY in attributes[names.GAPS]


def test_a_call_minted_from_the_wire_takes_the_wire_readers_word(pipeline: Pipeline) -> None:
    """The client sent the call's tool call with its result: the body shows no held history,
    so the call minted from it names none, whatever its record shows."""
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "the time?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_9",
                        "type": "function",
                        "function": {"name": "clock", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_9", "content": "noon"},
        ],
    }
    attributes = _call(pipeline, body)
    assert attributes[names.RECEIPT_STATE] == names.STATE_MINTED
    assert attributes[names.RECEIPT_SOURCE] == names.SOURCE_WIRE
    assert names.HELD_HISTORY not in attributes
    assert names.GAP_HELD_HISTORY not in attributes[names.GAPS]
