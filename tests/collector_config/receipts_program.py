"""The traced program of the Prometheus end-to-end test: LLM calls, af_otel, and a /metrics page.

    python receipts_program.py with-receipt|without-receipt --store DIR [--interval SECONDS]

Its spans go through the real af_otel.ReceiptSpanProcessor (wrapping a SimpleSpanProcessor and
an in-memory exporter), which counts every call on af_otel.receipts through the global
MeterProvider; that provider's metrics are served by opentelemetry-exporter-prometheus on a
free 127.0.0.1 port. The program prints `port <N>` once that port listens, then makes one
LLM-call span every interval until it is terminated. Calls go on for the whole run because
Prometheus only sees a counter grow between two scrapes: calls made before the first scrape
would never show in `increase()`. A span whose receipt state is not the one its mode expects
stops the program with exit status 1, so that the test cannot pass on the wrong spans.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Literal

from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import start_http_server

import af_otel
from af_otel import names

Mode = Literal["with-receipt", "without-receipt"]
RUN_ID = "e2e-run-1"
MODEL = "gpt-4o-mini"
MESSAGES = [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]


def call_attributes(mode: Mode) -> dict[str, str]:
    """What an OTel GenAI instrumentation puts on a chat span; content only when captured."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": MODEL,
    }
    if mode == "with-receipt":
        attributes["gen_ai.input.messages"] = json.dumps(MESSAGES)
        attributes[names.RUN_ID] = RUN_ID
    return attributes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["with-receipt", "without-receipt"])
    parser.add_argument("--store", required=True, help="af_otel store directory for run bases")
    parser.add_argument("--interval", type=float, default=0.2)
    args = parser.parse_args(argv)
    mode: Mode = args.mode

    metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader()]))
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(
        af_otel.ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=args.store)
    )
    tracer = tracer_provider.get_tracer("receipts_program")

    server, _ = start_http_server(0, addr="127.0.0.1")
    print(f"port {server.server_port}", flush=True)

    expected = names.STATE_MINTED if mode == "with-receipt" else names.STATE_ABSENT
    while True:
        with tracer.start_as_current_span(
            f"chat {MODEL}", kind=SpanKind.CLIENT, attributes=call_attributes(mode)
        ):
            pass
        (span,) = exporter.get_finished_spans()
        state = (span.attributes or {}).get(names.RECEIPT_STATE)
        if state != expected:
            sys.exit(f"span {span.name} has {names.RECEIPT_STATE}={state!r}, expected {expected!r}")
        exporter.clear()  # keep memory flat over the run
        time.sleep(args.interval)


if __name__ == "__main__":
    main()
