"""Runs and epochs: LLM-call spans grouped by ``af.run.id``, their commits decoded, their log checked.

This is where the record's holes are found (a missing parent span, a skipped ``af.commit.seq``, a
payload the store cannot give back, a base that does not load) and turned into reasons that the
view later reports as gaps; nothing here raises for bad data. Commit payloads are normalized per key
as they are decoded (a message once, not once per epoch that shows it), so the fold's answers are
already the normalized request's parts.

A run several writers served (processes, or one that freed the run and served it again) comes in
lanes (``af.epoch.lane``): each lane is checked and folded on its own, the run is numbered by start
time, and `link_by_content` joins the lanes into one tree by the longest message prefix, naming a
gap wherever the record cannot prove a link.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final

import orjson

from af_otel import names
from af_otel.canonical import canonical_json
from af_otel.errors import AfOtelError, BlobNotFoundError, InvalidAddressError
from af_otel.model import FrozenDict
from af_otel.model.request import (
    REQUEST_KEYS,
    each,
    fix_part,
    normalize_message,
    normalize_tool,
    read_part,
)
from af_otel.reader.blobs import WHOLE_BASE, BlobDamage, BlobKind, Blobs, DamagedBlob
from af_otel.reader.fold import UNKNOWN, ChainedTuple, Commit, KeyedFold, freeze
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


# The request model's normalizers, with what they leave open (tool arguments and results, schemas)
# frozen: a part as it is fixed, so a message is built once, not built and then rebuilt.
def _frozen_fix(body: Mapping[str, Any]) -> FrozenDict:
    return freeze(fix_part(body))  # type: ignore[no-any-return]


def _frozen_part(part: object, where: str) -> FrozenDict:
    return _frozen_fix(read_part(part, where))


def _frozen_message(message: object, where: str) -> FrozenDict:
    return normalize_message(message, where, _frozen_fix)


def _frozen_tool(tool: object, where: str) -> FrozenDict:
    return freeze(normalize_tool(tool, where))  # type: ignore[no-any-return]


_ITEMS: Final = {"system": _frozen_part, "messages": _frozen_message, "tools": _frozen_tool}
_VERBS: Final[Mapping[str, names.CommitVerb]] = {verb: verb for verb in names.COMMIT_VERBS}


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
    # The epoch this one's commits and ``messages.kept`` are relative to (the writer's
    # ``af.epoch.parent``, in the reader's numbers; -1 when that span is not on record). In a run
    # one writer served it is ``parent``; in a run served by several, ``parent`` is the call found
    # from content, which may be another writer's.
    basis: int = 0
    lane: str = ""
    # This span's commits whose stored payload is damaged (the commit holds `UNKNOWN`), and every
    # damaged blob this call's view and its check depend on (`_damage_along`), first found first.
    own_damage: tuple[tuple[Commit, BlobDamage], ...] = ()
    damage: tuple[BlobDamage, ...] = ()

    @property
    def where(self) -> str:
        return self.span.origin or f"span {self.span.span_id}"


@dataclass(frozen=True, slots=True)
class Run:
    """One run: its base, the span that holds each epoch, and the keyed fold over them.

    ``epochs`` holds the first span claiming each epoch number (by start time); ``others`` any
    later claimants. ``broken`` maps each epoch whose path from the base has an incomplete record
    to the first reason found; ``fold_parents`` is the tree the fold walks (a parent whose span is
    missing reads as the base there, under a ``no-run-log`` gap).

    A run served by several writers (``af.epoch.lane``) is one `Run` per lane, each with its own
    base, commits and fold, consecutive in `group_runs`' answer and sharing one numbering: the
    reader numbers the run's calls 1, 2, ... by start time, and each call's ``parent`` is the one
    found from content across the lanes (see `link_by_content`)."""

    run_id: str
    base_address: str | None
    base_problem: str | None
    epochs: Mapping[int, EpochRecord]
    others: tuple[EpochRecord, ...]
    broken: Mapping[int, str]
    fold: KeyedFold
    fold_parents: Mapping[int, int] = field(default_factory=dict)
    lane: str = ""


def is_llm_call(span: SpanRecord) -> bool:
    """A span af_otel enriched: it carries a run, an epoch, a receipt attribute or a commit. A
    run's close record (`af_otel.reader.closes`) is not a call."""
    attrs = span.attributes
    if span.name == names.RUN_CLOSE and names.EPOCH not in attrs:
        return False
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
    return tuple(each(value, f"{where}: {key}", item))


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
    for event, attrs in [(None, span.attributes)] + [(e, e.attributes) for e in span.events]:
        for key, value in attrs.items():
            # UTF-8 holds 1 to 4 bytes a character: most strings are ruled out by length alone.
            if (
                isinstance(value, str)
                and 4 * len(value) >= _LOW
                and len(value) <= _HIGH
                and _at_limit(value)
            ):
                owner = f"event {event.name} " if event is not None else ""
                cut.append(f"{owner}{key} stops at {len(value.encode('utf-8'))} bytes")
    return cut


def _decode_commit(
    attrs: Mapping[str, AttrValue], store: Store | None, where: str, cache: Blobs
) -> tuple[Commit, BlobDamage | None]:
    """One commit event, and the damage of the blob its payload is stored in, if any: a damaged
    payload is a commit whose value is not on record (`UNKNOWN`), with the damage named beside
    it. Raises `_Bad` for a commit that cannot be read (a gap), an absent payload included."""
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
    if verb == "delete":
        return Commit(seq, key, verb), None
    value = attrs.get(names.COMMIT_VALUE)
    ref = attrs.get(names.COMMIT_REF)
    size = _int(attrs.get(names.COMMIT_BYTES))
    payload: Any
    if isinstance(value, str):
        # UTF-8 takes at least a byte a character: only a value shorter than its size is measured.
        if (
            size is not None
            and len(value) < size
            and (written := len(value.encode("utf-8"))) < size
        ):
            raise _Bad(f"{where}: commit {seq} value was cut ({written} of {size} bytes)")
        try:
            payload = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise _Bad(f"{where}: commit {seq} value is not JSON ({exc})") from None
    elif isinstance(ref, str):
        if store is None:
            raise _Bad(f"{where}: commit {seq} is stored at {ref} and no store was given")
        try:
            return _stored_commit(seq, key, verb, ref, store, where, cache), None
        except DamagedBlob as damaged:
            return Commit(seq, key, verb, UNKNOWN), damaged.damage
        except (BlobNotFoundError, InvalidAddressError) as exc:
            # Absent (or named by an address that is none): the store lost it, a gap.
            raise _Bad(f"{where}: commit {seq} payload {ref}: {exc}") from None
    else:
        # Neither value nor ref: the writer withheld the content on purpose (or its store failed).
        payload = UNKNOWN
    try:
        payload = normalize_value(key, payload, f"{where}: commit {seq}")
        return Commit(seq, key, verb, payload), None
    except (AfOtelError, ValueError) as exc:
        raise _Bad(str(exc)) from None


def _stored_commit(
    seq: int, key: str, verb: names.CommitVerb, ref: str, store: Store, where: str, cache: Blobs
) -> Commit:
    """A commit whose payload is the blob at ``ref``. A payload that is not what the commit needs
    (a value of the wrong shape for its key or verb) is damage of that blob: its bytes were
    stored for this commit, and the writer stores only what it normalized."""
    named_by = f"commit {seq} of {where}"
    payload = cache.json(store, ref, "payload", key, named_by)
    if key == "messages" and isinstance(payload, list):
        at = f"{where}: commit {seq}"
        messages = cache.messages(store, payload, at, (ref, "payload"), named_by, _frozen_message)
        return Commit(seq, key, verb, messages)
    try:
        return Commit(seq, key, verb, normalize_value(key, payload, f"{where}: commit {seq}"))
    except (_Bad, AfOtelError, ValueError) as exc:
        why = f"it is not what commit {seq} ({verb} {key}) needs: {exc}"
        raise DamagedBlob(BlobDamage(ref, "payload", key, why, named_by)) from None


# A base that is damaged as a whole: none of its keys is on record.
_UNKNOWN_STATE: Final[Mapping[str, Any]] = MappingProxyType(dict.fromkeys(REQUEST_KEYS, UNKNOWN))


def _load_base(
    address: str, store: Store | None, cache: Blobs
) -> tuple[Mapping[str, Any], str | None, tuple[BlobDamage, ...]]:
    """The run's starting state, why it is not on record (absent: a gap), and the damage found in
    it. A key whose stored value is damaged (a message blob, a chunk, a value of the wrong shape)
    is unknown in the state, its damage named; a base damaged as a whole (its bytes, not JSON,
    not an object) leaves every key unknown."""
    if store is None:
        return EMPTY_STATE, f"base {address}: no store was given", ()
    named_by = f"the run's base ({names.RUN_BASE})"
    try:
        raw = cache.json(store, address, "base", WHOLE_BASE, named_by)
    except (BlobNotFoundError, InvalidAddressError) as exc:
        return EMPTY_STATE, f"base {address}: {exc}", ()
    except DamagedBlob as damaged:
        return _UNKNOWN_STATE, None, (damaged.damage,)
    if not isinstance(raw, dict):
        why = f"it holds {type(raw).__name__}, not a JSON object"
        return _UNKNOWN_STATE, None, (BlobDamage(address, "base", WHOLE_BASE, why, named_by),)
    state: dict[str, Any] = {"messages": ()}
    damage: list[BlobDamage] = []
    for key, value in raw.items():  # the fetched value is shared by the read: never changed
        try:
            if key == "messages" and isinstance(value, list):
                where = f"base {address}"
                holder: tuple[str, BlobKind] = (address, "base")
                state[key] = cache.messages(store, value, where, holder, named_by, _frozen_message)
            else:
                state[key] = normalize_value(key, value, f"base {address}")
        except BlobNotFoundError as exc:
            return EMPTY_STATE, f"base {address}: {exc}", tuple(damage)
        except DamagedBlob as damaged:
            damage.append(damaged.damage)
            state[key] = UNKNOWN
        except (_Bad, AfOtelError, ValueError) as exc:
            why = f"its {key} is not a request's {key}: {exc}"
            damage.append(BlobDamage(address, "base", key, why, named_by))
            state[key] = UNKNOWN
    return MappingProxyType(state), None, tuple(damage)


def _read_epoch(span: SpanRecord, store: Store | None, cache: Blobs) -> EpochRecord | None:
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
    damaged: list[tuple[Commit, BlobDamage]] = []
    for event in span.events:
        if event.name != names.COMMIT_EVENT:
            continue
        try:
            commit, damage = _decode_commit(event.attributes, store, where, cache)
        except _Bad as bad:
            problems.append(str(bad))
            continue
        commits.append(commit)
        if damage is not None:
            damaged.append((commit, damage))
    commits.sort(key=lambda c: c.seq)
    if span.dropped_events_count:
        problems.append(f"{where}: {span.dropped_events_count} event(s) dropped at the source")
    lane = attrs.get(names.EPOCH_LANE)
    return EpochRecord(
        epoch,
        parent,
        span,
        tuple(commits),
        tuple(problems),
        tuple(_span_cut(span)),
        basis=parent,
        lane=lane if isinstance(lane, str) else "",
        own_damage=tuple(damaged),
    )


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
        record = _read_epoch(span, store, cache)
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
        base, base_problem, base_damage = _load_base(base_address, store, cache)
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
            _int(s.attributes.get(names.EPOCH)) or 0,
            s.span_id,
        ),
    )
    for span in ranked:
        epoch = _int(span.attributes.get(names.EPOCH))
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
    cache = Blobs()
    grouped = [_run_lanes(run_id, members, store, cache) for run_id, members in by_run.items()]
    grouped.sort(
        key=lambda lanes: min(
            (e.span.start_ns for r in lanes for e in r.epochs.values()), default=0
        )
    )
    loose.sort(key=lambda s: (s.start_ns, s.span_id))
    return tuple(run for lanes in grouped for run in lanes), tuple(loose)


# -- one tree across lanes -----------------------------------------------------------------------


@dataclass(slots=True)
class _Call:
    """One call of a run served by several writers, as the content link sees it."""

    record: EpochRecord
    start: int
    end: int
    digests: tuple[bytes, ...] | None  # one per message; None when the messages are not proven
    keys: tuple[int, ...] = ()  # keys[k]: a rolling hash of the first k digests
    roles: tuple[str, ...] = ()


def _answers_between(call: _Call, parent: _Call) -> int:
    """The assistant messages ``call`` adds to ``parent``'s that another message follows (a last
    assistant message is a prefill the caller wrote, not an answer)."""
    added = call.roles[len(parent.roles) : len(call.roles) - 1]
    return sum(1 for role in added if role == "assistant")


def link_by_content(lanes: list[Run], numbers: Mapping[str, Mapping[int, int]]) -> list[Run]:
    """Each call's parent across the lanes of one run: among the calls that finished before it
    started, the one whose messages are the longest prefix of its own (ties: the latest finished),
    the rule each writer applies to its own calls. Messages are compared by the SHA-256 of their
    canonical JSON. A call whose link cannot be proven gets parent 0 and a ``no-run-log`` reason:
    its own messages are not on record; a call that could have been a better parent is not
    readable (its messages are not on record, its record is incomplete, or its span is missing
    from its lane's numbering); or the messages it adds to the parent found hold a second model
    answer, which a call not on record gave (the one way a writer's last calls lost together show).
    A link is never guessed: such a call is a root of the tree, with the reason."""
    calls: list[_Call] = []
    memo: dict[int, tuple[Any, bytes]] = {}  # id(message) -> (message, digest)
    # (earliest start, end or None when unknown) of calls that could not be read
    unreadable: list[tuple[int, int | None]] = []
    for run in lanes:
        for record in (*run.epochs.values(), *run.others):
            span = record.span
            own = run.epochs.get(record.epoch) is record
            readable = own and record.epoch not in run.broken
            digests = _digests(run, record, memo) if readable else None
            if digests is None:
                unreadable.append((span.start_ns, span.end_ns))
            if own:
                roles = _roles(run, record) if digests is not None else ()
                calls.append(
                    _Call(record, span.start_ns, span.end_ns, digests, _keys(digests), roles)
                )
        unreadable.extend(_holes(run, numbers.get(run.lane, {})))
    by_prefix: dict[tuple[int, int], list[_Call]] = {}
    for call in calls:
        if call.digests is not None:
            by_prefix.setdefault((len(call.digests), call.keys[-1]), []).append(call)
    parents: dict[int, int] = {}
    unproven: dict[int, str] = {}
    for call in calls:
        epoch = call.record.epoch
        parents[epoch] = 0
        if call.digests is None:
            unproven[epoch] = (
                "its parent cannot be found from content: its messages are not on record"
            )
            continue
        found = _longest_prefix(call, by_prefix)
        after = found.end if found is not None else None
        if any(
            start < call.start
            and (end is None or (end <= call.start and (after is None or end > after)))
            for start, end in unreadable
        ):
            unproven[epoch] = (
                "its parent cannot be found from content: a call of the run that may be it "
                "cannot be read"
            )
        elif found is not None and _answers_between(call, found) > 1:
            # Each answer a call adds to its parent's messages came from a model call; the
            # parent's own answer is one, so a second one came from a call not on record.
            unproven[epoch] = (
                f"its parent cannot be found from content: its messages add "
                f"{_answers_between(call, found)} model answers to those of epoch "
                f"{found.record.epoch}, so a call in between is not on record"
            )
        elif found is not None:
            parents[epoch] = found.record.epoch
    out: list[Run] = []
    for run in lanes:
        epochs = {e: replace(r, parent=parents.get(e, 0)) for e, r in run.epochs.items()}
        broken = dict(run.broken)
        for epoch in epochs:
            if epoch in unproven:
                broken.setdefault(epoch, unproven[epoch])
        out.append(replace(run, epochs=MappingProxyType(epochs), broken=MappingProxyType(broken)))
    return out


def _keys(digests: tuple[bytes, ...] | None) -> tuple[int, ...]:
    if digests is None:
        return ()
    keys = [0]
    for digest in digests:
        keys.append(hash((keys[-1], digest)))
    return tuple(keys)


def _longest_prefix(call: _Call, by_prefix: Mapping[tuple[int, int], list[_Call]]) -> _Call | None:
    digests = call.digests
    assert digests is not None
    for size in range(len(digests), -1, -1):
        best: _Call | None = None
        for other in by_prefix.get((size, call.keys[size]), ()):
            if other is call or other.end > call.start or other.digests != digests[:size]:
                continue
            if best is None or (other.end, other.record.epoch) > (best.end, best.record.epoch):
                best = other
        if best is not None:
            return best
    return None


def _roles(run: Run, record: EpochRecord) -> tuple[str, ...]:
    messages = run.fold.value_at("messages", record.epoch)
    if not isinstance(messages, tuple | ChainedTuple):
        return ()
    return tuple(str(m.get("role")) for m in messages)


def _digests(
    run: Run, record: EpochRecord, memo: dict[int, tuple[Any, bytes]]
) -> tuple[bytes, ...] | None:
    """The call's messages as digests, when the record proves them: the fold holds them and the
    call has commits or a minted receipt (a call with neither says nothing of its own request)."""
    state = record.span.attributes.get(names.RECEIPT_STATE)
    if not record.commits and state != names.STATE_MINTED:
        return None
    messages = run.fold.value_at("messages", record.epoch)
    if messages is UNKNOWN:
        return None
    if not isinstance(messages, tuple | ChainedTuple):
        return ()
    out: list[bytes] = []
    for message in messages:  # a lane's calls share their message objects: each is hashed once
        found = memo.get(id(message))
        if found is None or found[0] is not message:
            found = (message, hashlib.sha256(canonical_json(message)).digest())
            memo[id(message)] = found
        out.append(found[1])
    return tuple(out)


def _holes(run: Run, numbers: Mapping[int, int]) -> list[tuple[int, int | None]]:
    """Calls missing from a lane's numbering, as (earliest start, None): each started after the
    lane's call numbered just below it, and could have ended any time."""
    starts = {
        wire: run.epochs[mine].span.start_ns for wire, mine in numbers.items() if mine in run.epochs
    }
    out: list[tuple[int, int | None]] = []
    earliest = -1
    for wire in range(1, max(numbers, default=0) + 1):
        if wire in numbers:
            earliest = starts.get(wire, earliest)
        else:
            out.append((earliest, None))
    return out
