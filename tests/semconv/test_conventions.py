"""A family is one module and one registration: a toy family (tests/semconv/toy.py) registered for
a test is read by the real processor, which mints its receipts, and the reader verifies them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import ReceiptSpanProcessor, names, read_spans, semconv, served_views, verify
from af_otel.model import fields
from af_otel.reader import VerdictStatus
from af_otel.semconv import Entry
from af_otel.store import LocalStore
from tests.semconv import toy

TURNS = ("What is the weather in Paris?", "And in Rome?", "Thanks; and Oslo?")


def _attributes(calls: int) -> dict[str, Any]:
    attributes: dict[str, Any] = {toy.KIND: "llm", "toy.model": "toy-1"}
    attributes["server.address"] = "api.openai.com"
    for at in range(calls):
        attributes[f"{toy.PROMPTS}{at}"] = TURNS[at]
        if at < calls - 1:
            attributes[f"{toy.REPLIES}{at}"] = f"answer {at}"
    return attributes


def _record(tmp_path: Path) -> tuple[list[Any], LocalStore]:
    exporter = InMemorySpanExporter()
    store = LocalStore(tmp_path / "store")
    provider = TracerProvider()
    provider.add_span_processor(ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=store))
    tracer = provider.get_tracer(toy.SCOPE)
    with tracer.start_as_current_span("run"):
        for calls in range(1, len(TURNS) + 1):
            with tracer.start_as_current_span("toy.chat", attributes=_attributes(calls)):
                pass
    provider.shutdown()
    spans = [
        s for s in exporter.get_finished_spans() if names.RECEIPT_STATE in (s.attributes or {})
    ]
    return spans, store


def test_a_registered_toy_family_mints_and_verifies(tmp_path: Path) -> None:
    """Registered, the toy family claims its spans, the processor mints a receipt for each call
    and chains them as one run, and the reader verifies every epoch."""
    with semconv.registered(toy.TOY):
        assert semconv.adapt(_attributes(1)).convention == "toy"
        spans, store = _record(tmp_path)
    assert [s.attributes[names.RECEIPT_STATE] for s in spans] == [names.STATE_MINTED] * 3
    assert [s.attributes[names.EPOCH_PARENT] for s in spans] == [0, 1, 2]
    views = served_views(tuple(read_spans(spans)), store=store)
    assert [verify(v).status for v in views] == [VerdictStatus.VERIFIED] * 3


def test_the_toy_familys_ledger_row_names_what_it_does_not_record(tmp_path: Path) -> None:
    """A family's ledger row is the one the processor reads: a toy that records only the model
    names every other field unrecorded, and the reader says reconstructed, not verified."""
    row = Entry("toy", (toy.SCOPE,), ("toy",), frozenset({fields.MODEL}))
    with semconv.registered(replace(toy.TOY, ledger=(row,))):
        spans, store = _record(tmp_path)
    assert all("tools" in s.attributes[names.RECEIPT_UNRECORDED] for s in spans)
    views = served_views(tuple(read_spans(spans)), store=store)
    assert [verify(v).status for v in views] == [VerdictStatus.RECONSTRUCTED] * 3


def test_without_the_registration_the_toy_spans_are_no_calls(tmp_path: Path) -> None:
    """The registration is what makes the family known: outside it the registry is as before and
    the same spans are no LLM calls (no receipt)."""
    with semconv.registered(toy.TOY):
        pass
    assert "toy" not in {c.name for c in semconv.tables().conventions}
    assert not semconv.is_llm_call(_attributes(1), "toy.chat")
    spans, _ = _record(tmp_path)
    assert spans == []


def test_the_registry_keeps_its_order_and_puts_a_family_ahead_of_genai() -> None:
    """A registered family is asked after the built-in ones that claim spans and before the GenAI
    fallback, which claims every span; its content keys join the ones a strip drops."""
    before = [c.name for c in semconv.tables().conventions]
    with semconv.registered(toy.TOY):
        names_now = [c.name for c in semconv.tables().conventions]
        assert names_now.index("toy") == names_now.index("genai") - 1
        assert semconv.content_keys(["toy.prompt.0", "toy.model"]) == ("toy.prompt.0",)
    assert [c.name for c in semconv.tables().conventions] == before
    assert semconv.content_keys(["toy.prompt.0"]) == ()
