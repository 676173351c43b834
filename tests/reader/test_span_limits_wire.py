"""The span-limits rule on a call minted from the wire (docs/reader.md, span limits on a call minted
from the wire): the SDK's limits cutting the instrumentation's attributes do not cut evidence the
receipt and commits never came from, while a cut that can touch af_otel's own record still does."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import names, read_spans, served_views, verify
from af_otel.processor import ReceiptSpanExporter, ReceiptSpanProcessor, run
from af_otel.reader import ServedView, VerdictStatus
from af_otel.reader.records import SpanRecord
from af_otel.store import LocalStore, Store
from tests.processor.fakes import openai_client, weather_agent
from tests.reader.recordings import with_attributes

# Below what OpenInference writes on the agent's later calls: the SDK evicts its oldest attributes
# (its identity keys are written last, so the span still reads as an LLM call).
LIMITS = SpanLimits(max_span_attributes=30)
ROLES = ["system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool"]


def _cut_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, wire: bool, form: str = "processor"
) -> tuple[tuple[SpanRecord, ...], Store]:
    """The weather agent's LLM spans, recorded by OpenInference's openai instrumentation under
    `LIMITS`."""
    exporter = InMemorySpanExporter()
    store = LocalStore(tmp_path / f"store-{wire}-{form}")
    provider = TracerProvider(span_limits=LIMITS)
    if form == "processor":
        provider.add_span_processor(
            ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=store, wire=wire)
        )
    else:
        exporting = ReceiptSpanExporter(exporter, store=store, wire=wire)
        provider.add_span_processor(SimpleSpanProcessor(exporting))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with run("cut"):
            weather_agent(openai_client(), turns=2)
    finally:
        instrumentor.uninstrument()
    provider.shutdown()
    spans = [
        s for s in exporter.get_finished_spans() if names.RECEIPT_STATE in (s.attributes or {})
    ]
    return tuple(read_spans(spans)), store


def _kinds(spans: tuple[SpanRecord, ...], store: Store) -> list[tuple[str, ...]]:
    return [view.gap_kinds for view in served_views(spans, store=store)]


@pytest.mark.parametrize("form", ["processor", "exporter"])
def test_a_wire_minted_call_is_verified_though_its_instrumentation_attributes_were_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    """The later calls dropped attributes under the count limit, and every call, minted from the
    body sent, reads back verified with the conversation the client sent, without span-limits."""
    spans, store = _cut_agent(tmp_path, monkeypatch, wire=True, form=form)
    assert len(spans) == 4
    assert [span.dropped_attributes_count > 0 for span in spans] == [False, False, True, True]
    for span in spans:
        assert span.attributes[names.RECEIPT_SOURCE] == names.SOURCE_WIRE
        assert span.attributes[names.RECEIPT_STATE] == names.STATE_MINTED
    views = served_views(spans, store=store)
    assert all(names.GAP_SPAN_LIMITS not in view.gap_kinds for view in views)
    assert [verify(view).status for view in views] == [VerdictStatus.VERIFIED] * 4
    last: ServedView = views[-1]
    assert last.messages is not None
    assert [m["role"] for m in last.messages] == ROLES


def test_the_same_cut_without_the_tap_is_never_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the tap off, the record the request is read from is the cut one: span-limits on
    each call that dropped attributes, and none of those verified."""
    spans, store = _cut_agent(tmp_path, monkeypatch, wire=False)
    views = served_views(spans, store=store)
    cut = [view for view, span in zip(views, spans, strict=True) if span.dropped_attributes_count]
    assert len(views) == 4
    assert len(cut) == 2
    assert all(names.GAP_SPAN_LIMITS in view.gap_kinds for view in cut)
    assert all(verify(view).status is not VerdictStatus.VERIFIED for view in cut)


def _edited(spans: tuple[SpanRecord, ...], edit: Any) -> tuple[SpanRecord, ...]:
    return (*spans[:-1], edit(spans[-1]))


@pytest.mark.parametrize(
    ("edit", "counts"),
    [
        # dropped events: af_otel's commit events may be among them
        (lambda s: dataclasses.replace(s, dropped_events_count=1), True),
        # a value of af_otel's own stops at a backend's limit
        (lambda s: with_attributes(s, af__note="n" * 2048), True),
        # the receipt is not one whose digest binds its source (af-1 names none)
        (lambda s: with_attributes(s, af__receipt__scheme=names.SCHEME_PLAIN), True),
        # the instrumentation's own attributes: more of them dropped, one at a backend's limit
        (lambda s: dataclasses.replace(s, dropped_attributes_count=40), False),
        (lambda s: with_attributes(s, gen_ai__response__id="r" * 2048), False),
    ],
    ids=["events-dropped", "own-value-at-limit", "af-1", "more-dropped", "theirs-at-limit"],
)
def test_on_a_wire_minted_call_only_a_cut_of_af_otels_own_record_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Any, counts: bool
) -> None:
    """The last call's span edited one way: span-limits exactly when the cut can touch what af_otel
    wrote (its events, its own values, a receipt that does not bind its source), never for the
    instrumentation's attributes; the calls before it keep none."""
    spans, store = _cut_agent(tmp_path, monkeypatch, wire=True)
    kinds = _kinds(_edited(spans, edit), store)
    assert (names.GAP_SPAN_LIMITS in kinds[-1]) is counts
    assert all(names.GAP_SPAN_LIMITS not in k for k in kinds[:-1])
