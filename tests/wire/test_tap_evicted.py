"""A body the tap had to drop is named, not silent: a call whose body its bounds dropped before
the call ended is minted from the instrumentation's record with `wire-body-evicted` on it, reads
`reconstructed` with that gap named (never `verified`), and the drop is counted on
``af_otel.wire.dropped``. The real ``openai`` client under OpenInference's instrumentation
against the local logging server; the bound is made small, the dropping is the tap's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import af_otel
from af_otel import names
from af_otel.processor import metrics as af_metrics
from af_otel.reader.verify import VerdictStatus
from af_otel.store import LocalStore
from af_otel.wire import tap, uninstall
from tests.builders import Pipeline, make_pipeline
from tests.wire.server import WireServer

TOOL = {"name": "get_time", "description": "Time now.", "parameters": {"type": "object"}}


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemoryMetricReader]:
    found = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[found])
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: provider)
    monkeypatch.setattr(af_metrics, "_counter", None)
    yield found
    provider.shutdown()


@pytest.fixture
def pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    """A processor with the tap on, whose table of sent bodies holds one call at a time."""
    monkeypatch.setattr(tap, "MAX_CALLS", 1)
    made = make_pipeline(LocalStore(tmp_path / "store"))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=made.provider)
    yield made
    instrumentor.uninstrument()
    made.provider.shutdown()
    uninstall()


def _ask(client: openai.OpenAI, question: str, *, stream: bool) -> Any:
    """A chat call OpenInference records whole (test_no_tap's control verifies without the tap)."""
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": question}],
        tools=[{"type": "function", "function": TOOL}],
        tool_choice="auto",
        parallel_tool_calls=False,
        temperature=0.0,
        stream=stream,
    )


def _dropped(reader: InMemoryMetricReader) -> int | None:
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == names.METRIC_WIRE_DROPPED:
                    (point,) = metric.data.data_points  # type: ignore[union-attr]
                    return int(point.value)  # type: ignore[union-attr]
    return None


def test_a_call_whose_body_was_dropped_says_so_and_never_verifies(
    pipeline: Pipeline, reader: InMemoryMetricReader
) -> None:
    """A streamed call stays open while a second call is sent: past the one-call bound the tap
    drops the first body. The second call is the wire's and verifies; the first is its record's,
    names `wire-body-evicted`, and reads reconstructed for it; one drop is counted."""
    with WireServer() as server:
        client = openai.OpenAI(
            api_key="sk-test", base_url=f"http://127.0.0.1:{server.port}/v1", max_retries=0
        )
        with af_otel.run("evicted"):
            stream = _ask(client, "Time in Oslo?", stream=True)  # its span is open until read
            _ask(client, "Time in Lima?", stream=False)
            for _ in stream:
                pass
        client.close()
    calls = {
        span.attributes.get("llm.input_messages.0.message.content"): span.attributes
        for span in pipeline.spans()
    }
    first, second = calls["Time in Oslo?"], calls["Time in Lima?"]
    assert first[names.RECEIPT_SOURCE] == names.SOURCE_INSTRUMENTATION
    assert names.GAP_WIRE_BODY_EVICTED in first[names.GAPS]
    assert second[names.RECEIPT_SOURCE] == names.SOURCE_WIRE
    assert names.GAP_WIRE_BODY_EVICTED not in second[names.GAPS]
    views = af_otel.served_views(tuple(af_otel.read_spans(pipeline.spans())), store=pipeline.store)
    verdicts = {
        view.messages[0]["parts"][0]["content"]: (view, af_otel.verify(view)) for view in views
    }
    view, verdict = verdicts["Time in Oslo?"]
    assert verdict.status == VerdictStatus.RECONSTRUCTED, verdict
    assert names.GAP_WIRE_BODY_EVICTED in str(verdict)
    assert view.gap(names.GAP_WIRE_BODY_EVICTED) is not None
    assert verdicts["Time in Lima?"][1].status == VerdictStatus.VERIFIED
    assert _dropped(reader) == 1


def test_the_marks_of_dropped_bodies_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the bound on marks the oldest dropped key is forgotten, the newest kept, and every
    drop is still counted."""
    monkeypatch.setattr(tap, "MAX_CALLS", 1)
    monkeypatch.setattr(tap, "MAX_EVICTED", 3)
    table = tap.SentTable()
    for index in range(6):
        table.add((1, index + 1), tap.Sent("openai.chat_completions", "h", b"{}"))
    assert table.dropped == 5
    assert not table.evicted((1, 1))
    assert table.evicted((1, 5))
    assert not table.evicted((1, 5))  # asked once
    assert table.take((1, 6)) != ()
    assert not table.evicted((1, 6))
