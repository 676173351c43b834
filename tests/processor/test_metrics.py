"""The af_otel.receipts counter, through whatever MeterProvider is global when calls happen."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from af_otel import names
from af_otel.processor import metrics as receipt_metrics
from tests.processor.conftest import Pipeline
from tests.processor.helpers import chat, start_chat, user


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: provider)
    monkeypatch.setattr(receipt_metrics, "_counter", None)
    yield reader
    provider.shutdown()


def _points(reader: InMemoryMetricReader) -> dict[tuple[Any, Any], int]:
    data = reader.get_metrics_data()
    out: dict[tuple[Any, Any], int] = {}
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == names.METRIC_RECEIPTS:
                    for point in metric.data.data_points:  # type: ignore[union-attr]
                        attrs = point.attributes or {}
                        key = (attrs[names.METRIC_ATTR_STATE], attrs[names.METRIC_ATTR_REASON])
                        out[key] = int(point.value)  # type: ignore[union-attr]
    return out


def test_counter_counts_calls_by_state_and_reason(
    reader: InMemoryMetricReader, pipeline: Pipeline
) -> None:
    """Each LLM call adds one, labelled with its receipt state and absent reason."""
    chat(pipeline.tracer, [user("a")])
    chat(pipeline.tracer, [user("b")])
    start_chat(pipeline.tracer).end()
    assert _points(reader) == {
        (names.STATE_MINTED, "none"): 2,
        (names.STATE_ABSENT, names.REASON_NOT_CAPTURED): 1,
    }
