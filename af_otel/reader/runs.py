"""Runs and epochs: LLM-call spans grouped by ``af.run.id``, their commits decoded, their log checked.

This is where the record's holes are found (a missing parent span, a skipped ``af.commit.seq``, a
payload the store cannot give back, a base that does not load) and turned into reasons that the
view later reports as gaps; nothing here raises for bad data. Commit payloads are normalized per key
as they are decoded (a message once, not once per epoch that shows it), so the fold's answers are
already the normalized request's parts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

import orjson

from af_otel import names
from af_otel.errors import AfOtelError
from af_otel.model.request import normalize_message, normalize_part, normalize_tool
from af_otel.reader.fold import UNKNOWN, Commit, KeyedFold, Verb, freeze
from af_otel.reader.records import AttrValue, SpanRecord
from af_otel.store import Store

__all__ = [
    "BACKEND_LIMITS",
    "EMPTY_STATE",
    "EpochRecord",
    "Run",
    "group_runs",
    "is_llm_call",
    "normalize_value",
]

# What a run without a base starts from: the writer diffs its first call against exactly this.
EMPTY_STATE: Final[Mapping[str, Any]] = MappingProxyType({"messages": ()})
# Attribute sizes at which trace backends cut values by default (Tempo: 2,048 bytes). A value
# that stops exactly there was probably cut, even when nothing else says so.
BACKEND_LIMITS: Final = frozenset({2048})
_ITEMS: Final = {"system": normalize_part, "messages": normalize_message, "tools": normalize_tool}
_VERBS: Final = {verb.value: verb for verb in Verb}


@dataclass(frozen=True, slots=True)
class EpochRecord:
    """One LLM-call span of a run: its place, its own commits, and what is wrong with its record.

    ``problems`` say why this span's own changes are incomplete; ``cut`` names values that were
    cut at the source or by a backend."""

    epoch: int
    parent: int
    span: SpanRecord
    commits: tuple[Commit, ...] = ()
    problems: tuple[str, ...] = ()
    cut: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return self.span.origin or f"span {self.span.span_id}"


@dataclass(frozen=True, slots=True)
class Run:
    """One run: its base, the span that holds each epoch, and the keyed fold over them.

    ``epochs`` holds the first span claiming each epoch number (by start time); ``others`` any
    later claimants. ``broken`` maps each epoch whose path from the base has an incomplete record
    to the first reason found; ``fold_parents`` is the tree the fold walks (a parent whose span is
    missing reads as the base there, under a ``no-run-log`` gap)."""

    run_id: str
    base_address: str | None
    base_problem: str | None
    epochs: Mapping[int, EpochRecord]
    others: tuple[EpochRecord, ...]
    broken: Mapping[int, str]
    fold: KeyedFold
    fold_parents: Mapping[int, int] = field(default_factory=dict)


def is_llm_call(span: SpanRecord) -> bool:
    """A span af_otel enriched: it carries a run, an epoch, a receipt attribute or a commit."""
    attrs = span.attributes
    if names.RUN_ID in attrs or names.EPOCH in attrs or names.RECEIPT_STATE in attrs:
        return True
    if any(key.startswith("af.receipt.") for key in attrs):
        return True
    return any(event.name == names.COMMIT_EVENT for event in span.events)


def normalize_value(key: str, value: Any, where: str) -> Any:
    """A frozen payload or base value in the normalized request's form for ``key``.

    Lists of system parts, messages and tools are normalized item by item (so an ``append``
    payload can be); other keys stay as written (``params`` is normalized once merged). Raises
    `AfOtelError` (a `RequestShapeError`) naming ``where`` for a value of the wrong shape."""
    if value is UNKNOWN:
        return value
    if key in ("model", "provider") and not isinstance(value, str):
        raise _Bad(f"{where}: {key} must be a string, got {type(value).__name__}")
    if key == "params" and not isinstance(value, dict):
        raise _Bad(f"{where}: params must be an object, got {type(value).__name__}")
    item = _ITEMS.get(key)
    if item is None:
        return freeze(value)
    if not isinstance(value, list | tuple):
        raise _Bad(f"{where}: {key} must be a list, got {type(value).__name__}")
    # Normalize the decoded items, then freeze what normalizing left open (tool arguments,
    # schemas): one pass over each message, not a copy before and another after.
    return tuple(freeze(item(v, f"{where}: {key}[{i}]")) for i, v in enumerate(value))


class _Bad(Exception):
    pass


def _int(value: AttrValue | None) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


_LOW: Final = min(BACKEND_LIMITS) - 3
_HIGH: Final = max(BACKEND_LIMITS) + 2


def _at_limit(value: str) -> bool:
    """A value that stops at a backend limit: exactly there, or a character cut in two there
    (which decoders turn into U+FFFD)."""
    size = len(value.encode("utf-8"))
    if size in BACKEND_LIMITS:
        return True
    return value.endswith("\ufffd") and any(
        limit - 3 <= size <= limit + 2 for limit in BACKEND_LIMITS
    )


def _span_cut(span: SpanRecord) -> list[str]:
    cut: list[str] = []
    if span.dropped_attributes_count:
        cut.append(f"{span.dropped_attributes_count} attribute(s) dropped")
    if span.dropped_events_count:
        cut.append(f"{span.dropped_events_count} event(s) dropped")
    dropped_in_events = sum(e.dropped_attributes_count for e in span.events)
    if dropped_in_events:
        cut.append(f"{dropped_in_events} event attribute(s) dropped")
    for owner, attrs in [("", span.attributes)] + [
        (f"event {e.name} ", e.attributes) for e in span.events
    ]:
        for key, value in attrs.items():
            # UTF-8 holds 1 to 4 bytes a character: most strings are ruled out by length alone.
            if (
                isinstance(value, str)
                and 4 * len(value) >= _LOW
                and len(value) <= _HIGH
                and _at_limit(value)
            ):
                cut.append(f"{owner}{key} stops at {len(value.encode('utf-8'))} bytes")
    return cut


def _decode_commit(attrs: Mapping[str, AttrValue], store: Store | None, where: str) -> Commit:
    seq = _int(attrs.get(names.COMMIT_SEQ))
    if seq is None or seq < 1:
        raise _Bad(f"{where}: a commit without a valid {names.COMMIT_SEQ}")
    key = attrs.get(names.COMMIT_KEY)
    if not isinstance(key, str) or not key:
        raise _Bad(f"{where}: commit {seq} has no {names.COMMIT_KEY}")
    raw_verb = attrs.get(names.COMMIT_VERB)
    verb = _VERBS.get(raw_verb) if isinstance(raw_verb, str) else None
    if verb is None:
        raise _Bad(f"{where}: commit {seq} has unknown verb {raw_verb!r}")
    if verb is Verb.DELETE:
        return Commit(seq, key, verb)
    value = attrs.get(names.COMMIT_VALUE)
    ref = attrs.get(names.COMMIT_REF)
    size = _int(attrs.get(names.COMMIT_BYTES))
    payload: Any
    if isinstance(value, str):
        written = len(value.encode("utf-8"))
        if size is not None and written < size:
            raise _Bad(f"{where}: commit {seq} value was cut ({written} of {size} bytes)")
        try:
            payload = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise _Bad(f"{where}: commit {seq} value is not JSON ({exc})") from None
    elif isinstance(ref, str):
        if store is None:
            raise _Bad(f"{where}: commit {seq} is stored at {ref} and no store was given")
        try:
            payload = store.get_json(ref)
        except AfOtelError as exc:
            raise _Bad(f"{where}: commit {seq} payload {ref}: {exc}") from None
    else:
        # Neither value nor ref: the writer withheld the content on purpose (or its store failed).
        payload = UNKNOWN
    try:
        payload = normalize_value(key, payload, f"{where}: commit {seq}")
        return Commit(seq, key, verb, payload)
    except (AfOtelError, ValueError) as exc:
        raise _Bad(str(exc)) from None


def _load_base(address: str, store: Store | None) -> tuple[Mapping[str, Any], str | None]:
    if store is None:
        return EMPTY_STATE, f"base {address}: no store was given"
    try:
        raw = store.get_json(address)
    except AfOtelError as exc:
        return EMPTY_STATE, f"base {address}: {exc}"
    if not isinstance(raw, dict):
        return EMPTY_STATE, f"base {address} is not a JSON object"
    try:
        state = {k: normalize_value(k, v, f"base {address}") for k, v in raw.items()}
    except (_Bad, AfOtelError) as exc:
        return EMPTY_STATE, str(exc)
    state.setdefault("messages", ())
    return MappingProxyType(state), None


def _read_epoch(span: SpanRecord, store: Store | None) -> EpochRecord | None:
    attrs = span.attributes
    where = span.origin or f"span {span.span_id}"
    epoch = _int(attrs.get(names.EPOCH))
    if epoch is None or epoch < 1:
        return None
    problems: list[str] = []
    parent = _int(attrs.get(names.EPOCH_PARENT))
    if parent is None or parent < 0 or parent >= epoch:
        problems.append(f"{where}: epoch {epoch} names parent {attrs.get(names.EPOCH_PARENT)!r}")
        parent = 0 if parent is None or parent < 0 else parent
    commits: list[Commit] = []
    for event in span.events:
        if event.name != names.COMMIT_EVENT:
            continue
        try:
            commits.append(_decode_commit(event.attributes, store, where))
        except _Bad as bad:
            problems.append(str(bad))
    commits.sort(key=lambda c: c.seq)
    if span.dropped_events_count:
        problems.append(f"{where}: {span.dropped_events_count} event(s) dropped at the source")
    return EpochRecord(epoch, parent, span, tuple(commits), tuple(problems), tuple(_span_cut(span)))


def _seq_problems(records: Sequence[EpochRecord]) -> dict[int, list[str]]:
    """Problems per record index from the run-wide numbering: holes and numbers used twice.

    The writer numbers one call's commits together when the call ends, so the commits missing in
    a hole belong to a call whose span is missing, to the call holding the number just below, or
    to the one holding the number just above. A run with an epoch number missing blames the
    missing span (its children find it); otherwise a neighbour that reports dropped events is
    blamed, else both neighbours (either may have lost it, and neither can be cleared)."""
    owners: dict[int, list[int]] = {}
    for index, record in enumerate(records):
        for commit in record.commits:
            owners.setdefault(commit.seq, []).append(index)
    out: dict[int, list[str]] = {}
    for seq, holders in owners.items():
        if len(holders) > 1:
            for index in set(holders):
                out.setdefault(index, []).append(f"commit seq {seq} appears more than once")
    if not owners:
        return out
    numbers = {r.epoch for r in records}
    spans_missing = len(numbers) < max(numbers)
    ranges = [
        (min(c.seq for c in r.commits), max(c.seq for c in r.commits)) if r.commits else None
        for r in records
    ]
    previous = 0
    for seq in sorted(owners):
        if seq > previous + 1:
            low, high = previous + 1, seq - 1
            text = f"commit seq {low}" if low == high else f"commit seqs {low}-{high}"
            blamed = set(owners.get(previous, ())) | set(owners[seq])
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


def _one_run(run_id: str, spans: Sequence[SpanRecord], store: Store | None) -> Run:
    records: list[EpochRecord] = []
    for span in sorted(spans, key=lambda s: (s.start_ns, s.span_id)):
        record = _read_epoch(span, store)
        if record is not None:
            records.append(record)
    for index, extra in _seq_problems(records).items():
        r = records[index]
        records[index] = EpochRecord(
            r.epoch, r.parent, r.span, r.commits, (*r.problems, *extra), r.cut
        )
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
    if len(addresses) > 1:
        base_problem = f"the run's spans name {len(addresses)} different bases"
        base_address = sorted(addresses)[0]
    elif addresses:
        base_address = next(iter(addresses))
        base, base_problem = _load_base(base_address, store)
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
    )


def group_runs(
    spans: Iterable[SpanRecord], store: Store | None
) -> tuple[tuple[Run, ...], tuple[SpanRecord, ...]]:
    """The runs among ``spans`` (in order of their first call) and the LLM-call spans that name
    no run or no epoch. Spans that are not LLM calls are ignored; a span read twice counts once."""
    seen: dict[tuple[str, str], SpanRecord] = {}
    by_run: dict[str, list[SpanRecord]] = {}
    loose: list[SpanRecord] = []
    for span in spans:
        if not is_llm_call(span):
            continue
        ident = (span.trace_id, span.span_id)
        if ident in seen and seen[ident] == span:
            continue
        seen.setdefault(ident, span)
        run_id = span.attributes.get(names.RUN_ID)
        epoch = _int(span.attributes.get(names.EPOCH))
        if isinstance(run_id, str) and run_id and epoch is not None and epoch >= 1:
            by_run.setdefault(run_id, []).append(span)
        else:
            loose.append(span)
    runs = [_one_run(run_id, members, store) for run_id, members in by_run.items()]
    runs.sort(key=lambda r: min((e.span.start_ns for e in r.epochs.values()), default=0))
    loose.sort(key=lambda s: (s.start_ns, s.span_id))
    return tuple(runs), tuple(loose)
