"""What every stack agent of this folder shares, run inside its side venv: the tracer provider
with af_otel's processor writing OTLP JSON lines, an HTTP client that reroutes each request to the
loopback server with the id of the span current while it was sent, the two tools and the four
questions (each answered in two model calls: a tool call, then the answer: 8 calls a run).

It imports af_otel, OpenTelemetry and the standard library only, so it runs in any side venv with
the repository on ``PYTHONPATH``.
"""

from __future__ import annotations

import importlib
import json
import sys
from importlib import metadata
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import af_otel
from af_otel.store import LocalStore

SPAN_HEADER = "x-af-wire-span"  # tests/wire/loopback.py names it too
QUESTIONS = (
    "What is the weather in Paris?",
    "And what time is it there?",
    "Weather in Oslo, please.",
    "What time is it in Lima?",
)
INSTRUCTIONS = "You are a terse travel assistant. Use the tools."
TEMPERATURE = 0.3
MAX_TOKENS = 400


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 18C and sunny"


def get_time() -> str:
    """The local time now."""
    return "14:05"


def provider(config: dict[str, Any]) -> TracerProvider:
    """A tracer provider with af_otel's processor in front of a JSON-lines file exporter (with
    ``form: exporter``, the exporter form: `RunTagger` around a processor of af_otel's exporter);
    span limits raised so that no call of the agent reaches them."""
    limits = SpanLimits(max_span_attributes=100_000, max_events=100_000)
    tracer_provider = TracerProvider(
        resource=Resource.create({"service.name": "stack-agent"}), span_limits=limits
    )
    exporter = FileSpanExporter(config["trace"])
    store = LocalStore(config["store"])
    if config.get("form") == "exporter":
        processor: Any = af_otel.RunTagger(
            SimpleSpanProcessor(af_otel.ReceiptSpanExporter(exporter, store=store))
        )
    else:
        processor = af_otel.ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=store)
    tracer_provider.add_span_processor(processor)
    trace.set_tracer_provider(tracer_provider)
    return tracer_provider


def http_module(client_module: str = "openai") -> Any:
    """The HTTP library the provider client sends through (openai 3.x: httpx2)."""
    base_client = importlib.import_module(client_module + "._base_client")
    return importlib.import_module("httpx2" if "httpx2" in vars(base_client) else "httpx")


def _reroute(request: Any, port: int) -> None:
    request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=port)
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        request.headers[SPAN_HEADER] = format(context.span_id, "016x")


def rerouted(http: Any, port: int, asynchronous: bool) -> Any:
    """An HTTP client of ``http`` (httpx or httpx2) whose transport sends every request to the
    loopback server over real HTTP, with the current span's id in a header."""
    if asynchronous:

        class AsyncReroute(http.AsyncHTTPTransport):  # type: ignore[misc,name-defined]
            async def handle_async_request(self, request: Any) -> Any:
                _reroute(request, port)
                return await super().handle_async_request(request)

        return http.AsyncClient(transport=AsyncReroute())

    class Reroute(http.HTTPTransport):  # type: ignore[misc,name-defined]
        def handle_request(self, request: Any) -> Any:
            _reroute(request, port)
            return super().handle_request(request)

    return http.Client(transport=Reroute())


def versions(*distributions: str) -> dict[str, str]:
    found = {}
    for name in (*distributions, "openai", "httpx", "httpx2", "opentelemetry-sdk"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def report(calls: int, *distributions: str, **extra: Any) -> None:
    """Print what ran as JSON (the harness reads it)."""
    json.dump({"calls": calls, "versions": versions(*distributions), **extra}, sys.stdout)
