"""A real SDK pipeline per test: TracerProvider -> ReceiptSpanProcessor -> SimpleSpanProcessor ->
InMemorySpanExporter, with a local store in the test's own directory."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from af_otel.processor import ReceiptSpanProcessor
from af_otel.store import LocalStore, Store


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


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return LocalStore(tmp_path / "store")


@pytest.fixture
def pipeline(store: Store) -> Iterator[Pipeline]:
    made = make_pipeline(store)
    yield made
    made.provider.shutdown()
