"""The tap's table of sent bodies holds the bodies of calls that ended but are not exported yet
(the exporter form under a `BatchSpanProcessor`): more LLM calls than the old 1,024-call bound
ending within one export interval each keep their body and are minted from the wire, while the
table's memory stays bounded by its bytes (an entry's own cost counted). Real SDK, a real httpx
client (its MockTransport answers), the tap, the exporter form."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import ReceiptSpanExporter, RunTagger, names
from af_otel.store import LocalStore
from af_otel.wire import Sent, tap, uninstall
from tests.builders import start_attributes

CALLS = 1_100  # over the 1,024 calls the table used to hold
URL = "https://api.openai.com/v1/chat/completions"


@pytest.fixture
def exporter_form(tmp_path: Path) -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """The exporter form under a batch processor whose timer never fires within the test and
    whose queue and batch hold every call: all of them end before any is exported."""
    memory = InMemorySpanExporter()
    batch = BatchSpanProcessor(
        ReceiptSpanExporter(memory, store=LocalStore(tmp_path / "store")),
        max_queue_size=4 * CALLS,
        max_export_batch_size=2 * CALLS,
        schedule_delay_millis=600_000,
    )
    provider = TracerProvider()
    provider.add_span_processor(RunTagger(batch))
    yield provider, memory
    provider.shutdown()
    uninstall()


def test_calls_ending_within_one_export_interval_keep_their_bodies(
    exporter_form: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """1,100 chat calls end before their batch is exported: every one is minted from its body."""
    provider, memory = exporter_form
    tracer = provider.get_tracer("test")
    answer = httpx.Response(200, json={"id": "c", "choices": []})
    with httpx.Client(transport=httpx.MockTransport(lambda _: answer)) as client:
        for index in range(CALLS):
            body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"q {index}"}]}
            attributes = start_attributes("gpt-4o", provider="openai")
            with tracer.start_as_current_span("chat gpt-4o", attributes=attributes):
                client.post(URL, content=orjson.dumps(body))
    assert memory.get_finished_spans() == ()  # none exported yet: all wait in the batch
    provider.force_flush()
    spans = memory.get_finished_spans()
    sources = [(s.attributes or {}).get(names.RECEIPT_SOURCE) for s in spans]
    assert len(spans) == CALLS
    assert sources.count(names.SOURCE_WIRE) == CALLS, sources.count(names.SOURCE_INSTRUMENTATION)


def test_the_table_stays_bounded_by_bytes_counting_each_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bodies of calls whose span never comes are dropped oldest first once their bytes, each
    entry's own cost counted, pass the byte bound: tiny bodies cannot grow it past it, even with
    no call bound at all."""
    monkeypatch.setattr(tap, "MAX_CALLS", 10**9)
    table = tap.SentTable()
    count = tap.MAX_BYTES // tap.ENTRY_BYTES + 10
    for index in range(count):
        table.add((1, index + 1), Sent("openai.chat_completions", "h", b"{}", index))
    assert len(table) <= tap.MAX_BYTES // (tap.ENTRY_BYTES + 2)
    assert len(table) > tap.MAX_BYTES // (tap.ENTRY_BYTES + 2) - 10  # the newest stay
    assert table.take((1, count)) != ()
