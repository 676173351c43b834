"""A LangGraph ReAct agent under OpenInference's LangChain instrumentation alone (callback-based:
its LLM spans are never current) against the loopback server that logs every body: each call is
paired with the body its client sent, minted from it and verified, its served view equal to the
logged body field by field."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import af_otel
from af_otel import names
from af_otel.reader.verify import VerdictStatus
from af_otel.wire import uninstall
from tests.agents.stack import QUESTIONS, SYSTEM, _tools
from tests.wire.convert import differences, from_view, from_wire
from tests.wire.server import WireRequest, WireServer


def _run(tmp: Path, port: int) -> None:
    from langchain_openai import ChatOpenAI
    from openinference.instrumentation.langchain import LangChainInstrumentor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent moved in LangGraph 1.x
        from langgraph.prebuilt import create_react_agent

    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=100_000))
    processor = af_otel.ReceiptSpanProcessor(
        SimpleSpanProcessor(FileSpanExporter(tmp / "trace.jsonl")),
        store=tmp / "store",
        trusted_hosts=["127.0.0.1"],  # the loopback server stands in for the provider's host
    )
    provider.add_span_processor(processor)
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
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
        with af_otel.run("lg-wire"):
            for question in QUESTIONS:
                messages.append({"role": "user", "content": question})
                messages = agent.invoke({"messages": messages})["messages"]
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
        uninstall()


def _answered(requests: list[WireRequest], attributes: Any) -> WireRequest:
    """The request whose answer (id ``chatcmpl-w<seq>``) the span's recorded output holds."""
    output = str(attributes.get("output.value", ""))
    (found,) = [r for r in requests if f'"chatcmpl-w{r.seq}"' in output]
    return found


@pytest.mark.instrumentation
def test_a_langgraph_agent_with_only_the_framework_instrumentation_verifies(
    tmp_path: Path,
) -> None:
    """Every call of the agent reads `verified` from the wire, served exactly as sent."""
    with WireServer() as server:
        _run(tmp_path, server.port)
        requests = list(server.requests)
    spans = list(af_otel.read_spans(tmp_path / "trace.jsonl"))
    attributes = {span.span_id: span.attributes for span in spans}
    views = af_otel.served_views(spans, store=tmp_path / "store")
    assert len(views) == len(requests) == 2 * len(QUESTIONS)
    for view in views:
        request = _answered(requests, attributes[view.span_id])
        found = differences(from_wire(request.path, request.body), from_view(view))
        assert found == [], (view.epoch, found)
        assert attributes[view.span_id].get(names.RECEIPT_SOURCE) == names.SOURCE_WIRE
        assert af_otel.verify(view).status == VerdictStatus.VERIFIED, view.gaps
