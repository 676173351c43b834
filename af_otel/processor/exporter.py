"""`ReceiptSpanExporter`: the same enrichment as the processor, done on the export thread; and
`RunTagger`, which lets it see the `af_otel.run` blocks.

Wrap the exporter instead of the processor and the minting leaves the application's thread:

    provider.add_span_processor(af_otel.RunTagger(BatchSpanProcessor(af_otel.ReceiptSpanExporter(otlp))))

What the exporter cannot know, it is told or it says:

* It runs on another thread, after the `af_otel.run` block may have exited, and sees no span
  start. `RunTagger` (a pass-through around the batch processor) records at each span's start the
  run block it started in and the base that block declared, in a bounded in-process table the
  exporter reads; so a run gets the same run id, epochs, parents and receipts as in the processor
  form, across any number of batches. A call carrying ``af.run.id`` (`llm_call` and the completion
  hook write one) needs no tagger. An exporter with no tagger around it (it knows: the tagger
  marks the exporter of the processor it wraps, and a tagged span marks it too) cannot tell,
  once an `af_otel.run` block has been entered, which calls were in it: such a call is filed
  under its trace, carries ``no-run-log``, and the exporter logs a warning once.
* It sees no ``on_start``, so it numbers each batch's LLM calls by their start time (the tagger
  hands the wire tap each span's start, so a body pairs with a span that is not current as in
  the processor form; with no tagger only a current LLM span or a late claim pairs; the tagger
  also tells which calls are still to come, so a body waits for its call whichever batch brings
  it: `af_otel.processor.awaited`). A call that
  started before one already numbered in an earlier batch (overlapping calls split across
  batches) is numbered after it, and its span carries ``no-run-log``: the epoch order is not the
  start order there.

A failure enriching one span exports that span unenriched with ``af.receipt.state=error``; the
batch always reaches ``inner`` whole and ``inner``'s result is returned as it is.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from af_otel import forksafe, names
from af_otel.processor import closing, dedupe, wire_source
from af_otel.processor import context as run_context
from af_otel.processor.awaited import Awaited
from af_otel.processor.context import current_run
from af_otel.processor.engine import Engine
from af_otel.processor.facts import CallFacts
from af_otel.processor.guard import guard, settle
from af_otel.processor.processor import ForwardingProcessor, enrich_span, facts_of
from af_otel.processor.settings import Options, resolve_settings
from af_otel.processor.spancopy import error_copy
from af_otel.semconv import Recorded, record_of

_logger = logging.getLogger("af_otel")
# Runs a tagger remembers having seen spans of, for their close records: one entry a live run
# block (about 100 bytes), so 10,000 concurrent runs hold about 1 MB.
_RUNS_TAGGED = 10_000


class ReceiptSpanExporter(SpanExporter):
    """Enrich each batch exactly as `ReceiptSpanProcessor` enriches each span; thread-safe.

    Takes the processor's options (argument > ``AF_OTEL_*`` variable > default)."""

    def __init__(self, inner: SpanExporter, **options: Unpack[Options]) -> None:
        self._inner = inner
        self._settings = resolve_settings(**options)
        # Exports arrive after the `af_otel.run` block that made them may have exited: such a
        # block must not free this engine's run state, only idle expiry and root spans do.
        self.engine = Engine(self._settings, deferred=True)
        # SimpleSpanProcessor exports from every application thread at once; one batch at a time
        # keeps a batch's numbering and commit sequence together.
        self._lock = forksafe.lock(self)
        # Set by a `RunTagger` wrapping the batch processor this exporter is in, or on the first
        # span a tagger recorded.
        self.tagged = False
        self._entries_at_start = run_context.run_entries()
        self._warned = False
        # The calls a tagger saw start and this exporter has not exported: a body filed under one
        # waits for it whichever batch brings it (`af_otel.processor.awaited`).
        self.awaited = self.engine.awaited = Awaited()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._settings.disabled:
            return self._inner.export(spans)
        failures: list[Exception] = []
        with self._lock:
            out = self._enrich(spans, failures)
        result = self._inner.export(out)
        if failures:
            settle("ReceiptSpanExporter.export", failures[0])
        return result

    def _enrich(
        self, spans: Sequence[ReadableSpan], failures: list[Exception]
    ) -> list[ReadableSpan]:
        calls = []
        unplaced: set[tuple[int, int]] = set()
        later: set[tuple[int, int]] = set()
        minted = []
        # Each span's attributes as read for numbering; enriching the span reuses the record.
        records: dict[tuple[int, int], Recorded] = {}
        with guard("ReceiptSpanExporter.number"):
            runs_unseen = not self.tagged and run_context.run_entries() > self._entries_at_start
            for span in spans:
                context = span.context
                attributes = span.attributes or {}
                if context is None:
                    continue
                key = (context.trace_id, context.span_id)
                if names.RECEIPT_STATE in attributes:
                    if names.EPOCH in attributes:
                        minted.append(facts_of(span, key))
                    continue
                recorded = records[key] = record_of(attributes, span.name)
                if recorded.llm_call:
                    calls.append(facts_of(span, key, recorded))
                    if runs_unseen and self._unplaced(key, attributes):
                        unplaced.add(key)
            calls.sort(key=lambda facts: facts.start_time)
            for facts in minted:
                self.engine.saw(facts)
            # A second record of one call (dedupe.py) is not numbered: a call whose window holds
            # another call of the batch is numbered at its end unless it is merged then, and a
            # provider SDK's own span is merged into its parent call.
            by_key = {facts.key: facts for facts in calls}
            trusted = self._settings.trusted_scope
            children = {
                facts.key: parent.key
                for facts in calls
                if facts.parent is not None
                and (parent := by_key.get(facts.parent)) is not None
                and dedupe.merges_into_parent(facts.scope, parent.scope, trusted)
            }
            alone = [facts for facts in calls if facts.key not in children]
            by_start = sorted(alone + minted, key=lambda facts: facts.start_time)
            later = outer_calls(by_start, trusted)
            later -= {facts.key for facts in minted}
            later |= {facts.key for facts in alone if self.engine.may_repeat(facts)}
            for facts in calls:
                if facts.key not in later and facts.key not in children:
                    self.engine.number(facts)
            for child, parent_key in children.items():
                self.engine.merge(child, parent_key, by_key[child].scope)
                later.add(child)
            if unplaced:
                self._warn_unplaced()
        done: dict[int, ReadableSpan] = {}
        # Enriched in end order, the calls held back last: the call they may repeat is known.
        # A run's close record after every call of the batch: it names the lane's last one.
        order = sorted(
            range(len(spans)),
            key=lambda i: (_is_close(spans[i]), _key_of(spans[i]) in later),
        )
        for index in order:
            span = spans[index]
            key = _key_of(span)
            try:
                done[index] = self._enriched(span, key in unplaced, records.get(key))
            except Exception as exc:
                failures.append(exc)
                done[index] = error_copy(span)
        # A close record a tagger handed on for a run this exporter numbered no call of says
        # nothing: it is not exported.
        out = [done[index] for index in range(len(spans)) if not _empty_close(done[index])]
        with guard("ReceiptSpanExporter.untag"):
            keys = [(s.context.trace_id, s.context.span_id) for s in spans if s.context is not None]
            run_context.untag(keys)
            self.awaited.exported(keys)
        return out

    def _enriched(
        self, span: ReadableSpan, run_unknown: bool, recorded: Recorded | None
    ) -> ReadableSpan:
        """One span of a batch as `enrich_span` makes it; a run's close record also gets this
        engine's lane, known only now (after the run's calls)."""
        lane = self.engine.closing(_run_closed(span)) if _is_close(span) else None
        out = enrich_span(self.engine, span, run_unknown=run_unknown, recorded=recorded)
        return closing.merged_close(out, lane) if lane is not None else out

    def _unplaced(self, key: tuple[int, int], attributes: Mapping[str, Any]) -> bool:
        """No tagger, no run attribute, no run context: the call's run is not known."""
        if run_context.tagged(key) is not None:
            self.tagged = True
            return False
        return (
            current_run.get() is None
            and not self.engine.knows(key)
            and names.RUN_ID not in attributes
        )

    def _warn_unplaced(self) -> None:
        if self._warned:
            return
        self._warned = True
        _logger.warning(
            "af_otel: af_otel.run blocks were entered but ReceiptSpanExporter cannot see which "
            "spans started in them; wrap its batch processor in af_otel.RunTagger(...). Until "
            "then their calls are filed under their trace and carry no-run-log"
        )

    def shutdown(self) -> None:
        self.awaited.close()
        self.engine.close()
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self._inner.force_flush(timeout_millis))


class RunTagger(ForwardingProcessor):
    """Pass-through around the exporter form's batch processor: records the `af_otel.run` block
    each span starts in, for `ReceiptSpanExporter` to read, and, when that exporter taps the
    wire, notes each span's start for the tap's pairing as the processor does, and which spans
    are still to come (`af_otel.processor.awaited`). Every call reaches ``inner`` with the very
    span it was given; outside a run block ``on_start`` costs one context-variable read (with the
    tap on, one context-variable set and a weak reference more, and ``on_end`` one look-up)."""

    def __init__(self, inner: SpanProcessor) -> None:
        super().__init__(inner)
        # SimpleSpanProcessor and BatchSpanProcessor both name their exporter `span_exporter`.
        exporter = getattr(inner, "span_exporter", None)
        # Close records go only to an exporter that fills them in (and drops one with nothing
        # to close): any other inner gets the very spans it was given, and nothing more.
        self._closes = isinstance(exporter, ReceiptSpanExporter)
        # The wire tap pairs a body with the span started last where it is sent: the tagger is
        # the one part of the exporter form that sees span starts (docs/processor.md, Pairing).
        self._starts = False
        self._awaited: Awaited | None = None
        if isinstance(exporter, ReceiptSpanExporter):
            exporter.tagged = True
            self._starts = wire_source.wanted(exporter._settings)
            # Which calls are still to come, for the tap's bodies filed under them or kept late.
            self._awaited = exporter.awaited if self._starts else None
        # The runs this tagger saw spans of (bounded, latest kept) and their spans' resource,
        # for the close records it hands on (`af_otel.processor.closing`).
        self._runs: OrderedDict[str, tuple[Resource, tuple[int, int]]] = OrderedDict()
        self._runs_lock = forksafe.lock(self)
        forksafe.on_fork(self, RunTagger._forget_runs)
        closing.register(self)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self._starts:
            try:  # not `guard`: a context manager would cost more than the note itself
                context = span.get_span_context()
                key = (context.trace_id, context.span_id)
                wire_source.started(key)
                if self._awaited is not None:
                    self._awaited.started(key, span)
            except Exception as exc:
                settle("RunTagger.on_start", exc)
        run_id = current_run.get()
        if run_id is not None:
            with guard("RunTagger.on_start"):
                context = span.get_span_context()
                run_context.tag((context.trace_id, context.span_id), run_id)
                parent = span.parent
                place = (context.trace_id, parent.span_id if parent is not None else 0)
                with self._runs_lock:
                    self._runs[run_id] = (span.resource, place)
                    self._runs.move_to_end(run_id)
                    while len(self._runs) > _RUNS_TAGGED:
                        self._runs.popitem(last=False)
        self._inner.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self._awaited is not None:
            try:
                self._awaited.ended(span)
            except Exception as exc:
                settle("RunTagger.on_end", exc)
        self._inner.on_end(span)

    def _forget_runs(self) -> None:
        """In a forked child: no runs (the parent's open blocks are not the child's)."""
        self._runs = OrderedDict()

    def close_run(self, run_id: str) -> bool:
        """Hand ``inner`` an empty close record of ``run_id`` when spans of it started here: the
        exporter behind it names its lane when it exports it, after the run's calls."""
        with self._runs_lock:
            found = self._runs.pop(run_id, None)
        if found is None or not self._closes:
            return False
        self._inner.on_end(closing.close_span(run_id, [], *found))
        return True


def _is_close(span: ReadableSpan) -> bool:
    return closing.is_run_close(span.name, span.attributes or {})


def _run_closed(span: ReadableSpan) -> str:
    return str((span.attributes or {})[names.RUN_ID])


def _empty_close(span: ReadableSpan) -> bool:
    return _is_close(span) and not (span.attributes or {}).get(names.RUN_CLOSE_LANES)


def _key_of(span: ReadableSpan) -> tuple[int, int]:
    context = span.context
    return (context.trace_id, context.span_id) if context is not None else (0, 0)


def outer_calls(calls: Sequence[CallFacts], trusted: str | None) -> set[tuple[int, int]]:
    """The calls (sorted by start) that may be a second record of another call of the batch: its
    time window holds that call's, whose scope differs and ranks at least as high
    (`dedupe.match`). Calls of one scope overlapping (a fan-out) are numbered as usual."""
    found: set[tuple[int, int]] = set()
    for index, outer in enumerate(calls):
        mine = dedupe.rank(outer.scope, trusted)
        for inner in calls[index + 1 :]:
            if inner.start_time > outer.end_time:
                break
            if (
                inner.end_time <= outer.end_time
                and inner.scope != outer.scope
                and dedupe.rank(inner.scope, trusted) >= mine
            ):
                found.add(outer.key)
                break
    return found
