"""A LangGraph agent with ``ChatOpenAI`` (and a tool loop on the ``anthropic`` client) against the
wire-logging server, under one or two real instrumentations at once, exported through af_otel in
either form to an OTLP JSON file.

Each run is one `af_otel.run`: 5 questions, each answered after one tool call, so 10 real model
calls, one after the other; the server's log is the ground truth of what was sent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
from tests.sidevenv import CACHE, Env, ensure
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
ROOT: Final = Path(__file__).resolve().parents[2]
# OpenLLMetry's langchain and openai instrumentations share a package namespace with OTel's own
# and pin their SDK: they run in a side venv (tests/sidevenv.py), af_otel from PYTHONPATH.
OPENLLMETRY: Final = Env(
    "agents-openllmetry",
    CACHE / "agents-openllmetry",
    (
        "opentelemetry-instrumentation-langchain==0.62.4",
        "opentelemetry-instrumentation-openai==0.62.4",
        "langchain-openai==1.7.4",
        "langgraph==1.2.24",
        "openai==3.57.0",
        "opentelemetry-sdk==1.45.2",
        "opentelemetry-exporter-otlp-json-file==0.66b1",
        "orjson>=3.10",
        "opentelemetry-exporter-otlp>=1.38",
    ),
)
_STEERING: Final = ("OTEL_", "OPENINFERENCE_", "TRACELOOP_")


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
            elif name == "ol-langchain":  # OpenLLMetry: in its side venv (OPENLLMETRY)
                from opentelemetry.instrumentation.langchain import LangchainInstrumentor

                instrumentor = LangchainInstrumentor()
            elif name == "ol-openai":
                from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OLOpenAI

                instrumentor = OLOpenAI()
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
    """The LangGraph ReAct agent under ``combination``, 10 real calls in one run; OpenLLMetry's
    combinations run in their side venv (a subprocess)."""
    traces, store = tmp / "traces.jsonl", tmp / "store"
    with WireServer() as server:
        if combination.startswith("ol-"):
            config = {
                "combination": combination,
                "form": form,
                "traces": str(traces),
                "store": str(store),
                "port": server.port,
            }
            env = {k: v for k, v in os.environ.items() if not k.startswith(_STEERING)}
            env |= {"PYTHONPATH": str(ROOT), "AF_OTEL_STRICT": "1"}
            done = subprocess.run(
                [str(ensure(OPENLLMETRY)), "-m", "tests.agents.stack", json.dumps(config)],
                capture_output=True,
                text=True,
                timeout=300,
                env=env,
                cwd=tmp,
                check=False,
            )
            if done.returncode != 0:
                raise RuntimeError(f"agent {combination} failed:\n{done.stderr[-6000:]}")
        else:
            drive(combination, form, traces, store, server.port)
        wire = tuple(server.requests)
    return Recorded(traces, store, wire)


def drive(combination: str, form: str, traces: Path, store: Path, port: int) -> None:
    """Run the agent against the server on ``port``, writing ``traces`` and ``store``."""
    from langchain_openai import ChatOpenAI

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent moved in LangGraph 1.x
        from langgraph.prebuilt import create_react_agent

    provider = _provider(form, traces, store)
    with _instrumented(combination, provider):
        llm = ChatOpenAI(
            model="gpt-4o-mini",
            base_url=f"http://127.0.0.1:{port}/v1",
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
    provider.shutdown()


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
        client.close()  # its pool's socket, else left to a later collection's ResourceWarning
        wire = tuple(server.requests)
    provider.shutdown()
    return Recorded(traces, store, wire)


if __name__ == "__main__":  # the side venv's entry: one agent run, configured by JSON
    settings = json.loads(sys.argv[1])
    drive(
        settings["combination"],
        settings["form"],
        Path(settings["traces"]),
        Path(settings["store"]),
        int(settings["port"]),
    )
