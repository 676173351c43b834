"""Served views: for each LLM call, the request as the reader rebuilt it, with the gaps it has.

A view is rebuilt from the record of changes and the run's base only; the receipt on the span is
carried alongside, untouched, for `verify` to check the rebuild against. The receipt's own fields
decide no value of the view (a rebuild that copied its answer sheet would prove nothing): only
whether one exists, and what the writer's recorded gap kinds add as caveats.

The gaps a view's span and values decide are found in `af_otel.reader.view_gaps`, the server-held
history a call continues in `af_otel.reader.held`, and the calls a run's record lacks in
`af_otel.reader.turns`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from af_otel import forksafe, names
from af_otel.canonical import canonical_json
from af_otel.model import FrozenDict, Request, sealed_reasoning
from af_otel.model.gap_rules import sealed_messages
from af_otel.model.request import REQUEST_KEYS, normalize_params
from af_otel.reader.agents import AgentStep, agent_steps
from af_otel.reader.arguments import spans_only
from af_otel.reader.blobs import BlobDamage
from af_otel.reader.closes import RunEnd, close_records, run_end
from af_otel.reader.epochs import minted_from_wire
from af_otel.reader.fold import ABSENT, UNKNOWN, ChainedTuple, KeyedFold, apply_verb, freeze
from af_otel.reader.gaps import Gap, gap, order_gaps
from af_otel.reader.gc_pause import collector_paused
from af_otel.reader.held import HeldCall, held_calls, response_id
from af_otel.reader.merged import MergeKey, SameCall, merge_key, split_merged
from af_otel.reader.records import SpanRecord
from af_otel.reader.runs import EpochRecord, Run, group_runs
from af_otel.reader.turns import model_turns, unrecorded_call_gaps
from af_otel.reader.view_gaps import common_gaps, unrecorded_of
from af_otel.receipts import MalformedReceipt, Receipt
from af_otel.store import Store, open_store

__all__ = ["HeldCall", "RunContext", "ServedView", "model_turns", "served_views"]


class RunContext:
    """The reader's working memory for one run, shared by the run's views.

    It links each view to the views of its run (so `verify` can reach the parent's entries) and
    holds what `verify` recomputes, bounded there. It states no fact of its own."""

    __slots__ = ("__weakref__", "base_messages", "lock", "memo", "run_id", "views")

    def __init__(
        self,
        run_id: str | None,
        base_messages: Sequence[Any] | None,
        views: dict[int, ServedView] | None = None,
    ) -> None:
        self.run_id = run_id
        self.base_messages = base_messages  # the base's messages when the run has a loaded base
        # shared by the lanes of a run several writers served
        self.views: dict[int, ServedView] = views if views is not None else {}
        self.memo: dict[object, Any] = {}
        self.lock = forksafe.rlock(self)
        # What `verify` recomputes may be half-written by a parent thread at a fork: the child
        # recomputes it (the memo states no fact, so nothing read changes).
        forksafe.on_fork(self, RunContext._forget_memo)

    def _forget_memo(self) -> None:
        self.memo = {}

    def __repr__(self) -> str:
        return f"RunContext({self.run_id!r}, {len(self.views)} views)"

    def shared_prefix(
        self, new: Sequence[Any], old: Sequence[Any], *, extends: bool = False
    ) -> int:
        """`common_prefix` of two message lists of this run, found once per pair: the view
        builder asks it for each epoch and its parent (``extends`` when the fold built ``new`` by
        appending to ``old``), and `verify` asks it again."""
        key = ("prefix", id(new), id(old))
        found = self.memo.get(key)
        if found is not None and found[0] is new and found[1] is old:
            return int(found[2])
        # A list the fold says it only appended to starts with all of ``old``: no need to compare.
        if extends and len(new) >= len(old):
            shared = len(old)
        else:
            shared = ChainedTuple.common_prefix(new, old)
        self.memo[key] = (new, old, shared)
        return shared

    def canonical(self, message: Any, *, keep: bool = True) -> bytes:
        """`canonical_json` of one of this run's messages, encoded once for two readers: the
        unrecorded-call check encodes each call's last message and keeps it (``keep``), `verify`
        takes it when it hashes that message (``keep=False``: then the run holds it no more)."""
        key = ("canonical", id(message))
        found = self.memo.get(key) if keep else self.memo.pop(key, None)
        if found is not None and found[0] is message:
            return found[1]  # type: ignore[no-any-return]
        data = canonical_json(message)
        if keep:
            self.memo[key] = (message, data)
        return data


@dataclass(frozen=True, slots=True)
class ServedView:
    """One LLM call's request as rebuilt, with its receipt and gaps. Immutable throughout.

    ``system``, ``messages``, ``tools`` and ``params`` are None when not on record (a gap says
    why), never an empty stand-in; ``model``/``provider`` are None when unset or not on record.
    The lists are tuples, or `ChainedTuple` where an epoch appended to its parent's list (they
    share it; both read alike).
    """

    run_id: str | None
    epoch: int
    parent: int
    span_id: str
    trace_id: str
    service: str | None
    name: str
    origin: str
    base: str | None
    system: Sequence[FrozenDict] | None
    messages: Sequence[FrozenDict] | None
    tools: Sequence[FrozenDict] | None
    params: FrozenDict | None
    model: str | None
    provider: str | None
    receipt: Receipt | MalformedReceipt | None
    gaps: tuple[Gap, ...]
    context: RunContext = field(compare=False, repr=False)
    # Request fields the instrumentation does not record (``af.receipt.unrecorded``), and the
    # instrumentation scope that wrote the span: a renderer says "tools: not recorded by <scope>"
    # instead of showing an empty list as if the request had none.
    unrecorded: tuple[str, ...] = ()
    recorded_by: str | None = None
    # The epoch the writer diffed this call against (its ``af.epoch.parent``): ``parent`` itself
    # unless several writers served the run and ``parent`` was found from content.
    basis: int = 0
    # Other spans that record this same model call (a framework's span around the SDK's, a
    # provider SDK's own span), merged into this epoch by the writer (``af.epoch.same_as``).
    same_call: tuple[SameCall, ...] = ()
    # The earlier calls whose requests and answers the server held for this one, oldest first,
    # as far as this run's record links them (`HeldCall`); empty unless it continues held state.
    held: tuple[HeldCall, ...] = ()
    # Facts about the span for finding and sorting the call, none of them a fact of the request:
    # the writer that numbered it (``af.epoch.lane``), the scope's version, and where the
    # recorded request came from (``af.receipt.source``: ``wire`` or ``instrumentation``, which
    # a span without it reads as).
    lane: str | None = None
    scope_version: str | None = None
    source: str = names.SOURCE_INSTRUMENTATION
    # On a call minted from the wire, the fields the instrumentation's own record said otherwise
    # than the body sent (``af.record.differs``).
    record_differs: tuple[str, ...] = ()
    # On a call minted from the wire, the store address of how its body spelled what the request
    # does not say (``af.wire.spelling``), for an exact replay (docs/receipt-spec.md §14).
    spelling: str | None = None
    # The stored blobs this view (and its check) depends on that are damaged: bytes that do not
    # hash to their address, or not what their reference promised. Never a gap: `verify` makes
    # such a view `damaged`, naming the first blob and the field it feeds.
    damaged: tuple[BlobDamage, ...] = ()
    # How the call's run ends on the record (`RunEnd`: closed, open or cut at the end), shared
    # by the run's views; None for a call that names no run.
    run_end: RunEnd | None = None
    # The digest the run's close record states for this call when it names it as its lane's
    # last ("" for a call without a receipt); `verify` makes a view whose receipt differs damaged.
    closed_with: str | None = None
    # Where the call sits in the agent tree (`af_otel.reader.agents`): its agent, the tools run
    # after it, a handoff; None when the record shows no agent span above it and no tool after it.
    agent: AgentStep | None = None
    # The request parts read from util-genai's upload hook's files (`--upload-base`) because the
    # record lacks them (`af_otel.reader.upload_refs`), and the call's output as that hook
    # uploaded it (no receipt covers it); () and None without uploads.
    from_uploads: tuple[str, ...] = ()
    output: Sequence[FrozenDict] | None = None

    @property
    def request(self) -> Request:
        """The rebuilt request (parts not on record read as empty: check ``gaps`` first)."""
        return Request(
            tuple(self.system or ()),
            tuple(self.messages or ()),
            tuple(self.tools or ()),
            self.params if self.params is not None else FrozenDict(),
            self.model,
            self.provider,
        )

    def is_recorded(self, field_name: str) -> bool:
        """Whether the record can show ``field_name`` (``tools``, ``tool_choice``, ...) at all."""
        return field_name not in self.unrecorded

    @property
    def gap_kinds(self) -> tuple[str, ...]:
        return tuple(g.kind for g in self.gaps)

    def gap(self, kind: str) -> Gap | None:
        """This view's gap of ``kind``, if it has one."""
        return next((g for g in self.gaps if g.kind == kind), None)

    @property
    def parent_view(self) -> ServedView | None:
        """The view of the epoch this one's changes apply to; None at the base or if missing."""
        return self.context.views.get(self.parent) if self.parent else None

    @property
    def basis_view(self) -> ServedView | None:
        """The view of the epoch this one's commits and ``messages.kept`` are relative to."""
        return self.context.views.get(self.basis) if self.basis > 0 else None

    @property
    def minted(self) -> bool:
        """Whether the span carries a usable receipt to check this view against."""
        return isinstance(self.receipt, Receipt) and self.receipt.minted


def served_views(
    spans: Iterable[SpanRecord],
    *,
    store: Store | str | os.PathLike[str] | None = None,
) -> tuple[ServedView, ...]:
    """Rebuild what every LLM call among ``spans`` was served: one frozen view per call.

    Views come run by run (runs in order of their first call), epoch by epoch; calls that name no
    run come last. ``store`` is a `Store` or its URL; without one, ``$AF_OTEL_STORE``, else
    ``./.af_otel/store``. Data problems become gaps on the views; nothing here raises for them.
    Anything but span records (a path, a document, views) raises TypeError saying what to pass.
    The build runs with the cyclic garbage collector paused (`collector_paused`).
    """
    spans = spans_only(spans, "served_views")
    opened = store if store is not None and not isinstance(store, str | os.PathLike) else None
    if opened is None:
        opened = open_store(store)  # type: ignore[arg-type]
    with collector_paused():
        return _built_views(spans, opened)


def _built_views(spans: Iterable[SpanRecord], store: Store) -> tuple[ServedView, ...]:
    spans = list(spans)  # read twice: for the calls, and for the agent and tool spans around them
    calls, merged = split_merged(spans)
    runs, loose = group_runs(calls, store)
    closes = close_records(calls)
    ends: dict[str, RunEnd] = {}
    for run in runs:
        if run.run_id not in ends:
            on_record = [
                (record.lane, writer)
                for lane in runs
                if lane.run_id == run.run_id
                for record in (*lane.epochs.values(), *lane.others)
                if (writer := _writer_epoch(record)) is not None
            ]
            ends[run.run_id] = run_end(run.run_id, on_record, closes.get(run.run_id, ()))
    out: list[ServedView] = []
    # A run several writers served comes as consecutive lanes sharing one numbering: their views
    # share one index (so a parent in another lane is found) and are listed in that numbering.
    shared: dict[int, ServedView] = {}
    lanes: list[ServedView] = []
    for index, run in enumerate(runs):
        lanes.extend(_run_views(run, shared, merged, ends[run.run_id]))
        if index + 1 == len(runs) or runs[index + 1].run_id != run.run_id:
            lanes = _unrecorded_calls(lanes)
            out.extend(sorted(lanes, key=lambda view: view.epoch) if len(lanes) > 1 else lanes)
            shared, lanes = {}, []
    for span in loose:
        out.append(_loose_view(span))
    return tuple(_with_agents(out, spans))


def _with_agents(views: list[ServedView], spans: Sequence[SpanRecord]) -> list[ServedView]:
    """The views, each with its place in the agent tree where the record shows one."""
    steps = agent_steps(spans, [(view.run_id, view.trace_id, view.span_id) for view in views])
    if not steps:
        return views
    out = []
    for view in views:
        step = steps.get((view.trace_id, view.span_id))
        if step is None:
            out.append(view)
            continue
        placed = replace(view, agent=step)
        if view.context.views.get(view.epoch) is view:
            view.context.views[view.epoch] = placed
        out.append(placed)
    return out


def _writer_epoch(record: EpochRecord) -> int | None:
    """The epoch number the writer gave the call (its lane's own, which close records name)."""
    epoch = record.span.attributes.get(names.EPOCH)
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None


# Absent params, one object for every view (so that a run's receipts encode it once).
_NO_PARAMS: Final = FrozenDict()


def _params(value: Any, memo: dict[int, tuple[Any, FrozenDict]]) -> FrozenDict | None:
    if value is UNKNOWN:
        return None
    if value is ABSENT:
        return _NO_PARAMS
    found = memo.get(id(value))
    if found is not None and found[0] is value:
        return found[1]
    normalized = freeze(normalize_params(value))
    memo[id(value)] = (value, normalized)
    return normalized  # type: ignore[no-any-return]


def _items(value: Any) -> Sequence[FrozenDict] | None:
    if value is UNKNOWN:
        return None
    if value is ABSENT:
        return ()
    return value  # type: ignore[no-any-return]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _strings(value: object) -> tuple[str, ...]:
    if isinstance(value, str):  # a backend that flattened a one-item array
        value = (value,)
    if not isinstance(value, tuple):
        return ()
    return tuple(v for v in value if isinstance(v, str) and v)


def _span_facts(span: SpanRecord) -> dict[str, Any]:
    """The view fields read straight off the span that say where the call was recorded."""
    lane = span.attributes.get(names.EPOCH_LANE)
    source = span.attributes.get(names.RECEIPT_SOURCE)
    return {
        "recorded_by": span.scope or None,
        "lane": lane if isinstance(lane, str) and lane else None,
        "scope_version": span.scope_version or None,
        "source": source if isinstance(source, str) and source else names.SOURCE_INSTRUMENTATION,
        "record_differs": _strings(span.attributes.get(names.RECORD_DIFFERS)),
        "spelling": _text(span.attributes.get(names.WIRE_SPELLING)),
    }


def _base_messages(run: Run) -> Sequence[Any] | None:
    """The base's messages when the run has a loaded base; None otherwise, and for a damaged
    base, whose messages are not on record."""
    if run.base_address is None or run.base_problem is not None:
        return None
    loaded = run.fold.value_at("messages", 0)
    if isinstance(loaded, tuple | ChainedTuple):
        return loaded
    return None if loaded is UNKNOWN else ()


def _values_of(
    run: Run, record: EpochRecord, own_fold: bool, receipt: Receipt | MalformedReceipt | None
) -> dict[str, Any]:
    """Each request key's value for ``record``'s call, as the fold over the run's log gives it."""
    fold = run.fold
    if own_fold:
        values = {key: fold.value_at(key, record.epoch) for key in REQUEST_KEYS}
    else:
        # A second span claiming an epoch number: its commits on the claimed parent's state.
        known = record.basis == 0 or (record.basis in run.epochs and record.basis < record.epoch)
        at = record.basis if known else 0
        values = {key: fold.value_at(key, at) for key in REQUEST_KEYS}
        for commit in record.commits:
            if commit.key in values:
                values[commit.key] = apply_verb(commit.verb, values[commit.key], commit.value)
    usable = isinstance(receipt, MalformedReceipt) or (
        isinstance(receipt, Receipt) and receipt.minted
    )
    if not record.commits and not usable:
        # No receipt and no changes: the writer had no request for this call, so the parent's
        # state says nothing about it.
        values = dict.fromkeys(REQUEST_KEYS, UNKNOWN)
    return values


class _SealedScan:
    """Whether an epoch's messages replay sealed reasoning. Per epoch it keeps its messages and
    the positions of sealed reasoning in them, found by scanning only what the epoch added to its
    parent's list."""

    __slots__ = ("context", "fold", "scans")

    def __init__(self, fold: KeyedFold, context: RunContext) -> None:
        self.fold = fold
        self.context = context
        self.scans: dict[int, tuple[Sequence[Any], tuple[int, ...]]] = {}

    def __call__(self, epoch: int, parent: int, messages: Sequence[Any] | None) -> bool:
        if messages is None:
            return False
        before = self.scans.get(parent) if parent else None
        extends = self.fold.extends_parent("messages", epoch)
        shared = self.context.shared_prefix(messages, before[0], extends=extends) if before else 0
        kept = tuple(i for i in before[1] if i < shared) if before else ()
        added = tuple(
            i for i, message in enumerate(messages[shared:], shared) if sealed_reasoning(message)
        )
        self.scans[epoch] = (messages, kept + added)
        return bool(kept or added)


def _answered_by(
    claimants: Sequence[tuple[EpochRecord, bool]],
) -> dict[str, tuple[int, str | None]]:
    """Response id -> (the epoch that got it, what that call itself continued)."""
    answered_by: dict[str, tuple[int, str | None]] = {}
    for record, own in claimants:
        answer = response_id(record.span) if own else None
        if answer is not None:
            continued = record.span.attributes.get(names.HELD_HISTORY)
            held = continued if isinstance(continued, str) and continued else None
            answered_by.setdefault(answer, (record.epoch, held))
    return answered_by


def _log_gaps(
    run: Run, record: EpochRecord, own: bool, end: RunEnd | None, place: tuple[str, int]
) -> list[Gap]:
    """The gaps the run's log gives one call: its base, its place in the log, its span's cuts and
    how the run ends."""
    found: list[Gap] = []
    if run.base_problem is not None:
        found.append(gap(names.GAP_NO_FOLD_BASE, run.base_problem))
    if not own:
        found.append(gap(names.GAP_NO_RUN_LOG, f"another span also claims epoch {record.epoch}"))
    elif record.epoch in run.broken:
        found.append(gap(names.GAP_NO_RUN_LOG, run.broken[record.epoch]))
    if record.cut:
        found.append(gap(names.GAP_SPAN_LIMITS, "; ".join(record.cut)))
    if own and end is not None and place in end.marked:
        found.append(gap(names.GAP_RUN_CUT_AT_END, end.detail))
    return found


def _run_views(
    run: Run,
    shared: dict[int, ServedView] | None = None,
    merged: Mapping[MergeKey, tuple[SameCall, ...]] | None = None,
    end: RunEnd | None = None,
) -> list[ServedView]:
    context = RunContext(run.run_id, _base_messages(run), shared)
    params_memo: dict[int, tuple[Any, FrozenDict]] = {}
    sealed_scan = _SealedScan(run.fold, context)
    claimants = [(run.epochs[e], True) for e in sorted(run.epochs)]
    claimants += [(record, False) for record in run.others]
    answered_by = _answered_by(claimants)
    views: list[ServedView] = []
    for record, own in claimants:
        span = record.span
        receipt = Receipt.from_attributes(span.attributes)
        values = _values_of(run, record, own, receipt)
        messages = _items(values["messages"])
        tools = _items(values["tools"])
        params = _params(values["params"], params_memo)
        if own:
            sealed = sealed_scan(record.epoch, run.fold_parents.get(record.epoch, 0), messages)
        else:
            sealed = messages is not None and sealed_messages(messages)
        place = (record.lane, _writer_epoch(record) or 0)
        found = _log_gaps(run, record, own, end, place)
        unrecorded = unrecorded_of(span)
        holding = held_calls(span, answered_by, context.views)
        found += common_gaps(span, receipt, values, params, tools, sealed, unrecorded, holding)
        view = ServedView(
            run_id=run.run_id,
            epoch=record.epoch,
            parent=record.parent,
            span_id=span.span_id,
            trace_id=span.trace_id,
            service=span.service_name,
            name=span.name,
            origin=span.origin,
            base=run.base_address,
            system=_items(values["system"]),
            messages=messages,
            tools=tools,
            params=params,
            model=_text(values["model"]),
            provider=_text(values["provider"]),
            receipt=receipt,
            gaps=order_gaps(found),
            context=context,
            unrecorded=unrecorded,
            **_span_facts(span),
            basis=record.basis,
            same_call=_same_call(merged, span),
            held=holding[0],
            damaged=record.damage,
            run_end=end,
            closed_with=end.named.get(place) if end is not None and own else None,
        )
        if own:
            context.views[record.epoch] = view
        views.append(view)
    return views


def _unrecorded_calls(views: list[ServedView]) -> list[ServedView]:
    """The views of one run, each whose history shows a model answer no call on record gave
    marked `unrecorded-call` (`af_otel.reader.turns`)."""
    found = unrecorded_call_gaps(views)
    out = []
    for index, view in enumerate(views):
        extra = found.get(index)
        if extra is None:
            out.append(view)
            continue
        marked = replace(view, gaps=order_gaps((*view.gaps, extra)))
        if view.context.views.get(view.epoch) is view:
            view.context.views[view.epoch] = marked
        out.append(marked)
    return out


def _same_call(
    merged: Mapping[MergeKey, tuple[SameCall, ...]] | None, span: SpanRecord
) -> tuple[SameCall, ...]:
    """The spans merged into this one's epoch as its writer numbered it (its lane's epoch)."""
    if not merged:
        return ()
    key = merge_key(span.attributes, span.attributes.get(names.EPOCH))
    return merged.get(key, ()) if key is not None else ()


def _loose_view(span: SpanRecord) -> ServedView:
    """An LLM-call span that names no run or no epoch: nothing of its request is on record."""
    receipt = Receipt.from_attributes(span.attributes)
    values = dict.fromkeys(REQUEST_KEYS, UNKNOWN)
    found = [gap(names.GAP_NO_RUN_LOG, "the span names no run or no epoch")]
    dropped_attributes = span.dropped_attributes_count and not minted_from_wire(span.attributes)
    if dropped_attributes or span.dropped_events_count:
        found.append(gap(names.GAP_SPAN_LIMITS, "the span reports dropped attributes or events"))
    unrecorded = unrecorded_of(span)
    found += common_gaps(span, receipt, values, None, None, False, unrecorded)
    run_id = span.attributes.get(names.RUN_ID)
    epoch = span.attributes.get(names.EPOCH)
    parent = span.attributes.get(names.EPOCH_PARENT)
    return ServedView(
        run_id=run_id if isinstance(run_id, str) and run_id else None,
        epoch=epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else 0,
        parent=parent if isinstance(parent, int) and not isinstance(parent, bool) else 0,
        span_id=span.span_id,
        trace_id=span.trace_id,
        service=span.service_name,
        name=span.name,
        origin=span.origin,
        base=None,
        system=None,
        messages=None,
        tools=None,
        params=None,
        model=None,
        provider=None,
        receipt=receipt,
        gaps=order_gaps(found),
        context=RunContext(None, None),
        unrecorded=unrecorded,
        **_span_facts(span),
    )
