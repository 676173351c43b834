"""Runs and epochs: LLM-call spans grouped by ``af.run.id``, their records read, their log checked.

This is where the record's holes are found (a missing parent span, a skipped ``af.commit.seq``, a
payload the store cannot give back, a base that does not load) and turned into reasons that the
view later reports as gaps; nothing here raises for bad data. Each span's own record is read by
`af_otel.reader.epochs`.

A run several writers served (processes, or one that freed the run and served it again) comes in
lanes (``af.epoch.lane``): each lane is checked and folded on its own, the run is numbered by start
time, and `link_by_content` (`af_otel.reader.lanes`) joins the lanes into one tree by the longest
message prefix, naming a gap wherever the record cannot prove a link.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from af_otel import names
from af_otel.model.request import REQUEST_KEYS
from af_otel.reader.blobs import WHOLE_BASE, BlobDamage, Blobs, held_open
from af_otel.reader.epochs import (
    BACKEND_LIMITS,
    EMPTY_STATE,
    int_of,
    load_base,
    normalize_value,
    read_epoch,
)
from af_otel.reader.fold import KeyedFold
from af_otel.reader.lanes import link_by_content
from af_otel.reader.records import SpanRecord
from af_otel.reader.run_log import EpochRecord, Run
from af_otel.store import Store

__all__ = [
    "BACKEND_LIMITS",
    "EMPTY_STATE",
    "EpochRecord",
    "Run",
    "group_runs",
    "is_enriched_call",
    "normalize_value",
]


def is_enriched_call(span: SpanRecord) -> bool:
    """A call span af_otel enriched: it carries a run, an epoch, a receipt attribute or a commit.
    A run's close record (`af_otel.reader.closes`) is not a call. (Whether a span records an LLM
    call by its instrumentation's convention is `af_otel.semconv.is_llm_call`, the writer's
    question; the reader reads only what af_otel wrote.)"""
    attrs = span.attributes
    if span.name == names.RUN_CLOSE and names.EPOCH not in attrs:
        return False
    if names.RUN_ID in attrs or names.EPOCH in attrs or names.RECEIPT_STATE in attrs:
        return True
    if any(key.startswith("af.receipt.") for key in attrs):
        return True
    return any(event.name == names.COMMIT_EVENT for event in span.events)


def _seq_problems(records: Sequence[EpochRecord]) -> dict[int, list[str]]:
    """Problems per record index from the run-wide numbering: holes and numbers used twice.

    The writer numbers one call's commits together when the call ends, so the commits missing in
    a hole belong to a call whose span is missing, to the call holding the number just below, or
    to the one holding the number just above. A run with an epoch number missing blames the
    missing span (its children find it); otherwise a neighbour that reports dropped events is
    blamed, else both neighbours (either may have lost it, and neither can be cleared)."""
    # The record holding each number, and every record holding a number held more than once
    # (one number a commit: no list per number, a run's record holds thousands).
    first: dict[int, int] = {}
    again: dict[int, set[int]] = {}
    for index, record in enumerate(records):
        last = None
        for commit in record.commits:  # in seq order
            held = first.setdefault(commit.seq, index)
            if held != index or commit.seq == last:
                again.setdefault(commit.seq, {held}).add(index)
            last = commit.seq
    out: dict[int, list[str]] = {}
    for seq in first:
        for index in again.get(seq, ()):
            out.setdefault(index, []).append(f"commit seq {seq} appears more than once")
    if not first:
        return out

    def holders(seq: int) -> set[int]:
        if seq in again:
            return set(again[seq])
        return {first[seq]} if seq in first else set()

    numbers = {r.epoch for r in records}
    spans_missing = len(numbers) < max(numbers)
    ranges = [
        (min(c.seq for c in r.commits), max(c.seq for c in r.commits)) if r.commits else None
        for r in records
    ]
    previous = 0
    for seq in sorted(first):
        if seq > previous + 1:
            low, high = previous + 1, seq - 1
            text = f"commit seq {low}" if low == high else f"commit seqs {low}-{high}"
            blamed = holders(previous) | holders(seq)
            blamed |= {i for i, r in enumerate(ranges) if r and r[0] < low and r[1] > high}
            # A span that reports dropped events and holds none of the numbers nearby is a
            # suspect too: it may have lost all of its commits.
            dropping = {
                i
                for i, r in enumerate(records)
                if r.span.dropped_events_count and (i in blamed or not r.commits)
            }
            if dropping:
                blamed = dropping
            elif spans_missing:
                blamed = set()
            for index in blamed:
                out.setdefault(index, []).append(f"{text} missing from the run's record")
        previous = seq
    return out


def _one_run(
    run_id: str,
    spans: Sequence[SpanRecord],
    store: Store | None,
    cache: Blobs,
    numbers: Mapping[int, int] | None = None,
) -> Run:
    """One lane's log (every span of a run one writer served). ``numbers`` maps the lane's own
    epoch numbers to the run's when the run has several lanes; the checks below use the lane's."""
    records: list[EpochRecord] = []
    for span in sorted(spans, key=lambda s: (s.start_ns, s.span_id)):
        record = read_epoch(span, store, cache)
        if record is not None:
            records.append(record)
    for index, extra in _seq_problems(records).items():
        records[index] = replace(records[index], problems=(*records[index].problems, *extra))
    epochs: dict[int, EpochRecord] = {}
    others: list[EpochRecord] = []
    claimed: dict[int, int] = {}
    for record in records:
        claimed[record.epoch] = claimed.get(record.epoch, 0) + 1
        if record.epoch in epochs:
            others.append(record)
        else:
            epochs[record.epoch] = record
    # Base: every span of a run that has one names it; spans that disagree make it unknown.
    addresses = {
        value
        for span in spans
        if isinstance(value := span.attributes.get(names.RUN_BASE), str) and value
    }
    base_address: str | None = None
    base_problem: str | None = None
    base: Mapping[str, Any] = EMPTY_STATE
    base_damage: tuple[BlobDamage, ...] = ()
    if len(addresses) > 1:
        base_problem = f"the run's spans name {len(addresses)} different bases"
        base_address = sorted(addresses)[0]
    elif addresses:
        base_address = next(iter(addresses))
        base, base_problem, base_damage = load_base(base_address, store, cache)
    broken: dict[int, str] = {}
    fold_parents: dict[int, int] = {}
    for epoch in sorted(epochs):
        record = epochs[epoch]
        parent = record.parent if record.parent < epoch else 0
        reason: str | None = None
        if claimed[epoch] > 1:
            reason = f"{claimed[epoch]} spans claim epoch {epoch} of run {run_id}"
        elif record.problems:
            reason = record.problems[0]
        if parent and parent not in epochs:
            reason = reason or f"the span of epoch {parent}, this call's parent, is missing"
            parent = 0
        elif parent and parent in broken:
            reason = reason or f"epoch {parent}, on this call's path: {broken[parent]}"
        fold_parents[epoch] = parent
        if reason is not None:
            broken[epoch] = reason
    epochs, others = _damage_along(epochs, others, fold_parents, base_damage)
    lane = records[0].lane if records else ""
    if numbers is not None:
        epochs, others, broken, fold_parents = _renumber(
            epochs, others, broken, fold_parents, numbers, lane
        )
    fold = KeyedFold(base, fold_parents, {e: r.commits for e, r in epochs.items()})
    return Run(
        run_id,
        base_address,
        base_problem,
        MappingProxyType(epochs),
        tuple(others),
        MappingProxyType(broken),
        fold,
        MappingProxyType(fold_parents),
        lane,
    )


Taint = Mapping[str, tuple[BlobDamage, ...]]  # request key -> the damaged blobs its value rests on


def _tainted(start: Taint, record: EpochRecord) -> dict[str, tuple[BlobDamage, ...]]:
    """Which damaged blobs each key's value rests on after ``record``'s commits: a damaged payload
    taints its key (an ``append`` adds to what the key rested on, a ``set`` replaces it), and a
    whole-value write from an intact payload clears it."""
    keys = dict(start)
    own = [(commit, damage) for commit, damage in record.own_damage]
    for commit in record.commits:
        damage = next((d for c, d in own if c is commit), None)
        if damage is not None:
            before = keys.get(commit.key, ()) if commit.verb == "append" else ()
            keys[commit.key] = (*before, damage)
        elif commit.anchors:
            keys.pop(commit.key, None)
    return keys


def _damage_along(
    epochs: Mapping[int, EpochRecord],
    others: Sequence[EpochRecord],
    fold_parents: Mapping[int, int],
    base_damage: Sequence[BlobDamage],
) -> tuple[dict[int, EpochRecord], list[EpochRecord]]:
    """Each record with the damaged blobs its view depends on: those under any request key's
    value at its epoch (the base's, then each damaged payload on its path until a whole-value
    write replaces the key), and those under the messages of the state its receipt's
    ``messages.kept`` is checked against (its parent's, or the base's)."""
    start: dict[str, tuple[BlobDamage, ...]] = {}
    for damage in base_damage:
        for key in REQUEST_KEYS if damage.field == WHOLE_BASE else (damage.field,):
            start[key] = (*start.get(key, ()), damage)
    taint: dict[int, Taint] = {0: start}

    def marked(record: EpochRecord, basis: int) -> EpochRecord:
        keys = _tainted(taint.get(basis, start), record)
        found = [d for key in REQUEST_KEYS for d in keys.get(key, ())]
        found += taint.get(basis, start).get("messages", ())
        if record.epoch in epochs and epochs[record.epoch] is record:
            taint[record.epoch] = keys
        unique = tuple(dict.fromkeys(found))
        return replace(record, damage=unique) if unique or record.damage else record

    out = {epoch: marked(epochs[epoch], fold_parents[epoch]) for epoch in sorted(epochs)}
    rest = [marked(r, r.basis if r.basis in epochs and r.basis < r.epoch else 0) for r in others]
    return out, rest


def _renumber(
    epochs: Mapping[int, EpochRecord],
    others: Sequence[EpochRecord],
    broken: Mapping[int, str],
    fold_parents: Mapping[int, int],
    numbers: Mapping[int, int],
    lane: str,
) -> tuple[dict[int, EpochRecord], list[EpochRecord], dict[int, str], dict[int, int]]:
    """A lane's log in the run's numbers. A parent that started after its child (possible only
    with clocks the spans do not agree on) cannot be folded onto, and says so."""
    new_broken = {numbers[e]: why for e, why in broken.items()}
    new_parents: dict[int, int] = {}
    for epoch, parent in fold_parents.items():
        mine, theirs = numbers[epoch], numbers[parent] if parent else 0
        if theirs >= mine:
            new_broken.setdefault(
                mine, f"epoch {parent} of lane {lane}, this call's parent, started after it"
            )
            theirs = 0
        new_parents[mine] = theirs

    def moved(record: EpochRecord, basis: int) -> EpochRecord:
        return replace(record, epoch=numbers[record.epoch], parent=basis, basis=basis)

    new_epochs = {numbers[e]: moved(r, new_parents[numbers[e]]) for e, r in epochs.items()}
    new_others = [moved(r, numbers.get(r.basis, -1) if r.basis else 0) for r in others]
    return new_epochs, new_others, new_broken, new_parents


def _lane_of(span: SpanRecord) -> str:
    lane = span.attributes.get(names.EPOCH_LANE)
    return lane if isinstance(lane, str) else ""


def _run_lanes(
    run_id: str, spans: Sequence[SpanRecord], store: Store | None, cache: Blobs
) -> list[Run]:
    """A run's lanes: one `Run` when one writer served it (its numbers as written), else one per
    lane in the run's numbering (by start time), linked into one tree by content."""
    lanes: dict[str, list[SpanRecord]] = {}
    for span in spans:
        lanes.setdefault(_lane_of(span), []).append(span)
    if len(lanes) == 1:
        return [_one_run(run_id, spans, store, cache)]
    # The run's numbering: each (lane, epoch) gets the rank of its first span by start time.
    numbers: dict[str, dict[int, int]] = {lane: {} for lane in lanes}
    ranked = sorted(
        spans,
        key=lambda s: (
            s.start_ns,
            _lane_of(s),
            int_of(s.attributes.get(names.EPOCH)) or 0,
            s.span_id,
        ),
    )
    for span in ranked:
        epoch = int_of(span.attributes.get(names.EPOCH))
        own = numbers[_lane_of(span)]
        if epoch is not None and epoch not in own:
            own[epoch] = sum(len(n) for n in numbers.values()) + 1
    out = [
        _one_run(run_id, members, store, cache, numbers[lane]) for lane, members in lanes.items()
    ]
    out.sort(key=lambda r: min((e.span.start_ns for e in r.epochs.values()), default=0))
    return link_by_content(out, numbers)


def group_runs(
    spans: Iterable[SpanRecord], store: Store | None
) -> tuple[tuple[Run, ...], tuple[SpanRecord, ...]]:
    """The runs among ``spans`` (in order of their first call) and the LLM-call spans that name
    no run or no epoch. Spans that are not LLM calls are ignored; a span read twice counts once.
    A run served by several writers comes as one `Run` per lane, consecutive."""
    seen: dict[tuple[str, str], SpanRecord] = {}
    by_run: dict[str, list[SpanRecord]] = {}
    loose: list[SpanRecord] = []
    for span in spans:
        if not is_enriched_call(span):
            continue
        ident = (span.trace_id, span.span_id)
        if ident in seen and seen[ident] == span:
            continue
        seen.setdefault(ident, span)
        run_id = span.attributes.get(names.RUN_ID)
        epoch = int_of(span.attributes.get(names.EPOCH))
        if isinstance(run_id, str) and run_id and epoch is not None and epoch >= 1:
            by_run.setdefault(run_id, []).append(span)
        else:
            loose.append(span)
    cache = Blobs()
    with held_open(store) as held:
        grouped = [_run_lanes(run_id, members, held, cache) for run_id, members in by_run.items()]
    grouped.sort(
        key=lambda lanes: min(
            (e.span.start_ns for r in lanes for e in r.epochs.values()), default=0
        )
    )
    loose.sort(key=lambda s: (s.start_ns, s.span_id))
    return tuple(run for lanes in grouped for run in lanes), tuple(loose)
