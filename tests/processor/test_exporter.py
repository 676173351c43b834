"""ReceiptSpanExporter: the same evidence as the processor, batch by batch, never losing a batch."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from af_otel import names
from af_otel.processor import ReceiptSpanExporter, ReceiptSpanProcessor, RunTagger, run
from af_otel.receipts import Receipt, receipt_digest
from af_otel.semconv import record
from af_otel.store import Store
from tests.processor.helpers import (
    af,
    assistant,
    chat,
    commits,
    end_attributes,
    llm_spans,
    start_chat,
    states,
    user,
)


class Keep(SpanExporter):
    """An inner exporter that keeps each batch and answers with a chosen result."""

    def __init__(self, result: SpanExportResult = SpanExportResult.SUCCESS) -> None:
        self.batches: list[list[ReadableSpan]] = []
        self.result = result
        self.shut = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.batches.append(list(spans))
        return self.result

    def shutdown(self) -> None:
        self.shut = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


RUN = {names.RUN_ID: "shared-run"}


def _chat(tracer: Tracer, messages: Any) -> None:
    span = start_chat(tracer, **RUN)
    span.set_attributes(end_attributes(messages))
    span.end()


def _sequential(tracer: Tracer) -> None:
    history = [user("q0")]
    with tracer.start_as_current_span("agent"):
        for turn in range(5):
            _chat(tracer, history)
            history = [*history, assistant(f"a{turn}"), user(f"q{turn + 1}")]


def _fan_out(tracer: Tracer) -> None:
    with tracer.start_as_current_span("agent"):
        _chat(tracer, [user("plan")])
        spans = [start_chat(tracer, **RUN) for _ in range(3)]
        for index in (2, 0, 1):
            spans[index].set_attributes(end_attributes([user("plan"), user(f"w{index}")]))
            spans[index].end()
        _chat(tracer, [user("plan"), user("w0"), user("w1"), user("w2")])


def _record(scenario: Any, store: Store, *, form: str, batch_size: int = 512) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    if form == "processor":
        provider.add_span_processor(ReceiptSpanProcessor(SimpleSpanProcessor(memory), store=store))
    elif form == "exporter-simple":
        provider.add_span_processor(SimpleSpanProcessor(ReceiptSpanExporter(memory, store=store)))
    else:
        batch = BatchSpanProcessor(
            ReceiptSpanExporter(memory, store=store),
            max_export_batch_size=batch_size,
            schedule_delay_millis=60_000,
        )
        provider.add_span_processor(batch)
    scenario(provider.get_tracer("t"))
    provider.force_flush()
    spans = list(memory.get_finished_spans())
    provider.shutdown()
    return spans


@pytest.mark.parametrize(("form", "passes"), [("processor", 2), ("exporter-batch", 1)])
def test_a_span_s_attributes_are_read_once_at_its_end(
    store: Store, monkeypatch: pytest.MonkeyPatch, form: str, passes: int
) -> None:
    """Whether a span is an LLM call, its request and its content keys come from one pass over
    its attributes at its end (`record_of`), which the exporter keeps from numbering the batch to
    enriching it. The processor form also reads them at the span's start, a different moment."""
    read: list[int] = []
    snapshot = record._snapshot

    def counted(attributes: Any) -> dict[str, object]:
        read.append(1)
        return snapshot(attributes)

    monkeypatch.setattr(record, "_snapshot", counted)
    spans = _record(_sequential, store, form=form)
    assert len(llm_spans(spans)) == 5
    assert len(read) == passes * len(spans)


def _evidence(spans: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    keys = (
        names.EPOCH,
        names.EPOCH_PARENT,
        names.RECEIPT_MESSAGES_CHAIN,
        names.RECEIPT_MESSAGES_KEPT,
        names.RECEIPT_MESSAGES_ADDED,
        names.GAPS,
    )
    # Not the digest: it binds each writer's own lane, which differs between the two forms.
    return sorted(tuple(_hashable(af(s).get(k)) for k in keys) for s in llm_spans(spans))


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list | tuple) else value


def _parents_by_content(spans: Sequence[ReadableSpan]) -> dict[str, str | None]:
    """Each call's parent named by its messages chain (the same request in both forms)."""
    chain = {af(s)[names.EPOCH]: af(s)[names.RECEIPT_MESSAGES_CHAIN] for s in llm_spans(spans)}
    return {
        af(s)[names.RECEIPT_MESSAGES_CHAIN]: chain.get(af(s)[names.EPOCH_PARENT])
        for s in llm_spans(spans)
    }


@pytest.mark.parametrize(
    ("form", "batch_size"), [("exporter-simple", 0), ("exporter-batch", 2), ("exporter-batch", 512)]
)
def test_sequential_run_agrees_in_every_form(form: str, batch_size: int, store: Store) -> None:
    """A sequential run gets the same epochs, parents, receipts and gaps from both forms, also when
    batches split the run (run state carries across batches)."""
    processor_spans = _record(_sequential, store, form="processor")
    exporter_spans = _record(_sequential, store, form=form, batch_size=batch_size)
    assert _evidence(exporter_spans) == _evidence(processor_spans)


def test_fan_out_in_one_batch_agrees(store: Store) -> None:
    """Overlapping calls exported together are numbered by start time, as the processor did."""
    processor_spans = _record(_fan_out, store, form="processor")
    exporter_spans = _record(_fan_out, store, form="exporter-batch")
    assert _evidence(exporter_spans) == _evidence(processor_spans)
    assert states(exporter_spans, store) == states(processor_spans, store)


def test_fan_out_one_span_per_batch_names_the_same_parents(store: Store) -> None:
    """Exported one by one in end order, overlapping calls keep their true parents and fold to the
    same states; a call numbered after one that started later says no-run-log."""
    processor_spans = _record(_fan_out, store, form="processor")
    exporter_spans = _record(_fan_out, store, form="exporter-simple")
    assert _parents_by_content(exporter_spans) == _parents_by_content(processor_spans)
    folded = states(exporter_spans, store)
    by_chain = {
        af(s)[names.RECEIPT_MESSAGES_CHAIN]: folded[af(s)[names.EPOCH]]
        for s in llm_spans(exporter_spans)
    }
    want = states(processor_spans, store)
    for span in llm_spans(processor_spans):
        assert by_chain[af(span)[names.RECEIPT_MESSAGES_CHAIN]] == want[af(span)[names.EPOCH]]
    flagged = [s for s in llm_spans(exporter_spans) if names.GAP_NO_RUN_LOG in af(s)[names.GAPS]]
    assert len(flagged) == 2
    seqs = sorted(c[names.COMMIT_SEQ] for s in llm_spans(exporter_spans) for c in commits(s))
    assert seqs == list(range(1, len(seqs) + 1))


def test_overlap_split_across_batches_says_no_run_log(store: Store) -> None:
    """A call that started earlier but arrives in a later batch is numbered late and says so."""
    keep = Keep()
    exporter = ReceiptSpanExporter(keep, store=store)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("agent"):
        early = start_chat(tracer)
        late = start_chat(tracer)
        late.set_attributes(end_attributes([user("late")]))
        late.end()
        early.set_attributes(end_attributes([user("early")]))
        early.end()
    calls = llm_spans([span for batch in keep.batches for span in batch])
    by_text = {af(s)[names.EPOCH]: s for s in calls}
    assert by_text[1].context.span_id == late.get_span_context().span_id
    assert names.GAP_NO_RUN_LOG in af(by_text[2])[names.GAPS]
    assert names.GAP_NO_RUN_LOG not in af(by_text[1])[names.GAPS]


def test_one_failing_span_does_not_cost_the_batch(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A span af_otel fails on is exported unenriched with state error; the rest are enriched."""
    monkeypatch.delenv("AF_OTEL_STRICT")
    keep = Keep(SpanExportResult.FAILURE)
    exporter = ReceiptSpanExporter(keep, store=store)
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("agent"):
        chat(tracer, [user("a")])
        chat(tracer, [user("b")])
    spans = list(memory.get_finished_spans())
    original = exporter.engine.enrich
    calls = {"n": 0}

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return original(*args, **kwargs)

    monkeypatch.setattr(exporter.engine, "enrich", flaky)
    assert exporter.export(spans) is SpanExportResult.FAILURE
    (batch,) = keep.batches
    assert len(batch) == 3
    states_seen = [af(s).get(names.RECEIPT_STATE) for s in batch]
    assert states_seen == [names.STATE_ERROR, names.STATE_MINTED, None]


def test_shutdown_and_flush_pass_through(store: Store) -> None:
    """shutdown and force_flush reach the inner exporter."""
    keep = Keep()
    exporter = ReceiptSpanExporter(keep, store=store)
    assert exporter.force_flush() is True
    exporter.shutdown()
    assert keep.shut


def test_sdk_disabled_exports_the_batch_untouched(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OTEL_SDK_DISABLED=true: the batch goes to inner as it came."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    chat(provider.get_tracer("t"), [user("a")])
    spans = list(memory.get_finished_spans())
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    keep = Keep()
    ReceiptSpanExporter(keep, store=store).export(spans)
    assert keep.batches == [spans]
    assert commits(keep.batches[0][0]) == []


BASE = {"messages": [user("earlier question"), assistant("earlier answer")]}


def _in_run(tracer: Tracer) -> None:
    """Seven calls of run r1 (three of them under an agent span), with a declared base; no call
    carries af.run.id, so only the run block says which run they are in."""
    history = [*BASE["messages"], user("q0")]
    with run("r1", base=BASE):
        for turn in range(7):
            if turn in (2, 3, 4):
                with tracer.start_as_current_span("agent step"):
                    chat(tracer, history)
            else:
                chat(tracer, history)
            history = [*history, assistant(f"a{turn}"), user(f"q{turn + 1}")]


def _run_evidence(spans: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    keys = (
        names.RUN_ID,
        names.EPOCH,
        names.EPOCH_PARENT,
        names.RUN_BASE,
        names.RECEIPT_MESSAGES_CHAIN,
        names.RECEIPT_MESSAGES_KEPT,
        names.RECEIPT_MESSAGES_ADDED,
        names.GAPS,
    )
    # Not the digest: it binds each writer's own lane (checked by _lane_bound).
    return sorted(tuple(_hashable(af(s).get(k)) for k in keys) for s in llm_spans(spans))


def _lane_bound(spans: Sequence[ReadableSpan]) -> set[str]:
    """The one lane the calls were numbered in, after checking each digest binds it."""
    lanes = set()
    for span in llm_spans(spans):
        receipt = Receipt.from_attributes(af(span))
        assert isinstance(receipt, Receipt)
        assert receipt.lane == af(span)[names.EPOCH_LANE]
        assert receipt_digest(receipt) == af(span)[names.RECEIPT_DIGEST]
        assert receipt_digest(replace(receipt, lane="another")) != af(span)[names.RECEIPT_DIGEST]
        lanes.add(af(span)[names.EPOCH_LANE])
    assert len(lanes) == 1
    return lanes


def _tagged_batches(store: Store, batch_size: int, tagger: bool) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    batch: SpanProcessor = BatchSpanProcessor(
        ReceiptSpanExporter(memory, store=store),
        max_export_batch_size=batch_size,
        schedule_delay_millis=60_000,
    )
    provider.add_span_processor(RunTagger(batch) if tagger else batch)
    _in_run(provider.get_tracer("t"))
    provider.force_flush()
    spans = list(memory.get_finished_spans())
    provider.shutdown()
    return spans


@pytest.mark.parametrize("batch_size", [1, 2, 3, 512])
def test_run_block_gives_the_same_evidence_in_both_forms(batch_size: int, store: Store) -> None:
    """Inside af_otel.run("r1"), the exporter form behind RunTagger gets the processor form's run
    id, epochs, parents, base, kept counts and gaps, also when batches are smaller than the run;
    each digest binds its own writer's lane."""
    processor_spans = _record(_in_run, store, form="processor")
    exporter_spans = _tagged_batches(store, batch_size, tagger=True)
    want = _run_evidence(processor_spans)
    assert [row[:3] for row in want] == [("r1", epoch, epoch - 1) for epoch in range(1, 8)]
    assert all(row[3] for row in want)  # the declared base, stored once and named
    assert _run_evidence(exporter_spans) == want
    assert _lane_bound(exporter_spans) != _lane_bound(processor_spans)  # two writers, two lanes
    assert states(exporter_spans, store, BASE) == states(processor_spans, store, BASE)


def test_without_a_tagger_the_exporter_says_it_cannot_place_the_run(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """No RunTagger: the exporter cannot see the run block, so the calls are filed under their
    traces with no-run-log, and one warning names the fix; never a silent wrong run."""
    with caplog.at_level(logging.WARNING, logger="af_otel"):
        spans = _tagged_batches(store, 2, tagger=False)
    calls = llm_spans(spans)
    assert len(calls) == 7
    assert all(af(s)[names.RUN_ID] != "r1" for s in calls)
    assert all(names.GAP_NO_RUN_LOG in af(s)[names.GAPS] for s in calls)
    warnings = [r for r in caplog.records if "RunTagger" in r.getMessage()]
    assert len(warnings) == 1


def test_tagger_passes_every_span_through(store: Store) -> None:
    """RunTagger hands the inner processor the very spans it gets, in and out of run blocks."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(RunTagger(SimpleSpanProcessor(memory)))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("outside"):
        pass
    with run("tagged"), tracer.start_as_current_span("inside"):
        pass
    assert [s.name for s in memory.get_finished_spans()] == ["outside", "inside"]
    assert all(not af(s) for s in memory.get_finished_spans())
    provider.shutdown()


def test_a_tagger_elsewhere_does_not_hide_a_missing_one(store: Store) -> None:
    """A RunTagger on another provider does not vouch for this exporter: its calls in a run block
    still carry no-run-log."""
    other = TracerProvider()
    other.add_span_processor(RunTagger(SimpleSpanProcessor(InMemorySpanExporter())))
    spans = _tagged_batches(store, 3, tagger=False)
    assert all(names.GAP_NO_RUN_LOG in af(s)[names.GAPS] for s in llm_spans(spans))
    other.shutdown()
