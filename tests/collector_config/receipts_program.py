"""The traced program of the Prometheus end-to-end test: LLM calls, af_otel, and a /metrics page.

    python receipts_program.py with-receipt|without-receipt [--interval SECONDS]

It serves its metrics through opentelemetry-exporter-prometheus on a free 127.0.0.1 port,
prints `port <N>` once that port listens, then makes one LLM-call span every interval until
it is terminated. Calls go on for the whole run because Prometheus only sees a counter grow
between two scrapes: calls made before the first scrape would never show in `increase()`.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Literal

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import Counter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import start_http_server

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


def count_receipt_directly(counter: Counter, mode: Mode) -> None:
    """STAND-IN until af_otel.ReceiptSpanProcessor exists: add to af_otel.receipts what it would.

    The processor counts one receipt per LLM call: minted when the request content is on the
    span, absent with reason content-not-captured when it is not.
    """
    if mode == "with-receipt":
        counter.add(1, {names.METRIC_ATTR_STATE: names.STATE_MINTED, names.METRIC_ATTR_REASON: ""})
    else:
        counter.add(
            1,
            {
                names.METRIC_ATTR_STATE: names.STATE_ABSENT,
                names.METRIC_ATTR_REASON: names.REASON_NOT_CAPTURED,
            },
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["with-receipt", "without-receipt"])
    parser.add_argument("--interval", type=float, default=0.2)
    args = parser.parse_args(argv)
    mode: Mode = args.mode

    meter_provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = tracer_provider.get_tracer("receipts_program")
    counter = meter_provider.get_meter("af_otel").create_counter(names.METRIC_RECEIPTS)

    server, _ = start_http_server(0, addr="127.0.0.1")
    print(f"port {server.server_port}", flush=True)

    while True:
        with tracer.start_as_current_span(
            f"chat {MODEL}", kind=SpanKind.CLIENT, attributes=call_attributes(mode)
        ):
            pass
        count_receipt_directly(counter, mode)
        exporter.clear()  # the spans are not the subject here; keep memory flat
        time.sleep(args.interval)


if __name__ == "__main__":
    main()
