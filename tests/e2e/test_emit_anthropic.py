"""The real anthropic client instrumented by opentelemetry-instrumentation-genai-anthropic, with
af_otel's completion hook: system instructions arrive in their own slot and mint the same receipt
as the explicit API given the same request."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import names
from af_otel.processor import ReceiptSpanProcessor, completion_hook, run
from af_otel.store import LocalStore
from tests.processor.fakes import instrumented_anthropic
from tests.processor.helpers import af, llm_spans


def test_anthropic_hook_mints_system_instructions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two turns through the anthropic client: minted, chained, no content on the spans."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(
        ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=LocalStore(tmp_path / "s"))
    )
    messages = [{"role": "user", "content": "Hello"}]
    with instrumented_anthropic(provider, completion_hook=completion_hook) as client, run("claude"):
        for turn in range(2):
            reply = client.messages.create(
                model="claude-sonnet-4", max_tokens=64, system="Be terse.", messages=messages
            )
            messages += [
                {"role": "assistant", "content": reply.content[0].text},  # type: ignore[union-attr]
                {"role": "user", "content": f"more {turn}"},
            ]
    first, second = llm_spans(exporter.get_finished_spans())
    for span in (first, second):
        assert af(span)[names.RECEIPT_STATE] == names.STATE_MINTED
        assert af(span)[names.RECEIPT_PROVIDER] == "anthropic"
        assert "gen_ai.system_instructions" not in (span.attributes or {})
        assert len(af(span)[names.RECEIPT_SYSTEM_PIECES]) == 1
    assert af(second)[names.EPOCH_PARENT] == 1
    assert af(second)[names.RECEIPT_MESSAGES_KEPT] == 1
    assert af(first)[names.RECEIPT_SYSTEM_HASH] == af(second)[names.RECEIPT_SYSTEM_HASH]
