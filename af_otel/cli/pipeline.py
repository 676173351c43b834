"""A ready tracer provider that writes OTLP JSON lines through af_otel: for the demo, and for
anyone who wants a file they can hand to ``af-otel served`` without running a collector."""

from __future__ import annotations

import os
from importlib import import_module
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from af_otel.processor.processor import ReceiptSpanProcessor
from af_otel.store import Store


def json_lines_provider(
    path: str | os.PathLike[str],
    *,
    store: Store | str | os.PathLike[str] | None = None,
    service_name: str = "af-otel",
    **options: Any,
) -> TracerProvider:
    """A `TracerProvider` whose spans go through `ReceiptSpanProcessor` into a batch processor
    appending OTLP JSON lines to ``path`` (``opentelemetry-exporter-otlp-json-file``, one OTLP
    request per line, hex ids and integer enums as a collector's file exporter writes them).
    ``options`` are `ReceiptSpanProcessor`'s. Shut the provider down to flush the file."""
    exporter_module = import_module("opentelemetry.exporter.otlp.json.file.trace_exporter")
    exporter = exporter_module.FileSpanExporter(path)
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(
        ReceiptSpanProcessor(BatchSpanProcessor(exporter), store=store, **options)
    )
    return provider
