"""The run's close record: when an `af_otel.run` block exits, one ``af.run.close`` span names the
last epoch of each lane and its digest, in the processor form, the exporter form (filled in at
export, after the run's calls) and the hook form (through the global tracer), and never raises."""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import names
from af_otel.processor import ReceiptSpanExporter, RunTagger, closing, completion_hook, run
from af_otel.processor import engine as engine_module
from af_otel.store import Store
from tests.processor.conftest import Pipeline
from tests.processor.fakes import instrumented_openai, weather_agent
from tests.processor.helpers import af, assistant, llm_spans, user


def closes(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if s.name == names.RUN_CLOSE]


def chat(tracer: trace.Tracer, messages: list[dict[str, Any]]) -> None:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.input.messages": json.dumps(messages),
    }
    tracer.start_span("chat gpt-4o", attributes=attributes).end()


def three_calls(tracer: trace.Tracer, run_id: str) -> None:
    with tracer.start_as_current_span("agent"), run(run_id):
        history = [user("q0")]
        for turn in range(3):
            chat(tracer, history)
            history = [*history, assistant(f"a{turn}"), user(f"q{turn}")]


def _named(close: ReadableSpan) -> list[tuple[str, int, str]]:
    attrs = close.attributes or {}
    return list(
        zip(
            attrs[names.RUN_CLOSE_LANES],  # type: ignore[arg-type]
            attrs[names.RUN_CLOSE_EPOCHS],  # type: ignore[arg-type]
            attrs[names.RUN_CLOSE_DIGESTS],  # type: ignore[arg-type]
            strict=True,
        )
    )


def _last(calls: Sequence[ReadableSpan]) -> ReadableSpan:
    return max(calls, key=lambda s: af(s)[names.EPOCH])


def test_the_processor_form_closes_the_run_beside_its_last_call(pipeline: Pipeline) -> None:
    """One close span after the run's calls, naming the lane's last epoch and its digest, in the
    last call's trace with its parent; it is no LLM call."""
    three_calls(pipeline.tracer, "closing-p")
    spans = pipeline.spans()
    (close,) = closes(spans)
    calls = llm_spans(spans)
    last = _last(calls)
    assert _named(close) == [(af(last)[names.EPOCH_LANE], 3, af(last)[names.RECEIPT_DIGEST])]
    assert (close.attributes or {})[names.RUN_ID] == "closing-p"
    assert close.context is not None
    assert last.context is not None
    assert close.context.trace_id == last.context.trace_id
    assert close.parent is not None
    assert last.parent is not None
    assert close.parent.span_id == last.parent.span_id
    assert names.EPOCH not in (close.attributes or {})
    assert max(spans.index(c) for c in calls) < spans.index(close)


def test_a_run_without_calls_writes_no_close_record(pipeline: Pipeline) -> None:
    """A block that made no LLM call leaves nothing to close."""
    with run("empty"):
        pass
    assert closes(pipeline.spans()) == []


def test_the_exporter_form_fills_the_close_record_at_export(store: Store) -> None:
    """With RunTagger around a batch processor, the run's block exits before anything is
    exported; the exporter names its lane's last epoch in the close record when it exports it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    batch = BatchSpanProcessor(
        ReceiptSpanExporter(exporter, store=store), schedule_delay_millis=60_000
    )
    provider.add_span_processor(RunTagger(batch))
    three_calls(provider.get_tracer("test"), "closing-e")
    assert exporter.get_finished_spans() == ()  # nothing exported when the block exited
    provider.force_flush()
    spans = exporter.get_finished_spans()
    (close,) = closes(spans)
    last = _last(llm_spans(spans))
    assert _named(close) == [(af(last)[names.EPOCH_LANE], 3, af(last)[names.RECEIPT_DIGEST])]
    provider.shutdown()


def test_the_hook_form_closes_through_the_global_tracer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no af_otel processor, the hook minted the calls; the close record is made through
    the global tracer provider with the lane of the engine that minted them."""
    monkeypatch.setenv("AF_OTEL_STORE", str(tmp_path / "hook-store"))
    monkeypatch.setattr(engine_module, "_live", weakref.WeakSet())
    monkeypatch.setattr(engine_module, "_default", None)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(closing, "global_tracer", lambda: provider.get_tracer("af_otel"))
    with (
        instrumented_openai(provider, completion_hook=completion_hook) as client,
        run("closing-h"),
    ):
        weather_agent(client, turns=1)
    spans = exporter.get_finished_spans()
    (close,) = closes(spans)
    last = _last(llm_spans(spans))
    assert _named(close) == [(af(last)[names.EPOCH_LANE], 2, af(last)[names.RECEIPT_DIGEST])]


def test_closing_never_raises_into_the_application(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An internal failure while closing leaves the block's own exit alone; the calls are
    exported and the run is freed."""
    monkeypatch.delenv("AF_OTEL_STRICT")

    def broken(self: Any, run_id: str) -> None:
        raise RuntimeError("closing failed")

    monkeypatch.setattr(engine_module.Engine, "closing", broken)
    three_calls(pipeline.tracer, "closing-x")
    assert len(llm_spans(pipeline.spans())) == 3
    assert closes(pipeline.spans()) == []
    assert pipeline.processor.engine.runs.peek("closing-x") is None
