"""openinference-instrumentation-openai through the processor: its flattened attributes mint the
same receipt as the OTel GenAI instrumentation's attributes for the same request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import names
from af_otel.processor import ReceiptSpanProcessor, run
from af_otel.store import LocalStore
from tests.processor.fakes import instrumented_openai, openai_client, weather_agent
from tests.processor.helpers import af, llm_spans


def _spans_openinference(tmp_path: Path) -> list[Any]:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(
        ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=LocalStore(tmp_path / "oi"))
    )
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with run("same"):
            weather_agent(openai_client(), turns=1)
    finally:
        instrumentor.uninstrument()
    return llm_spans(exporter.get_finished_spans())


def test_openinference_spans_mint_like_genai_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same conversation, two instrumentations: same messages chain and tool hashes."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    openinference = _spans_openinference(tmp_path)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(
        ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=LocalStore(tmp_path / "g"))
    )
    with instrumented_openai(provider) as client, run("same"):
        weather_agent(client, turns=1)
    genai = llm_spans(exporter.get_finished_spans())
    assert len(openinference) == len(genai) == 2
    for a, b in zip(openinference, genai, strict=True):
        assert af(a)[names.RECEIPT_STATE] == names.STATE_MINTED
        assert af(a)[names.EPOCH] == af(b)[names.EPOCH]
        for key in (
            names.RECEIPT_MESSAGES_CHAIN,
            names.RECEIPT_TOOLS_HASHES,
            names.RECEIPT_SYSTEM_HASH,
        ):
            assert af(a)[key] == af(b)[key], key
