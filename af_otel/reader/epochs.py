"""One LLM-call span's record of its epoch: its commits decoded, normalized and checked, the values
its span limits or a backend cut, and the run's base loaded from the store.

Nothing here raises for bad data: a commit that cannot be read is a problem of its record (which
`af_otel.reader.runs` turns into a ``no-run-log`` reason), a stored blob that does not hold what it
should is damage named beside the value. Commit payloads are normalized per key as they are decoded
(a message once, not once per epoch that shows it), so the fold's answers are already the
normalized request's parts.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import orjson

from af_otel import names
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
from af_otel.reader.fold import UNKNOWN, Commit, freeze
from af_otel.reader.records import AttrValue, SpanRecord
from af_otel.reader.run_log import EpochRecord
from af_otel.store import Store

__all__ = [
    "BACKEND_LIMITS",
    "EMPTY_STATE",
    "int_of",
    "load_base",
    "minted_from_wire",
    "normalize_value",
    "read_epoch",
    "span_cut",
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


def int_of(value: AttrValue | None) -> int | None:
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


# The schemes whose digest binds ``af.receipt.source``: only there is "minted from the wire" a
# claim the receipt itself holds the span to.
_BINDS_SOURCE: Final = frozenset({names.SCHEME_2, names.SCHEME_2_HMAC})


def minted_from_wire(attributes: Mapping[str, AttrValue]) -> bool:
    """A span whose receipt was minted from the request body its client sent (``af.receipt.source
    = wire``, under an af-2 scheme, whose digest binds the source): its receipt and commits were
    not read off the instrumentation's attributes (docs/reader.md, span limits on a call minted
    from the wire)."""
    return (
        attributes.get(names.RECEIPT_STATE) == names.STATE_MINTED
        and attributes.get(names.RECEIPT_SOURCE) == names.SOURCE_WIRE
        and attributes.get(names.RECEIPT_SCHEME) in _BINDS_SOURCE
    )


def span_cut(span: SpanRecord) -> list[str]:
    """What the span limits or a backend cut of the record this call is rebuilt and checked from:
    dropped attributes or events, attributes dropped inside events, and string values that stop
    at a backend limit. On a call minted from the wire (`minted_from_wire`) that record is
    af_otel's own (its ``af.*`` attributes and ``af.commit`` events, and the store), so the
    instrumentation's attributes dropped or cut do not count; dropped events still do (af_otel's
    commit events may be among them where it writes on the live span)."""
    own = minted_from_wire(span.attributes)
    cut: list[str] = []
    if span.dropped_attributes_count and not own:
        cut.append(f"{span.dropped_attributes_count} attribute(s) dropped")
    if span.dropped_events_count:
        cut.append(f"{span.dropped_events_count} event(s) dropped")
    events = [e for e in span.events if e.name == names.COMMIT_EVENT] if own else span.events
    dropped_in_events = sum(e.dropped_attributes_count for e in events)
    if dropped_in_events:
        cut.append(f"{dropped_in_events} event attribute(s) dropped")
    for key, size in _at_limits(span.attributes):
        if not own or key.startswith("af."):
            cut.append(f"{key} stops at {size} bytes")
    for event in events:
        for key, size in _at_limits(event.attributes):
            cut.append(f"event {event.name} {key} stops at {size} bytes")
    return cut


def _at_limits(attrs: Mapping[str, AttrValue]) -> list[tuple[str, int]]:
    """The string values of ``attrs`` that stop at a backend limit (`_at_limit`), each key with
    the value's size in bytes."""
    # UTF-8 holds 1 to 4 bytes a character: most strings are ruled out by length alone, in one
    # comprehension (a span has some thirty attributes, and every call's span is looked at).
    near = [
        (key, value)
        for key, value in attrs.items()
        if isinstance(value, str) and 4 * len(value) >= _LOW and len(value) <= _HIGH
    ]
    return [(key, len(value.encode("utf-8"))) for key, value in near if _at_limit(value)]


def _decode_commit(
    attrs: Mapping[str, AttrValue], store: Store | None, where: str, cache: Blobs
) -> tuple[Commit, BlobDamage | None]:
    """One commit event, and the damage of the blob its payload is stored in, if any: a damaged
    payload is a commit whose value is not on record (`UNKNOWN`), with the damage named beside
    it. Raises `_Bad` for a commit that cannot be read (a gap), an absent payload included."""
    seq = int_of(attrs.get(names.COMMIT_SEQ))
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
    size = int_of(attrs.get(names.COMMIT_BYTES))
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


def load_base(
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


def read_epoch(span: SpanRecord, store: Store | None, cache: Blobs) -> EpochRecord | None:
    attrs = span.attributes
    where = span.origin or f"span {span.span_id}"
    epoch = int_of(attrs.get(names.EPOCH))
    if epoch is None or epoch < 1:
        return None
    problems: list[str] = []
    parent = int_of(attrs.get(names.EPOCH_PARENT))
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
        tuple(span_cut(span)),
        basis=parent,
        lane=lane if isinstance(lane, str) else "",
        own_damage=tuple(damaged),
    )
