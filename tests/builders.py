"""Builders the processor's and the reader's tests share: messages in the GenAI shape, the
attributes of a GenAI-convention LLM-call span, and a real SDK pipeline (TracerProvider ->
ReceiptSpanProcessor -> SimpleSpanProcessor -> InMemorySpanExporter)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from af_otel.processor import ReceiptSpanProcessor
from af_otel.store import LocalStore, Store
from af_otel.wire import uninstall

SYSTEM = [{"type": "text", "content": "You are terse."}]
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
TOOLS = [WEATHER]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "parts": [{"type": "text", "content": text}]}


def start_attributes(model: str = "gpt-4o-mini", provider: str = "anthropic") -> dict[str, Any]:
    """What a GenAI instrumentation sets when a chat call starts. The default provider's API takes
    the system prompt as a field of its own, so the recorded `system` is the request's (for
    OpenAI's it becomes the first message)."""
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
    }


def end_attributes(
    messages: Sequence[Mapping[str, Any]],
    *,
    system: Sequence[Mapping[str, Any]] | None = SYSTEM,
    tools: Sequence[Mapping[str, Any]] | None = TOOLS,
    temperature: float | None = 0.2,
) -> dict[str, Any]:
    """The request's content as a GenAI instrumentation records it (None leaves a part out)."""
    out: dict[str, Any] = {"gen_ai.input.messages": json.dumps(list(messages))}
    if system is not None:
        out["gen_ai.system_instructions"] = json.dumps(list(system))
    if tools is not None:
        out["gen_ai.tool.definitions"] = json.dumps(list(tools))
    if temperature is not None:
        out["gen_ai.request.temperature"] = temperature
    return out


def edited(attributes: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``attributes`` with ``changes`` keyed by attribute name with dots as ``__``; None removes."""
    out = dict(attributes)
    for key, value in changes.items():
        name = key.replace("__", ".")
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


@dataclass
class Pipeline:
    provider: TracerProvider
    tracer: Tracer
    exporter: InMemorySpanExporter
    processor: ReceiptSpanProcessor
    store: Store

    def spans(self) -> Any:
        return self.exporter.get_finished_spans()


def make_pipeline(store: Store, *, scope: str = "test", **options: Any) -> Pipeline:
    """``scope``: the tracer's instrumentation scope ("test" is one the field ledger does not know,
    so the reader names the settings such a writer may have left off)."""
    exporter = InMemorySpanExporter()
    processor = ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=store, **options)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return Pipeline(provider, provider.get_tracer(scope), exporter, processor, store)


def tapped_pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    """`make_pipeline` over a local store in ``tmp_path``, for a fixture to yield from: shut down
    after its test, and the wire tap's patches put back."""
    made = make_pipeline(LocalStore(tmp_path / "store"))
    yield made
    made.provider.shutdown()
    uninstall()
