"""What the Google and Bedrock stack agents share: the tracer provider with af_otel's processor
writing OTLP JSON lines, a rerouting httpx/httpx2 transport that tags each request with the
current span, the google-genai client over it (Gemini API or Vertex AI), the two tools, and the
questions. Imported by the agent scripts, which run in side
venvs with the repository on their path; it imports nothing from the other tests."""

from __future__ import annotations

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
# The Vertex AI agent's bearer token: the tests look for it in everything af_otel wrote.
VERTEX_TOKEN = "ya29.af-otel-vertex-token-never-stored"
QUESTIONS = (
    "What is the weather in Paris?",
    "And what time is it there?",
    "Weather in Oslo, please.",
    "What time is it in Lima?",
)
WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    },
}
TIME = {
    "name": "get_time",
    "description": "The local time now.",
    "schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def tool_output(name: str, turn: int) -> str:
    if name == "get_time":
        return f"{9 + turn % 10}:{turn % 6}0 local time"
    return f"{12 + turn % 9}C, {'sunny' if turn % 2 else 'light rain'}"


def provider(config: dict[str, Any], service: str) -> TracerProvider:
    limits = SpanLimits(max_span_attributes=100_000, max_events=100_000)
    made = TracerProvider(resource=Resource.create({"service.name": service}), span_limits=limits)
    made.add_span_processor(
        af_otel.ReceiptSpanProcessor(
            SimpleSpanProcessor(FileSpanExporter(config["trace"])),
            store=LocalStore(config["store"]),
        )
    )
    return made


def conversation_scope(config: dict[str, Any], tracer_provider: TracerProvider) -> Any:
    """Where the agent's calls run: an ``af_otel.run`` block (``run``, the default), else a plain
    span of the application's, no agent span: these stacks record neither a conversation nor an
    agent, so there the run is the trace."""
    if config.get("run", True):
        return af_otel.run(config["run_id"])
    return tracer_provider.get_tracer("stack-app").start_as_current_span("conversation")


def span_tag() -> str | None:
    context = trace.get_current_span().get_span_context()
    return format(context.span_id, "016x") if context.is_valid else None


def rerouted(http: Any, port: int, asynchronous: bool = False) -> Any:
    """An httpx (or httpx2) client whose transport sends every request to the loopback server
    over real HTTP with the current span's id in a header; the URL is otherwise the client's."""

    def reroute(request: Any) -> None:
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=port)
        tag = span_tag()
        if tag:
            request.headers[SPAN_HEADER] = tag

    if asynchronous:

        class AsyncReroute(http.AsyncHTTPTransport):  # type: ignore[misc,name-defined]
            async def handle_async_request(self, request: Any) -> Any:
                reroute(request)
                return await super().handle_async_request(request)

        return http.AsyncClient(transport=AsyncReroute())

    class Reroute(http.HTTPTransport):  # type: ignore[misc,name-defined]
        def handle_request(self, request: Any) -> Any:
            reroute(request)
            return super().handle_request(request)

    return http.Client(transport=Reroute())


def genai_client(http: Any, port: int, vertex: dict[str, Any] | None = None) -> Any:
    """A google-genai client over `rerouted` httpx (or httpx2) clients: the Gemini API's, or with
    ``vertex`` (``project``, ``location``; optionally ``api_version``, ``base_url``) a Vertex AI
    client (``vertexai=True``) holding OAuth credentials of a fixed token (`VERTEX_TOKEN`: no
    expiry and no refresh token, so the client never refreshes them and needs no metadata
    server), sending to ``{location}-aiplatform.googleapis.com`` rerouted likewise, or with
    ``base_url`` to the loopback server by its own address (which the rerouting leaves as is)."""
    from google import genai
    from google.genai import types

    clients: dict[str, Any] = {
        "httpx_client": rerouted(http, port),
        "httpx_async_client": rerouted(http, port, asynchronous=True),
    }
    if vertex is None:
        return genai.Client(api_key="fake-gemini-key", http_options=types.HttpOptions(**clients))
    from google.oauth2.credentials import Credentials

    if vertex.get("base_url"):
        clients["base_url"] = f"http://127.0.0.1:{port}/"
    if vertex.get("api_version"):
        clients["api_version"] = vertex["api_version"]
    return genai.Client(
        vertexai=True,
        project=vertex["project"],
        location=vertex["location"],
        credentials=Credentials(token=VERTEX_TOKEN),
        http_options=types.HttpOptions(**clients),
    )


def versions(*distributions: str) -> dict[str, str]:
    found = {}
    for name in (*distributions, "opentelemetry-sdk", "opentelemetry-util-genai"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found
