"""A LangGraph agent with ``ChatOpenAI`` (and a tool loop on the ``anthropic`` client) against the
wire-logging server, under one or two real instrumentations at once, exported through af_otel in
either form to an OTLP JSON file.

Each run is one `af_otel.run`: 5 questions, each answered after one tool call, so 10 real model
calls, one after the other; the server's log is the ground truth of what was sent.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

import af_otel
from af_otel import names
from tests.wire.server import WireRequest, WireServer

QUESTIONS: Final = (
    "What's the weather in Paris?",
    "And the weather in Oslo?",
    "Weather in Lima, please.",
    "Is it warm in Paris now?",
    "Weather in Oslo again?",
)
SYSTEM: Final = "You are a travel desk. Use the tools."
RUN: Final = "lc-1"


@dataclass(frozen=True, slots=True)
class Recorded:
    traces: Path
    store: Path
    wire: tuple[WireRequest, ...]

    def spans(self) -> list[dict[str, Any]]:
        out = []
        for line in self.traces.read_text(encoding="utf-8").splitlines():
            for resource in json.loads(line)["resourceSpans"]:
                for scope in resource["scopeSpans"]:
                    for span in scope["spans"]:
                        span["scope"] = scope["scope"]["name"]
                        out.append(span)
        return out

    def commit_bytes(self) -> int:
        """The bytes of every commit payload the run wrote (inline or stored)."""
        total = 0
        for span in self.spans():
            for event in span.get("events", []):
                if event["name"] != names.COMMIT_EVENT:
                    continue
                for attribute in event["attributes"]:
                    if attribute["key"] == names.COMMIT_BYTES:
                        total += int(next(iter(attribute["value"].values())))
        return total


def _provider(form: str, traces: Path, store: Path) -> TracerProvider:
    # Span limits raised: long conversations under OpenInference exceed the default 128.
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=100_000))
    exporter = FileSpanExporter(traces)
    if form == "processor":
        processor = af_otel.ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=store)
        provider.add_span_processor(processor)
    else:
        batch = BatchSpanProcessor(af_otel.ReceiptSpanExporter(exporter, store=store))
        provider.add_span_processor(af_otel.RunTagger(batch))
    return provider


@contextmanager
def _instrumented(combination: str, provider: TracerProvider) -> Iterator[None]:
    """The instrumentations of ``combination`` on ``provider`` for the block."""
    with ExitStack() as stack:
        for name in filter(None, combination.split("+")):
            instrumentor: Any
            options: dict[str, Any] = {}
            if name == "oi-langchain":
                from openinference.instrumentation.langchain import LangChainInstrumentor

                instrumentor = LangChainInstrumentor()
            elif name == "oi-openai":
                from openinference.instrumentation.openai import OpenAIInstrumentor

                instrumentor = OpenAIInstrumentor()
            elif name == "genai-openai":
                from opentelemetry.instrumentation.genai.openai import (
                    OpenAIInstrumentor as GenAIOpenAI,
                )

                instrumentor = GenAIOpenAI()
                options["completion_hook"] = af_otel.completion_hook
            elif name == "oi-anthropic":
                from openinference.instrumentation.anthropic import AnthropicInstrumentor

                instrumentor = AnthropicInstrumentor()
            else:
                raise ValueError(name)
            instrumentor.instrument(tracer_provider=provider, **options)
            stack.callback(instrumentor.uninstrument)
        yield


def _tools() -> list[Any]:
    from langchain_core.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"{city}: sunny, 21C"

    @tool
    def get_time(city: str) -> str:
        """The local time in a city."""
        return f"{city}: 14:00"

    return [get_weather, get_time]


def langgraph_agent(combination: str, form: str, tmp: Path) -> Recorded:
    """The LangGraph ReAct agent under ``combination``, 10 real calls in one run."""
    from langchain_openai import ChatOpenAI

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent moved in LangGraph 1.x
        from langgraph.prebuilt import create_react_agent

    traces, store = tmp / "traces.jsonl", tmp / "store"
    provider = _provider(form, traces, store)
    with WireServer() as server, _instrumented(combination, provider):
        llm = ChatOpenAI(
            model="gpt-4o-mini",
            base_url=f"http://127.0.0.1:{server.port}/v1",
            api_key="test",
            temperature=0.2,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            agent = create_react_agent(llm, _tools(), prompt=SYSTEM)
        messages: list[Any] = []
        with af_otel.run(RUN):
            for question in QUESTIONS:
                messages.append({"role": "user", "content": question})
                messages = agent.invoke({"messages": messages})["messages"]
        wire = tuple(server.requests)
    provider.shutdown()
    return Recorded(traces, store, wire)


WEATHER: Final = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def anthropic_agent(combination: str, form: str, tmp: Path, calls: int = 4) -> Recorded:
    """A tool loop on the ``anthropic`` client with its own spans on, under ``combination``."""
    import anthropic

    traces, store = tmp / "traces.jsonl", tmp / "store"
    provider = _provider(form, traces, store)
    with WireServer() as server, _instrumented(combination, provider):
        client = anthropic.Anthropic(
            base_url=f"http://127.0.0.1:{server.port}",
            api_key="test",
            open_telemetry={"tracer_provider": provider},
        )
        messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTIONS[0]}]
        with af_otel.run(RUN):
            for turn in range(calls):
                reply = client.messages.create(
                    model="claude-test",
                    max_tokens=256,
                    system=SYSTEM,
                    messages=messages,
                    tools=[WEATHER],
                )
                content = [block.model_dump(exclude_none=True) for block in reply.content]
                messages.append({"role": "assistant", "content": content})
                uses = [block for block in reply.content if block.type == "tool_use"]
                if uses:
                    results = [
                        {"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}
                        for use in uses
                    ]
                    messages.append({"role": "user", "content": results})
                else:
                    messages.append({"role": "user", "content": QUESTIONS[(turn + 1) % 5]})
        wire = tuple(server.requests)
    provider.shutdown()
    return Recorded(traces, store, wire)
