"""With the wire tap off, three requests OpenInference records wrongly or in part never read
`verified`: legacy ``functions``, a Responses call whose recorded tools are the response's echo,
and Anthropic's ``output_config``. Real instrumentations on the real clients over ``httpx2``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import af_otel
from af_otel import names
from af_otel.reader.verify import VerdictStatus
from af_otel.store import LocalStore
from tests.wire.replies import CHAT_REPLY, MESSAGE_REPLY

TOOL = {"name": "get_time", "description": "Time now.", "parameters": {"type": "object"}}
RESPONSE_REPLY = {
    "id": "resp_1",
    "object": "response",
    "created_at": 0,
    "model": "gpt-4o",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "m1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}],
        }
    ],
    # The API echoes the tools with its defaults filled in: `strict` the client never sent.
    "tools": [{"type": "function", **TOOL, "strict": True}],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
}


@pytest.fixture
def record(tmp_path: Path) -> Iterator[Callable[[str, Any, Callable[[Any], None]], Any]]:
    """Run one call under an OpenInference instrumentation with the tap off; its served view."""
    done: list[Any] = []

    def run(instrumentation: str, reply: Any, call: Callable[[Any], None]) -> Any:
        exporter, store = InMemorySpanExporter(), LocalStore(tmp_path / "store")
        provider = TracerProvider()
        processor = af_otel.ReceiptSpanProcessor(
            SimpleSpanProcessor(exporter), store=store, wire=False
        )
        provider.add_span_processor(processor)
        if instrumentation == "openai":
            from openinference.instrumentation.openai import OpenAIInstrumentor as Instrumentor
        else:
            from openinference.instrumentation.anthropic import (
                AnthropicInstrumentor as Instrumentor,
            )
        instrumentor = Instrumentor()
        instrumentor.instrument(tracer_provider=provider)
        done.append((instrumentor, provider))
        http = httpx2.Client(
            transport=httpx2.MockTransport(lambda _: httpx2.Response(200, json=reply))
        )
        if instrumentation == "openai":
            client: Any = openai.OpenAI(api_key="sk-test", http_client=http)
        else:
            client = anthropic.Anthropic(api_key="sk-ant-test", http_client=http)
        with af_otel.run("no-tap"):
            call(client)
        spans = exporter.get_finished_spans()
        (view,) = af_otel.served_views(tuple(af_otel.read_spans(spans)), store=store)
        return view

    yield run
    for instrumentor, provider in done:
        instrumentor.uninstrument()
        provider.shutdown()


def _unrecorded(view: Any) -> set[str]:
    found = view.gap(names.GAP_UNRECORDED)
    return set() if found is None else {f.strip() for f in found.detail.split(":")[-1].split(",")}


def test_legacy_functions_are_never_a_call_without_tools(record: Any) -> None:
    """A chat call with legacy ``functions`` (which OpenInference leaves off its tools) is not
    verified: ``functions`` and ``function_call`` are named unrecorded."""
    view = record(
        "openai",
        CHAT_REPLY,
        lambda c: c.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "Time?"}],
            functions=[TOOL],
            function_call="auto",
        ),
    )
    assert af_otel.verify(view).status != VerdictStatus.VERIFIED
    assert {"functions", "function_call"} <= _unrecorded(view)


def test_echoed_responses_tools_never_stand_in_for_the_requests(record: Any) -> None:
    """On a Responses call OpenInference records the tools the response echoes (``strict: true``
    the client never sent): they are left out, and ``tools`` is named unrecorded."""
    view = record(
        "openai",
        RESPONSE_REPLY,
        lambda c: c.responses.create(
            model="gpt-4o", input="Time?", tools=[{"type": "function", **TOOL}]
        ),
    )
    assert af_otel.verify(view).status != VerdictStatus.VERIFIED
    assert "tools" in _unrecorded(view)
    assert all("strict" not in tool for tool in view.tools or ())


def test_anthropic_output_config_is_named_unrecorded(record: Any) -> None:
    """Anthropic's ``output_config`` is in OpenInference's invocation parameters but in no
    receipt field: it is named unrecorded, so the call is not verified."""
    view = record(
        "anthropic",
        MESSAGE_REPLY,
        lambda c: c.messages.create(
            model="claude-sonnet-5-5",
            max_tokens=64,
            messages=[{"role": "user", "content": "Time?"}],
            output_config={"effort": "low"},
        ),
    )
    assert af_otel.verify(view).status != VerdictStatus.VERIFIED
    assert "output_config" in _unrecorded(view)


def test_a_plain_call_still_verifies(record: Any) -> None:
    """The control: the same chat call with ``tools`` instead verifies without the tap."""
    view = record(
        "openai",
        CHAT_REPLY,
        lambda c: c.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "Time?"}],
            tools=[{"type": "function", "function": TOOL}],
            tool_choice="auto",
            parallel_tool_calls=False,
            temperature=0.0,
        ),
    )
    assert _unrecorded(view) == set()
    assert af_otel.verify(view).status == VerdictStatus.VERIFIED
