"""Served views: for each LLM call, the request as the reader rebuilt it, with the gaps it has.

A view is rebuilt from the record of changes and the run's base only; the receipt on the span is
carried alongside, untouched, for `verify` to check the rebuild against. The receipt's own fields
decide no value of the view (a rebuild that copied its answer sheet would prove nothing): only
whether one exists, and what the writer's recorded gap kinds add as caveats.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from af_otel import forksafe, names
from af_otel.canonical import canonical_json
from af_otel.errors import CanonicalJSONError
from af_otel.model import FrozenDict, Request, sealed_reasoning
from af_otel.model.fields import order_fields
from af_otel.model.gap_rules import request_gaps, sealed_messages
from af_otel.model.request import INSTRUCTION_ROLES, REQUEST_KEYS, normalize_params
from af_otel.reader.arguments import spans_only
from af_otel.reader.blobs import BlobDamage
from af_otel.reader.closes import RunEnd, close_records, run_end
from af_otel.reader.fold import ABSENT, UNKNOWN, ChainedTuple, apply_verb, freeze
from af_otel.reader.folded import FoldKey, SameCall, fold_key, split_folded
from af_otel.reader.gaps import (
    CAUSE_NOT_COMMITTED,
    CAUSE_SHAPE_REJECTED,
    Gap,
    gap,
    order_gaps,
)
from af_otel.reader.gc_pause import collector_paused
from af_otel.reader.records import SpanRecord
from af_otel.reader.runs import EpochRecord, Run, group_runs
from af_otel.receipts import MalformedReceipt, Receipt
from af_otel.store import Store, open_store

__all__ = ["HeldCall", "RunContext", "ServedView", "served_views"]

# Gap kinds the writer records that the reader adds to its own findings. Kinds the reader finds
# itself from the record (base, missing spans, receipts, limits) are decided here and only here;
# the writer's word is taken for what the reader cannot see: what stood between it and the wire,
# and a call it could not place in start order.
_TAKEN_FROM_WRITER: Final = frozenset(
    {
        names.GAP_NO_RUN_LOG,
        names.GAP_CACHE_TRANSFORM,
        names.GAP_THINKING_REPLAY,
        names.GAP_FORCED_TOOL_SCHEMA,
        names.GAP_PROVIDER_DEFAULTS,
        names.GAP_SPAN_LIMITS,
        names.GAP_WIRE_ATTEMPTS_DIFFER,
    }
)


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


@dataclass(frozen=True, slots=True)
class HeldCall:
    """One earlier call whose request and answer the provider's server held for a later call
    (the Responses API's ``previous_response_id``), found by following the run's response ids.

    ``epoch`` is None when no call on this run's record got ``response_id``: the record of the
    held history ends there. The answer is never fingerprinted by any receipt."""

    response_id: str
    epoch: int | None = None
    # That epoch's request as served there: its message count (None: not on record), its gap
    # kinds (what its own view cannot prove) and whether it carries a usable receipt.
    messages: int | None = None
    gaps: tuple[str, ...] = ()
    minted: bool = False


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
    # provider SDK's own span), folded into this epoch by the writer (``af.epoch.same_as``).
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
    calls, folded = split_folded(spans)
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
        lanes.extend(_run_views(run, shared, folded, ends[run.run_id]))
        if index + 1 == len(runs) or runs[index + 1].run_id != run.run_id:
            lanes = _unrecorded_calls(lanes)
            out.extend(sorted(lanes, key=lambda view: view.epoch) if len(lanes) > 1 else lanes)
            shared, lanes = {}, []
    for span in loose:
        out.append(_loose_view(span))
    return tuple(out)


def _writer_epoch(record: EpochRecord) -> int | None:
    """The epoch number the writer gave the call (its lane's own, which close records name)."""
    epoch = record.span.attributes.get(names.EPOCH)
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None


def _params(value: Any, memo: dict[int, tuple[Any, FrozenDict]]) -> FrozenDict | None:
    if value is UNKNOWN:
        return None
    if value is ABSENT:
        return FrozenDict()
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


def _recorded_gaps(span: SpanRecord) -> tuple[frozenset[str], bool]:
    value = span.attributes.get(names.GAPS)
    if isinstance(value, tuple):
        return frozenset(v for v in value if isinstance(v, str)), True
    if isinstance(value, str):  # a backend that flattened the array to one string
        return frozenset({value}), True
    return frozenset(), False


def _strings(value: object) -> tuple[str, ...]:
    if isinstance(value, str):  # a backend that flattened a one-item array
        value = (value,)
    if not isinstance(value, tuple):
        return ()
    return tuple(v for v in value if isinstance(v, str) and v)


def _unrecorded(span: SpanRecord) -> tuple[str, ...]:
    value = span.attributes.get(names.RECEIPT_UNRECORDED)
    if isinstance(value, str):  # a backend that flattened a one-item array
        value = (value,)
    if not isinstance(value, tuple):
        return ()
    return order_fields(v for v in value if isinstance(v, str) and v)


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
    }


def _receipt_gap(receipt: Receipt | MalformedReceipt | None) -> Gap | None:
    if receipt is None:
        return gap(names.GAP_NO_RECEIPT, "the span carries no receipt", CAUSE_NOT_COMMITTED)
    if isinstance(receipt, MalformedReceipt):
        return gap(names.GAP_NO_RECEIPT, receipt.reason, CAUSE_SHAPE_REJECTED)
    if not receipt.minted:
        why = receipt.absent_reason or "no reason given"
        return gap(names.GAP_NO_RECEIPT, f"receipt {receipt.state}: {why}", CAUSE_NOT_COMMITTED)
    return None


def _common_gaps(
    span: SpanRecord,
    receipt: Receipt | MalformedReceipt | None,
    values: Mapping[str, Any],
    params: FrozenDict | None,
    tools: Sequence[FrozenDict] | None,
    sealed: bool,
    unrecorded: tuple[str, ...] = (),
    held: tuple[tuple[HeldCall, ...], str | None] = ((), None),
) -> list[Gap]:
    found: list[Gap] = []
    recorded, has_recorded = _recorded_gaps(span)
    if names.GAP_HELD_HISTORY in recorded:
        found.append(gap(names.GAP_HELD_HISTORY, _held_detail(span, *held)))
        if len(held[0]) == 1 and held[0][0].epoch is None:
            # The response this call continues is one no call on record got: the same hole as
            # a model turn no call gave, when the record names the missing call's answer.
            lost = held[0][0].response_id
            found.append(
                gap(
                    names.GAP_UNRECORDED_CALL,
                    f"continues {lost}, which no call on this run's record answered: a call of "
                    "this run with no span, or a response made outside this run's record",
                )
            )
    if unrecorded:
        by = span.scope or "the instrumentation"
        found.append(gap(names.GAP_UNRECORDED, f"not recorded by {by}: " + ", ".join(unrecorded)))
    minted = isinstance(receipt, Receipt) and receipt.minted
    missing = [k for k in REQUEST_KEYS if values.get(k) is UNKNOWN]
    if missing:
        found.append(gap(names.GAP_NO_CONVERSATION, "not on record: " + ", ".join(missing)))
    no_receipt = _receipt_gap(receipt)
    if no_receipt is not None:
        found.append(no_receipt)
    if not minted or not has_recorded or names.GAP_CACHE_TRANSFORM in recorded:
        found.append(gap(names.GAP_CACHE_TRANSFORM))
    provider, model = values.get("provider"), values.get("model")
    found += (
        gap(kind, detail)
        for kind, detail in request_gaps(
            params,
            tools,
            provider=provider if isinstance(provider, str) else None,
            model=model if isinstance(model, str) else None,
            sealed=sealed,
            minted=minted,
            unrecorded=unrecorded,
        )
    )
    for kind in sorted(recorded & _TAKEN_FROM_WRITER):
        found.append(gap(kind, "recorded by the writer"))
    return found


def _response_id(span: SpanRecord) -> str | None:
    """The provider's id for the response a call got, as its convention records it."""
    found = span.attributes.get("gen_ai.response.id")
    if isinstance(found, str):
        return found
    output = span.attributes.get("output.value")  # OpenInference: the response object as JSON
    if isinstance(output, str) and output.startswith("{"):
        with contextlib.suppress(ValueError):
            decoded = json.loads(output)
            if isinstance(decoded, dict) and isinstance(decoded.get("id"), str):
                return str(decoded["id"])
    return None


def _held(
    span: SpanRecord,
    answered_by: Mapping[str, tuple[int, str | None]],
    views: Mapping[int, ServedView],
) -> tuple[tuple[HeldCall, ...], str | None]:
    """The earlier calls of this run whose requests and answers the server held for this one,
    oldest first, followed back response by response; and where that record ends: a tell-tale
    the oldest one shows, or None (it holds the history from its start, or the oldest is a
    response no call on record got)."""
    value = span.attributes.get(names.HELD_HISTORY)
    if not isinstance(value, str) or not value or " " in value:  # none, or a tell-tale
        return (), None
    chain: list[HeldCall] = []
    held: str | None = value
    # A response id answered twice, or a loop in a corrupt record, cannot send this round forever.
    while held is not None and " " not in held and len(chain) <= len(answered_by):
        found = answered_by.get(held)
        if found is None:
            chain.append(HeldCall(held))
            held = None
            break
        epoch, continued = found
        view = views.get(epoch)
        chain.append(
            HeldCall(
                held,
                epoch,
                len(view.messages) if view is not None and view.messages is not None else None,
                view.gap_kinds if view is not None else (),
                view.minted if view is not None else False,
            )
        )
        held = continued
    return tuple(reversed(chain)), held


def _held_detail(span: SpanRecord, held: Sequence[HeldCall], end: str | None) -> str:
    """What the record says of the history a call continues: the earlier calls of this run that
    hold it, followed back response by response, and where the record of it ends."""
    value = span.attributes.get(names.HELD_HISTORY)
    if not isinstance(value, str) or not value:
        return "the writer found history this request does not carry"
    if " " in value:  # a tell-tale, not an id
        return f"history not on record: {value}; the earlier response id is not recorded"
    linked = [h for h in held if h.epoch is not None]
    if not linked:
        return f"continues {value}, which is not in this run's record"
    epochs = ", ".join(str(h.epoch) for h in linked)
    if held[0].epoch is None:
        rest = f"before those, {held[0].response_id} is not in this run's record"
    elif end is not None:
        rest = f"before those, {end}"
    else:
        rest = "this run holds it from its start"
    return (
        f"continues {value}, the response of epoch {linked[-1].epoch} of this run: the server "
        f"held the requests and answers of epochs {epochs}, in that order; {rest}"
    )


def _run_views(
    run: Run,
    shared: dict[int, ServedView] | None = None,
    folded: Mapping[FoldKey, tuple[SameCall, ...]] | None = None,
    end: RunEnd | None = None,
) -> list[ServedView]:
    fold = run.fold
    base_messages: Sequence[Any] | None = None
    if run.base_address is not None and run.base_problem is None:
        loaded = fold.value_at("messages", 0)
        if isinstance(loaded, tuple | ChainedTuple):
            base_messages = loaded
        elif loaded is not UNKNOWN:  # a damaged base's messages are not on record
            base_messages = ()
    context = RunContext(run.run_id, base_messages, shared)
    params_memo: dict[int, tuple[Any, FrozenDict]] = {}
    # Per epoch: its messages and the positions of sealed reasoning in them, found by scanning
    # only what the epoch added to its parent's list.
    scans: dict[int, tuple[Sequence[Any], tuple[int, ...]]] = {}
    views: list[ServedView] = []

    def values_of(
        record: EpochRecord, own_fold: bool, receipt: Receipt | MalformedReceipt | None
    ) -> dict[str, Any]:
        if own_fold:
            values = {key: fold.value_at(key, record.epoch) for key in REQUEST_KEYS}
        else:
            # A second span claiming an epoch number: its commits on the claimed parent's state.
            known = record.basis == 0 or (
                record.basis in run.epochs and record.basis < record.epoch
            )
            at = record.basis if known else 0
            values = {key: fold.value_at(key, at) for key in REQUEST_KEYS}
            for commit in record.commits:
                if commit.key in values:
                    values[commit.key] = apply_verb(commit.verb, values[commit.key], commit.value)
        usable = isinstance(receipt, MalformedReceipt) or (
            isinstance(receipt, Receipt) and receipt.minted
        )
        if not record.commits and not usable:
            # No receipt and no changes: the writer had no request for this call, so the
            # parent's state says nothing about it.
            values = dict.fromkeys(REQUEST_KEYS, UNKNOWN)
        return values

    def scan(epoch: int, parent: int, messages: Sequence[Any] | None) -> bool:
        if messages is None:
            return False
        before = scans.get(parent) if parent else None
        extends = fold.extends_parent("messages", epoch)
        shared = context.shared_prefix(messages, before[0], extends=extends) if before else 0
        kept = tuple(i for i in before[1] if i < shared) if before else ()
        added = tuple(
            i for i, message in enumerate(messages[shared:], shared) if sealed_reasoning(message)
        )
        scans[epoch] = (messages, kept + added)
        return bool(kept or added)

    claimants = [(run.epochs[e], True) for e in sorted(run.epochs)]
    claimants += [(record, False) for record in run.others]
    # Response id -> (the epoch that got it, what that call itself continued).
    answered_by: dict[str, tuple[int, str | None]] = {}
    for record, own in claimants:
        answer = _response_id(record.span) if own else None
        if answer is not None:
            continued = record.span.attributes.get(names.HELD_HISTORY)
            held = continued if isinstance(continued, str) and continued else None
            answered_by.setdefault(answer, (record.epoch, held))
    for record, own in claimants:
        span = record.span
        receipt = Receipt.from_attributes(span.attributes)
        values = values_of(record, own, receipt)
        messages = _items(values["messages"])
        tools = _items(values["tools"])
        params = _params(values["params"], params_memo)
        if own:
            sealed = scan(record.epoch, run.fold_parents.get(record.epoch, 0), messages)
        else:
            sealed = messages is not None and sealed_messages(messages)
        found: list[Gap] = []
        if run.base_problem is not None:
            found.append(gap(names.GAP_NO_FOLD_BASE, run.base_problem))
        if not own:
            found.append(
                gap(names.GAP_NO_RUN_LOG, f"another span also claims epoch {record.epoch}")
            )
        elif record.epoch in run.broken:
            found.append(gap(names.GAP_NO_RUN_LOG, run.broken[record.epoch]))
        if record.cut:
            found.append(gap(names.GAP_SPAN_LIMITS, "; ".join(record.cut)))
        place = (record.lane, _writer_epoch(record) or 0)
        if own and end is not None and place in end.marked:
            found.append(gap(names.GAP_RUN_CUT_AT_END, end.detail))
        unrecorded = _unrecorded(span)
        holding = _held(span, answered_by, context.views)
        found += _common_gaps(span, receipt, values, params, tools, sealed, unrecorded, holding)
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
            same_call=_same_call(folded, span),
            held=holding[0],
            damaged=record.damage,
            run_end=end,
            closed_with=end.named.get(place) if end is not None and own else None,
        )
        if own:
            context.views[record.epoch] = view
        views.append(view)
    return views


# Who wrote a message: a model turn is a run of these, one call's answer.
_MODEL_ROLES: Final = frozenset({"assistant", "model"})


def _tool_result(message: Mapping[str, Any]) -> bool:
    """A message that only hands tool results back (role ``tool``, or Anthropic's user turn of
    tool results): it continues the model's turn, it is no new input."""
    if message.get("role") == "tool":
        return True
    parts = message.get("parts", ())
    return bool(parts) and all(p.get("type") == "tool_call_response" for p in parts)


def model_turns(messages: Sequence[Mapping[str, Any]], start: int = 0) -> list[int]:
    """Where each model turn among ``messages[start:]`` begins: a model message after new input
    (a user, system or developer message; tool results continue the turn they answer).

    A tool loop's answer after its tool results counts with the call it answers, so a call that
    answered tool results and left no span is not told apart from its parent's answer; a turn
    after new input is."""
    starts: list[int] = []
    fresh = True
    # One slice, not an index per message: a fold's list is a chain that an index walks down.
    for index, message in enumerate(messages[start:], start):
        if message.get("role") in _MODEL_ROLES:
            if fresh:
                starts.append(index)
            fresh = False
        elif not _tool_result(message):
            fresh = True
    return starts


def _unrecorded_calls(views: list[ServedView]) -> list[ServedView]:
    """The views of one run, each whose history shows a model answer no call on record gave
    marked `unrecorded-call`: since its parent it appended two model turns or more (the
    parent's answer is one), and no other call of the run was served the history before the
    extra one (as many turns and the same last message: a call whose earlier turns were edited,
    or whose instructions were recorded apart from its messages, counts), nor, beside it, that
    history and then input of its own (a fan-out the application merged)."""

    def last(messages: Sequence[Any], end: int) -> bytes | None:
        # By content, not by `==` on a dict hashed over its keys: one encoding of one message a
        # view, and the counts compared only for the few calls that end alike.
        try:
            return canonical_json(messages[end - 1])
        except CanonicalJSONError:
            return None

    def said(messages: Sequence[Any], end: int) -> list[Any]:
        # Instructions are not counted when two calls' histories are matched: some conventions
        # record them as a message, others beside the messages.
        return [m for m in messages[:end] if m.get("role") not in INSTRUCTION_ROLES]

    served: dict[bytes | None, list[Sequence[Any]]] = {}
    beside: dict[int, list[ServedView]] = {}
    for view in views:
        if view.messages:
            served.setdefault(last(view.messages, len(view.messages)), []).append(view.messages)
            beside.setdefault(view.parent, []).append(view)

    def on_record(view: ServedView, messages: Sequence[Any], at: int) -> bool:
        found = last(messages, at)
        if found is None:  # unreadable here: cannot tell, so no gap is claimed
            return True
        count = len(said(messages, at))
        if any(
            other is not messages and len(said(other, len(other))) == count
            for other in served.get(found, ())
        ):
            return True
        # A fan-out: calls beside this one were served that history and then input of their
        # own; the application may have merged their answers into the turn.
        before = said(messages, at)
        for other in beside.get(view.parent, ()):
            if other is view or other.messages is None:
                continue
            theirs = said(other.messages, len(other.messages))
            diverges = len(theirs) > len(before) and theirs[len(before)] != messages[at]
            if diverges and theirs[: len(before)] == before:
                return True
        return False

    out = []
    for view in views:
        parent = view.parent_view
        messages = view.messages
        if parent is None or parent.messages is None or messages is None:
            out.append(view)
            continue
        # Only a request that carries all of its parent's: otherwise what it appended is not
        # "since the parent" (a call beside it, history edited, or held by the server).
        shared = view.context.shared_prefix(messages, parent.messages)
        if shared < len(parent.messages):
            out.append(view)
            continue
        extra = [
            at for at in model_turns(messages, shared)[1:] if not on_record(view, messages, at)
        ]
        if not extra:
            out.append(view)
            continue
        where = ", ".join(f"#{at}" for at in extra)
        found = gap(
            names.GAP_UNRECORDED_CALL,
            f"since epoch {parent.epoch} ({len(parent.messages)} messages) this request appends "
            f"{len(messages) - shared} with a model turn more than that call's answer at "
            f"{where}; no call on record was served the messages before it",
        )
        marked = replace(view, gaps=order_gaps((*view.gaps, found)))
        if view.context.views.get(view.epoch) is view:
            view.context.views[view.epoch] = marked
        out.append(marked)
    return out


def _same_call(
    folded: Mapping[FoldKey, tuple[SameCall, ...]] | None, span: SpanRecord
) -> tuple[SameCall, ...]:
    """The spans folded into this one's epoch as its writer numbered it (its lane's epoch)."""
    if not folded:
        return ()
    key = fold_key(span.attributes, span.attributes.get(names.EPOCH))
    return folded.get(key, ()) if key is not None else ()


def _loose_view(span: SpanRecord) -> ServedView:
    """An LLM-call span that names no run or no epoch: nothing of its request is on record."""
    receipt = Receipt.from_attributes(span.attributes)
    values = dict.fromkeys(REQUEST_KEYS, UNKNOWN)
    found = [gap(names.GAP_NO_RUN_LOG, "the span names no run or no epoch")]
    cut = []
    if span.dropped_attributes_count or span.dropped_events_count:
        cut.append("the span reports dropped attributes or events")
        found.append(gap(names.GAP_SPAN_LIMITS, cut[0]))
    unrecorded = _unrecorded(span)
    found += _common_gaps(span, receipt, values, None, None, False, unrecorded)
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
