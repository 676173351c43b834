"""Real recordings for the reader's tests: the OTel SDK with `ReceiptSpanProcessor` and an
in-memory exporter, LLM-call spans in the GenAI (and OpenInference) conventions, read back through
the reader's own SDK source. Plus small editors that damage a recording the way backends and
people do (drop a span or an event, cut or edit an attribute)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, SpanKind

from af_otel import names
from af_otel.processor import run
from af_otel.reader.records import EventRecord, SpanRecord
from af_otel.reader.sources import read_spans
from af_otel.receipts import Receipt, receipt_digest
from af_otel.store import Store
from tests.builders import (
    WEATHER,
    assistant,
    edited,
    end_attributes,
    make_pipeline,
    start_attributes,
    user,
)

# Markup in the instructions, so a report that forgets to escape shows it.
SYSTEM = [{"type": "text", "content": "You are terse. <b>Bold</b> & careful."}]


def tool_turn(index: int) -> list[dict[str, Any]]:
    """An assistant tool call and the tool's answer."""
    call_id = f"call_{index}"
    return [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": call_id,
                    "name": "get_weather",
                    "arguments": {"city": f"C{index}"},
                }
            ],
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": call_id, "response": f"sunny {index}"}],
        },
    ]


# The scope of af_otel's explicit API, the one writer the field ledger says records every field:
# these recordings stand for a record that holds the whole request.
WHOLE_RECORD = "af_otel"


class Recorder:
    """One SDK pipeline; each `chat` is one whole LLM-call span."""

    def __init__(
        self,
        store: Store,
        scope: str = WHOLE_RECORD,
        provider: TracerProvider | None = None,
        **options: Any,
    ) -> None:
        if provider is None:
            pipeline = make_pipeline(store, scope=scope, **options)
            provider, self.exporter = pipeline.provider, pipeline.exporter
        else:
            self.exporter = InMemorySpanExporter()
        self.provider = provider
        # The scope decides, for the writer, whether the provider SDK's own instrumentation made
        # the span (then nothing else stood between the record and the wire).
        self.tracer = self.provider.get_tracer(scope)

    def start(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        system: Sequence[Mapping[str, Any]] | None = SYSTEM,
        tools: Sequence[Mapping[str, Any]] | None = (WEATHER,),
        temperature: float | None = 0.2,
        model: str = "gpt-4o-mini",
        provider: str = "anthropic",
    ) -> Span:
        attributes = {
            **start_attributes(model, provider),
            "server.address": "api.openai.com" if provider == "openai" else "api.anthropic.com",
        }
        span = self.tracer.start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes)
        span.set_attributes(
            end_attributes(messages, system=system, tools=tools, temperature=temperature)
        )
        return span

    def chat(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> None:
        self.start(messages, **kwargs).end()

    def blind_chat(self, model: str = "gpt-4o-mini") -> None:
        """An LLM call whose content the instrumentation did not capture."""
        attributes = start_attributes(model)
        self.tracer.start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes).end()

    def openinference_chat(
        self,
        messages: Sequence[Mapping[str, str]],
        tools: Sequence[Mapping[str, Any]],
        params: Mapping[str, Any],
    ) -> None:
        attributes: dict[str, Any] = {
            "openinference.span.kind": "LLM",
            "llm.provider": "openai",
            "llm.invocation_parameters": json.dumps({"model": "gpt-4o", **params}),
        }
        for i, message in enumerate(messages):
            attributes[f"llm.input_messages.{i}.message.role"] = message["role"]
            attributes[f"llm.input_messages.{i}.message.content"] = message["content"]
        for i, tool in enumerate(tools):
            attributes[f"llm.tools.{i}.tool.json_schema"] = json.dumps(tool)
        # As OpenInference's own instrumentation, which the field ledger says records every setting.
        tracer = self.provider.get_tracer("openinference.instrumentation.openai")
        tracer.start_span("ChatCompletion", attributes=attributes).end()

    def records(self) -> tuple[SpanRecord, ...]:
        return tuple(read_spans(self.exporter))

    def close(self) -> None:
        self.provider.shutdown()


@contextmanager
def file_recorder(path: Path, store: Store, **options: Any) -> Iterator[Recorder]:
    """A recorder whose spans go to OTLP JSON lines at ``path`` (the provider af_otel ships for
    that); the file is complete when the block exits."""
    from af_otel.cli.pipeline import json_lines_provider

    provider = json_lines_provider(path, store=store, service_name="reader-tests", **options)
    made = Recorder(store, provider=provider)
    try:
        yield made
    finally:
        made.close()


@contextmanager
def recorder(store: Store, **options: Any) -> Iterator[Recorder]:
    made = Recorder(store, **options)
    try:
        yield made
    finally:
        made.close()


def agent(
    rec: Recorder,
    run_id: str,
    turns: int,
    *,
    base: Mapping[str, Any] | None = None,
    fan_out_at: int | None = None,
) -> list[dict[str, Any]]:
    """An agent loop: each turn asks the model, calls a tool, answers. ``fan_out_at`` makes that
    turn two overlapping calls (parallel calls share their parent)."""
    history: list[dict[str, Any]] = list(base["messages"]) if base else []
    with run(run_id, base=base):
        for turn in range(1, turns + 1):
            history.append(user(f"question {turn}"))
            if fan_out_at == turn:
                first = rec.start(history)
                second = rec.start([*history, user("(a parallel branch)")])
                second.end()
                first.end()
            else:
                rec.chat(history)
            history.extend(tool_turn(turn))
            history.append(assistant(f"answer {turn}"))
    return history


def record_agent(
    store: Store, run_id: str = "run-1", turns: int = 4, scope: str = WHOLE_RECORD, **kwargs: Any
) -> tuple[SpanRecord, ...]:
    with recorder(store, scope=scope) as rec:
        agent(rec, run_id, turns, **kwargs)
        return rec.records()


# -- damage ------------------------------------------------------------------------------------


def one_character_changed(data: bytes) -> bytes:
    """``data`` with its last letter or digit changed to another (the JSON stays JSON)."""
    at = max(i for i, b in enumerate(data) if chr(b).isalnum())
    new = b"0" if data[at : at + 1] != b"0" else b"1"
    return data[:at] + new + data[at + 1 :]


def llm_spans(spans: Sequence[SpanRecord], run_id: str | None = None) -> list[SpanRecord]:
    out = [s for s in spans if names.RUN_ID in s.attributes and names.EPOCH in s.attributes]
    if run_id is not None:
        out = [s for s in out if s.attributes[names.RUN_ID] == run_id]
    return sorted(out, key=lambda s: int(s.attributes[names.EPOCH]))  # type: ignore[arg-type]


def span_of(spans: Sequence[SpanRecord], epoch: int, run_id: str | None = None) -> SpanRecord:
    return next(s for s in llm_spans(spans, run_id) if s.attributes[names.EPOCH] == epoch)


def replace_span(
    spans: Sequence[SpanRecord], old: SpanRecord, new: SpanRecord | None
) -> tuple[SpanRecord, ...]:
    out = []
    for span in spans:
        if span is old:
            if new is not None:
                out.append(new)
        else:
            out.append(span)
    return tuple(out)


def with_attributes(span: SpanRecord, **changes: Any) -> SpanRecord:
    """``changes`` keyed by attribute name with dots as ``__``; None removes the attribute."""
    return dataclasses.replace(span, attributes=edited(span.attributes, changes))


def as_written(spans: Sequence[SpanRecord]) -> tuple[SpanRecord, ...]:
    """The spans as a writer that set their attributes so would have sealed them: each af-2
    receipt's parent digest and digest recomputed from the span's attributes, lane by lane in
    epoch order (af-2 binds gaps, unrecorded fields, scope..., and each epoch its parent's digest,
    so editing one without this is damage, not the record of another writer)."""
    digests: dict[tuple[object, object], str] = {}
    out = list(spans)
    order = sorted(range(len(out)), key=lambda i: int(out[i].attributes.get(names.EPOCH, 0)))
    for index in order:
        span = out[index]
        receipt = Receipt.from_attributes(span.attributes)
        if not (isinstance(receipt, Receipt) and receipt.binds_context):
            continue
        lane = span.attributes.get(names.EPOCH_LANE)
        parent = digests.get((lane, receipt.parent), "") if receipt.parent else ""
        receipt = dataclasses.replace(receipt, parent_digest=parent or None)
        digest = receipt_digest(receipt)
        assert digest is not None
        digests[(lane, receipt.epoch)] = digest
        out[index] = with_attributes(
            span, af__receipt__parent_digest=parent or None, af__receipt__digest=digest
        )
    return tuple(out)


def edit_events(span: SpanRecord, edit: Callable[[EventRecord], EventRecord | None]) -> SpanRecord:
    events = tuple(e for e in (edit(event) for event in span.events) if e is not None)
    return dataclasses.replace(span, events=events)


def commit_events(span: SpanRecord) -> list[EventRecord]:
    return [e for e in span.events if e.name == names.COMMIT_EVENT]


def event_with(event: EventRecord, **changes: Any) -> EventRecord:
    """As `with_attributes`, on a span event."""
    return dataclasses.replace(event, attributes=edited(event.attributes, changes))


def cut_strings(span: SpanRecord, limit: int = 2048) -> SpanRecord:
    """What Tempo does at its default attribute limit: every string longer than ``limit`` bytes is
    cut to ``limit`` bytes, on the span and its events."""

    def cut(attributes: Mapping[str, Any]) -> dict[str, Any]:
        out = {}
        for key, value in attributes.items():
            too_long = isinstance(value, str) and len(value.encode("utf-8")) > limit
            out[key] = (
                value.encode("utf-8")[:limit].decode("utf-8", "replace") if too_long else value
            )
        return out

    events = tuple(dataclasses.replace(e, attributes=cut(e.attributes)) for e in span.events)
    return dataclasses.replace(span, attributes=cut(span.attributes), events=events)
