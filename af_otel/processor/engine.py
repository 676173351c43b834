"""The enrichment core: one LLM call in, its receipt, place in the run, commits and gaps out.

The processor, the exporter, the util-genai hook and the explicit API all call this one `Engine`,
so a span carries the same evidence whichever form produced it. The engine touches no span: it
reads `CallFacts` and returns an `Enrichment` (attributes plus commit events) that each form
applies its own way: to a copy of the ended span, or to the live span before it ends.

Place in the run (docs/receipt-spec.md §10): the run id is the explicit `af_otel.run` (captured
where the call started, or for the exporter recorded at the start by `RunTagger`), else the run the
stack records (``af.run.id``, the conversation id, the enclosing agent span: `run_discovery`), else
its trace id in hex. Epochs follow start order: the processor numbers a call at ``on_start`` when
it can already tell an LLM call; a call it can only tell at the end (and every call the exporter
sees) is numbered then, and when that breaks start order (a call that started earlier was already
numbered later) the span says so with ``no-run-log`` instead of guessing. Epochs count per lane
(``af.epoch.lane``, random): one lane per run state this engine holds, so another process, a
restarted one, or this one after it released or evicted the run, numbers its calls in a lane of its
own without agreeing with anyone, and the reader joins a run's lanes into one tree by content. The
parent is, among the calls that finished before this one started, the one whose messages are the
longest prefix of this call's (ties: the latest finished), so calls that overlap never parent each
other and the log is a tree; both forms read it off the same span timestamps and requests and so
agree.
"""

from __future__ import annotations

import logging
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final

from af_otel import forksafe, names
from af_otel.model import Request
from af_otel.model.frozen_copy import replaced
from af_otel.processor import commits, dedupe, export_gaps, metrics, wire_source, wire_spelling
from af_otel.processor import settings as settings_module
from af_otel.processor.awaited import Awaited
from af_otel.processor.context import current_run, declared_base, tagged
from af_otel.processor.facts import CallFacts, Enrichment, Minting, SpanKey, Supplied
from af_otel.processor.guard import report
from af_otel.processor.history import carries_history
from af_otel.processor.run_discovery import Enclosing
from af_otel.processor.run_table import Base, Finished, RunState, RunTable
from af_otel.processor.settings import Settings, resolve_settings
from af_otel.receipts import Receipt, ReceiptContext, mint_receipt, seal_receipt
from af_otel.semconv import (
    CUT_COUNT,
    LIMIT_SETTINGS,
    Call,
    Limits,
    handed_call,
    is_llm_call,
    read_call,
    with_held,
)
from af_otel.store.items import StoredItems

# CallFacts, Enrichment and Supplied live in facts.py and are re-exported for the forms.
__all__ = [
    "MAX_OPEN",
    "CallFacts",
    "Engine",
    "Enrichment",
    "Supplied",
    "engine_for",
    "live_engines",
    "trace_run_id",
    "warn_cut",
]

# Calls started but not finished, remembered with their run: bounded like the run table, since a
# span that never ends must not hold memory forever.
MAX_OPEN: Final = 65_536


def trace_run_id(trace_id: int) -> str:
    return format(trace_id, "032x")


class Engine:
    """Run table plus settings; thread-safe. One per processor or exporter (and one default)."""

    def __init__(self, settings: Settings, *, deferred: bool = False) -> None:
        global _serial
        self.settings = settings
        # An exporter's engine sees calls after their `af_otel.run` block exited.
        self.deferred = deferred
        self.runs = RunTable(max_bytes=settings.run_table_bytes)
        self.items = StoredItems()
        self._open: OrderedDict[SpanKey, str] = OrderedDict()
        self._open_lock = forksafe.lock(self)
        # Open LLM calls numbered at their start, with their scope; and the provider SDK's own
        # spans merged into one of them (run, lane, epoch). Bounded like ``_open``.
        self._llm_scope: OrderedDict[SpanKey, str | None] = OrderedDict()
        self._merged: OrderedDict[SpanKey, tuple[str, str, int]] = OrderedDict()
        self._wire = wire_source.activate(settings)
        self.awaited: Awaited | None = None  # the exporter form's calls still to come
        self.enclosing = Enclosing()  # agent spans open now (run_discovery.py)
        with _default_lock:
            _serial += 1
            self.serial = _serial
        _live.add(self)
        forksafe.on_fork(self, Engine._forget_open)

    # -- start -------------------------------------------------------------------------------

    def on_start(
        self,
        key: SpanKey,
        name: str,
        attributes: Mapping[str, Any],
        start: int,
        scope: str | None = None,
        parent: SpanKey | None = None,
    ) -> None:
        """Number an LLM call at its start, in start order; other spans cost one check. A
        provider SDK's own span inside an open LLM call that ranks higher is merged into it; a
        call inside the open call numbered last may take over its number (`dedupe.number_at_start`)."""
        llm = is_llm_call(attributes, name)
        if self._wire:  # the tap pairs a body with the span started last where it is sent
            wire_source.started(key, llm)
        explicit = current_run.get()
        if explicit is None:
            self.enclosing.start(key, name, attributes, parent)
        if not llm:
            if explicit is not None:
                self._remember(key, explicit)
            return
        run_id = explicit or self.enclosing.run(key, attributes) or trace_run_id(key[0])
        self._remember(key, run_id)
        if parent is not None and self.merge(key, parent, scope):
            return
        run = self.runs.get(run_id)
        model = dedupe.model_of(attributes, None)
        with run.lock:
            dedupe.number_at_start(run, key, start, scope, model, self.settings.trusted_scope)
        with self._open_lock:
            _bounded_put(self._llm_scope, key, scope)

    def merge(self, key: SpanKey, parent: SpanKey, scope: str | None) -> bool:
        """Merge the call ``key`` into its open parent LLM call when `dedupe.merges_into_parent`
        says so; whether it was."""
        with self._open_lock:
            if parent not in self._llm_scope:
                return False
            parent_scope = self._llm_scope[parent]
            run_id = self._open.get(parent)
        trusted = self.settings.trusted_scope
        if run_id is None or not dedupe.merges_into_parent(scope, parent_scope, trusted):
            return False
        run = self.runs.get(run_id)
        with run.lock:
            found = run.open_calls.get(parent)
        if found is None:
            return False
        with self._open_lock:
            _bounded_put(self._merged, key, (run_id, run.lane, found[0]))
        return True

    def forget(self, key: SpanKey) -> None:
        with self._open_lock:
            self._open.pop(key, None)
            self._llm_scope.pop(key, None)
            self._merged.pop(key, None)
        if (ended := self.enclosing.end(key)) is not None:
            self.runs.release(ended)

    def knows(self, key: SpanKey) -> bool:
        with self._open_lock:
            return key in self._open

    def _remember(self, key: SpanKey, run_id: str) -> None:
        with self._open_lock:
            self._open[key] = run_id
            if len(self._open) > MAX_OPEN:
                self._open.popitem(last=False)

    def run_of(self, key: SpanKey, attributes: Mapping[str, Any], *, pop: bool) -> str:
        with self._open_lock:
            found = self._open.pop(key, None) if pop else self._open.get(key)
        if found is None:
            found = current_run.get()
        if found is None:
            tag = tagged(key)
            found = tag[0] if tag is not None else None
        discovered = self.enclosing.run(key, attributes, pop=pop)
        return found or discovered or trace_run_id(key[0])

    def number(self, facts: CallFacts) -> None:
        """Number a call at the end (the exporter numbers a batch in start order first)."""
        run = self.runs.get(self.run_of(facts.key, facts.attributes, pop=False))
        with run.lock:
            run.number(facts.key, facts.start_time)
        self._remember(facts.key, run.run_id)
        with self._open_lock:
            _bounded_put(self._llm_scope, facts.key, facts.scope)

    def may_repeat(self, facts: CallFacts) -> bool:
        """Whether a finished call of the run could be the one this call records again (an
        earlier export batch held it): then the exporter numbers it only if it is not merged."""
        run = self.runs.get(self.run_of(facts.key, facts.attributes, pop=False))
        trusted = self.settings.trusted_scope
        with run.lock:
            return dedupe.could_match(
                run.recent, facts.start_time, facts.end_time, facts.scope, trusted
            )

    def saw(self, facts: CallFacts) -> None:
        """A call another engine enriched (the completion hook minted it on the live span): keep
        it for merging a second record of it (its request is not read again)."""
        attributes = facts.attributes
        run_id, epoch = attributes.get(names.RUN_ID), attributes.get(names.EPOCH)
        lane = attributes.get(names.EPOCH_LANE, "")
        if not (isinstance(run_id, str) and isinstance(epoch, int) and isinstance(lane, str)):
            return
        model = dedupe.model_of(attributes, None)
        seen = dedupe.Seen(facts.start_time, facts.end_time, epoch, lane, facts.scope, model, None)
        run = self.runs.get(run_id)
        digest = attributes.get(names.RECEIPT_DIGEST)
        with run.lock:
            run.recent.append(seen)
            if lane == run.lane:
                run.finished_call(epoch, digest if isinstance(digest, str) else None, _place(facts))

    # -- finish ------------------------------------------------------------------------------

    def enrich(self, facts: CallFacts) -> Enrichment:
        """The evidence for one finished LLM call as its span's record holds it (semconv reads it
        once, only what is new since the run's last call); the run's state moves on by this call."""
        run = self.runs.get(self.run_of(facts.key, facts.attributes, pop=True))
        call = read_call(
            facts.recorded or facts.attributes,
            facts.name,
            scope=facts.scope,
            limits=facts.limits,
            seen=run.seen,
            held=not self._wire,  # a call minted from the wire has the wire's word on it
        )
        run.seen = call.seen
        if call.cut is not None and call.limits is not None:
            warn_cut(call.cut, call.limits)
        # Whether nothing but the provider SDK stood between is the record's: told with the gaps.
        return self._enrich(run, Minting(facts, call, None, self.settings.write_mode(True)))

    def enrich_handed(self, facts: CallFacts, supplied: Supplied) -> Enrichment:
        """`enrich` for a request handed over (the hook, the explicit API) instead of read."""
        run = self.runs.get(self.run_of(facts.key, facts.attributes, pop=True))
        call = supplied.call or handed_call(
            supplied.request,
            facts.attributes,
            facts.name,
            sealed=supplied.sealed,
            scan=supplied.scan,
            prefix=supplied.prefix,
        )
        mode = self.settings.write_mode(supplied.on_span)
        return self._enrich(run, Minting(facts, call, supplied.direct, mode))

    def _enrich(self, run: RunState, minting: Minting) -> Enrichment:
        minting, sent, differs = self._sent(run, minting)
        facts, call = minting.facts, minting.call
        with self._open_lock:
            self._llm_scope.pop(facts.key, None)
            merged = self._merged.pop(facts.key, None)
        if merged is not None:
            return Enrichment(dedupe.merged_attributes(*merged), (), call.content_keys, "folded")
        model = call.model
        with run.lock:
            same = None
            if facts.key not in run.open_calls:
                same = dedupe.match(
                    run.recent,
                    facts.start_time,
                    facts.end_time,
                    facts.scope,
                    model,
                    call.request,
                    self.settings.trusted_scope,
                )
            if same is not None:
                attributes = dedupe.merged_attributes(run.run_id, same.lane, same.epoch)
                return Enrichment(attributes, (), call.content_keys, "folded")
            enrichment = self._finish(run, minting)
            if enrichment.state != names.STATE_MINTED:  # a minted af-2 receipt binds its own
                enrichment.attributes[names.RECEIPT_SOURCE] = (
                    facts.source or names.SOURCE_INSTRUMENTATION
                )
            if differs:
                enrichment.attributes[names.RECORD_DIFFERS] = list(differs)
            if sent is not None and sent.attempts > 1:
                enrichment.attributes[names.WIRE_ATTEMPTS] = sent.attempts
            if sent is not None and sent.spelling is not None:
                wire_spelling.keep(self.settings, sent.spelling, enrichment.attributes)
            epoch = enrichment.attributes[names.EPOCH]
            conversation = dedupe.conversation(call.request)
            seen = dedupe.Seen(
                facts.start_time, facts.end_time, epoch, run.lane, facts.scope, model, conversation
            )
            dedupe.remember(run.recent, seen, call.prefix)
        self.runs.settle(run)
        metrics.count_receipt(
            enrichment.state, enrichment.attributes.get(names.RECEIPT_ABSENT_REASON)
        )
        return enrichment

    def _sent(
        self, run: RunState, minting: Minting
    ) -> tuple[Minting, wire_source.FromWire | None, tuple[str, ...]]:
        """The call as its client sent it where the wire tap saw the body (and the fields its
        record says otherwise), else as read, with the server-held history its record shows."""
        facts = minting.facts
        named = minting.call.model  # the record's model, if any
        take = wire_source.take
        # An open call keeps what was filed under it (the exporter form: one still to take it).
        opened, awaited = self._llm_scope, self.awaited

        def calling(key: SpanKey, at: int) -> bool:
            return key in opened or (awaited is not None and awaited.takes(key, at))

        sent = take(self.settings, facts, named, run, minting.call, calling) if self._wire else None
        if sent is None and self._wire and wire_source.evicted(facts):  # said, not silent
            minting = replace(minting, facts=replace(facts, body_evicted=True))
        if sent is None and minting.call.held_read:
            return minting, None, ()
        if sent is None:
            found = with_held(minting.call, facts.recorded or facts.attributes, facts.name)
            return replace(minting, call=found), None, ()
        prefixes = (minting.call.prefix, sent.prefix)
        differs = (
            sent.differs
            if sent.differs is not None
            else wire_source.record_differs(minting.call.request, sent.request, run, prefixes)
        )
        keep = wire_source.inline_only_recorded(minting.call.request)
        return _from_wire(minting, sent, keep), sent, differs

    def _finish(self, run: RunState, minting: Minting) -> Enrichment:
        facts, call = minting.facts, minting.call
        request, reason, prefix = call.request, call.absent_reason, call.prefix
        epoch, out_of_order = run.number(facts.key, facts.start_time)
        parent = run.parent_of(facts.start_time, request, prefix)
        parent_state, parent_receipt = self._parent_state(run, parent, request, facts.key)
        parent_epoch = parent.epoch if parent is not None else 0
        if request is None:
            reason = reason or names.REASON_NOT_CAPTURED
            receipt = Receipt(names.STATE_ABSENT, run.run_id, epoch, parent_epoch, reason)
        else:
            receipt = mint_receipt(
                request,
                run_id=run.run_id,
                epoch=epoch,
                parent=parent_receipt if parent_receipt is not None else parent_epoch,
                digests=run.digests,
                key=self.settings.key,
                lane=run.lane,
                parent_digest=None if parent is None else (parent.digest or ""),
                context=ReceiptContext(
                    source=facts.source or names.SOURCE_INSTRUMENTATION,
                    scope_name=facts.scope,
                    scope_version=facts.scope_version,
                    base=run.base.address if run.base is not None else None,
                    held=call.held,
                ),
                seal=False,  # the digest binds the gaps, known below
                prefix=prefix,
            )
        minted = receipt.minted
        events, lost = self._commits(run, minting, parent_state) if minted else ([], False)
        unrecorded = call.unrecorded if minted else ()
        order_unknown = out_of_order or lost or facts.run_unknown
        trusted = self.settings.trusted_hosts
        found = export_gaps.minting_gaps(minting, receipt, unrecorded, order_unknown, trusted)
        receipt = seal_receipt(receipt, key=self.settings.key, gaps=found, unrecorded=unrecorded)
        # The sealed receipt is kept: the next epoch of the lane binds its digest.
        kept = (request, receipt) if minted else (None, None)
        record = Finished(facts.end_time, epoch, *kept)
        run.finish(facts.key, record, prefix)
        run.finished_call(epoch, receipt.digest if minted else None, _place(facts))
        attributes: dict[str, Any] = {
            names.RUN_ID: run.run_id,
            names.EPOCH: epoch,
            names.EPOCH_PARENT: parent_epoch,
            names.EPOCH_LANE: run.lane,
        }
        attributes.update(receipt.to_attributes())
        if minted:
            attributes[names.RECEIPT_UNRECORDED] = list(unrecorded)
        if call.held is not None:
            attributes[names.HELD_HISTORY] = call.held
        if run.base is not None:
            attributes[names.RUN_BASE] = run.base.address
        attributes[names.GAPS] = found
        attributes[names.GAP_NO_RECEIPT_ON_CHART] = not minted
        return Enrichment(attributes, tuple(events), call.content_keys, receipt.state)

    def _parent_state(
        self, run: RunState, parent: Any, request: Request | None, key: SpanKey
    ) -> tuple[Request | Mapping[str, Any] | None, Receipt | None]:
        """The state a call's commits are the changes from, and the receipt it chains to: its
        parent call's, else the run's base (the first call decides it), else empty."""
        if parent is not None:
            return parent.request, parent.receipt
        if run.base is None and not run.started_empty and request is not None:
            self._decide_base(run, request, key)
        if run.base is not None:
            return run.base.request, run.base.receipt
        return commits.EMPTY, None

    def _commits(
        self, run: RunState, minting: Minting, parent_state: Request | Mapping[str, Any] | None
    ) -> tuple[list[tuple[str, dict[str, Any]]], bool]:
        """The commit events of a minted call's changes from ``parent_state``, and whether a
        payload the store refused left one without value or ref (then this epoch's changes are
        incomplete, and the span says `no-run-log` itself, not only the reader)."""
        request = minting.call.request
        assert request is not None  # a minted receipt has its request
        events: list[tuple[str, dict[str, Any]]] = []
        mode, keep_inline = minting.mode, minting.keep_inline
        for change in commits.changes(parent_state, request, prefix=minting.call.prefix):
            seq = run.next_seq()
            how = mode
            if mode == "inline" and self.settings.content == "auto" and keep_inline:
                how = "inline" if keep_inline(change) else "store"
            commit = commits.event_attributes(change, seq, self.settings, how, self.items)
            events.append((names.COMMIT_EVENT, commit))
        lost = mode != "none" and any(
            commit.get(names.COMMIT_VERB) != "delete"
            and names.COMMIT_VALUE not in commit
            and names.COMMIT_REF not in commit
            for _, commit in events
        )
        return events, lost

    def _decide_base(self, run: RunState, request: Request, key: SpanKey) -> None:
        """The first call of a run decides its base: the one its `af_otel.run` block declared, else
        the call's own state when it already carries earlier turns (stored once instead of
        inlined); otherwise the run starts empty."""
        store = self.settings.store
        found = tagged(key)
        declared = found[1] if found is not None else declared_base(run.run_id)
        if self.settings.content == "none" or store is None:
            run.started_empty = True
            return
        if declared is not None:
            request = declared
        elif not carries_history(request):
            run.started_empty = True
            return
        try:
            state = request.to_dict()
            state["messages"] = self.items.put(store, state["messages"])
            address = store.put_json(state)
        except Exception as exc:
            report("store", exc)
            run.started_empty = True
            return
        settings_module.note_written(store)
        pseudo = mint_receipt(
            request, run_id=run.run_id, epoch=0, digests=run.digests, key=self.settings.key
        )
        run.base = Base(address, request, pseudo if pseudo.minted else None)

    closed = False

    def _forget_open(self) -> None:
        """In a forked child: no open calls. They are the parent's threads' calls, which never
        end in the child (its run table forgets their runs too, `RunTable._forget_runs`)."""
        self._open = OrderedDict()
        self._llm_scope = OrderedDict()
        self._merged = OrderedDict()

    def close(self) -> None:
        """The processor or exporter shut down: the hook stops choosing this engine."""
        if not self.closed and self._wire:
            wire_source.deactivate()
        self.closed = True

    def release_trace(self, trace_id: int) -> None:
        """The local root span of a trace ended: free its trace-id run."""
        self.runs.release(trace_run_id(trace_id))

    def closing(self, run_id: str) -> tuple[str, int, str] | None:
        """What the run's close record says of this engine's lane of ``run_id``: the lane, its
        last finished epoch and that epoch's digest ("" without one); None when this engine
        finished no call of the run."""
        run = self.runs.peek(run_id)
        if run is None:
            return None
        with run.lock:
            epoch, digest = run.last_call
            return (run.lane, epoch, digest) if epoch else None

    def last_place(self, run_id: str) -> tuple[int, int] | None:
        """The trace id and parent span id (0: none) of the run's last finished call here."""
        run = self.runs.peek(run_id)
        if run is None:
            return None
        with run.lock:
            return run.last_place if run.last_call[0] else None

    def release_run(self, run_id: str) -> None:
        """An `af_otel.run` block exited; an exporter's engine keeps the run until it expires."""
        if not self.deferred:
            self.runs.release(run_id)


def _from_wire(
    minting: Minting, sent: wire_source.FromWire, keep: Callable[[commits.Change], bool]
) -> Minting:
    """The call as its client sent it (the af-2 digest binds the wire as its source)."""
    was = minting.call
    call = Call(
        sent.request,
        None,
        was.convention,
        was.content_keys,
        sent.unread,
        sent.held,
        sealed=sent.sealed,
        prefix=sent.prefix,
        named_model=was.named_model,
    )
    # The af-2 digest binds the source and the gaps.
    facts = replaced(minting.facts, source=names.SOURCE_WIRE, attempts_differ=sent.differ)
    return replaced(minting, facts=facts, call=call, direct=sent.direct, keep_inline=keep)


def _bounded_put(table: OrderedDict[SpanKey, Any], key: SpanKey, value: Any) -> None:
    table[key] = value
    if len(table) > MAX_OPEN:
        table.popitem(last=False)


_logger = logging.getLogger("af_otel")
_warned: set[str] = set()  # at most one entry per limit: bounded
_warned_lock = forksafe.lock()


def warn_cut(cut: str, limits: Limits) -> None:
    """Say once per limit which setting to raise when span limits cut a call's record."""
    with _warned_lock:
        if cut in _warned:
            return
        _warned.add(cut)
    setting = LIMIT_SETTINGS.get(cut)
    if setting is None:
        _logger.warning(
            "af_otel: an LLM call's span lost part of its indexed attributes, so it gets no "
            "receipt (%s); look for a pipeline that drops attributes",
            names.REASON_CUT,
        )
        return
    now = limits.max_attributes if cut == CUT_COUNT else limits.max_value_length
    _logger.warning(
        "af_otel: the SDK's span limits cut an LLM call's record, so it gets no receipt (%s); "
        "raise %s (in force: %s)",
        names.REASON_CUT,
        setting,
        "default" if now is None else now,
    )


# Engines alive now: `af_otel.run` frees its run in each when its block exits, and the hook and
# the explicit API find the engine that numbered a span at its start.
_live: weakref.WeakSet[Engine] = weakref.WeakSet()
_default: Engine | None = None
_default_lock = forksafe.lock()
_serial = 0


def _place(facts: CallFacts) -> tuple[int, int]:
    """Where a run's close record goes beside this call: its trace id and parent span id (0:
    none)."""
    return (facts.key[0], facts.parent[1] if facts.parent is not None else 0)


def live_engines() -> list[Engine]:
    return list(_live)


def engine_for(key: SpanKey) -> Engine:
    """The engine that numbered ``key`` at its start, else the newest live one, else a default
    engine configured from the environment (hook-only and API-only setups)."""
    global _default
    engines = [engine for engine in live_engines() if engine is not _default and not engine.closed]
    for engine in engines:
        if engine.knows(key):
            return engine
    if engines:
        return max(engines, key=lambda engine: engine.serial)
    if _default is None:
        made = Engine(resolve_settings())
        with _default_lock:
            if _default is None:
                _default = made
    assert _default is not None
    return _default
