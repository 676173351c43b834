"""The receipt value: fingerprints, counts and names of one request — never its content.

`Receipt.to_attributes` writes exactly the ``af.receipt.*`` span attributes of docs/receipt-spec.md §4 and
`Receipt.from_attributes` reads them back, refusing malformed or truncated input with a reason
(`MalformedReceipt`) instead of raising: a backend that cut an attribute must not make the reader
trust what is left. What the shape rules cannot see (a list cut short, an edited params string) the
digest can: `af_otel.receipts.receipt_digest` recomputes it from the fields read back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from af_otel import names

ReceiptState = Literal["minted", "absent", "error"]
STATES: Final[tuple[ReceiptState, ...]] = ("minted", "absent", "error")
_HASH = re.compile(r"[0-9a-f]{16}\Z")
_HASH_2 = re.compile(r"[0-9a-f]{64}\Z")
_KEY_ID = re.compile(r"[0-9a-f]{16}\Z")
_DECIMAL = re.compile(r"-?[0-9]{1,20}\Z")
_SCHEMES: Final = names.SCHEMES
_AF2: Final = frozenset({names.SCHEME_2, names.SCHEME_2_HMAC})
_AF2_MARKS: Final = (
    names.RECEIPT_DIGEST,
    names.RECEIPT_SYSTEM_HASH,
    names.RECEIPT_MESSAGES_CHAIN,
    names.RECEIPT_PARENT_DIGEST,
)


@dataclass(frozen=True, slots=True)
class Receipt:
    """One call's receipt. ``state == "minted"`` carries every fingerprint; otherwise a reason."""

    state: ReceiptState
    run_id: str
    epoch: int
    parent: int = 0
    absent_reason: str | None = None
    scheme: str | None = None
    digest: str | None = None
    model: str | None = None
    provider: str | None = None
    system_hash: str | None = None
    system_pieces: tuple[str, ...] = ()
    messages_count: int = 0
    messages_chain: str | None = None
    messages_kept: int = 0
    messages_added: tuple[str, ...] = ()
    tools_names: tuple[str, ...] = ()
    tools_hashes: tuple[str, ...] = ()
    tools_forced: str | None = None
    params: str | None = None
    bytes: int = 0
    # Every message entry hash; in memory only (the wire carries kept + added + chain instead),
    # so that the next epoch can compute its own `kept`. A minted receipt holds them as
    # `af_otel.receipts.entries.Entries` (raw digests, the hex read off them).
    entries: Sequence[str] | None = field(default=None, compare=False, repr=False)
    # The writer's lane (``af.epoch.lane``); None on spans written before lanes existed.
    lane: str | None = None
    # What an af-2 digest binds besides the fingerprints (docs/receipt-spec.md §12); read back
    # from any span, bound only by af-2. None or empty: not on the span ("" in the preimage).
    gaps: tuple[str, ...] = ()  # af.gaps, as the writer set them
    unrecorded: tuple[str, ...] = ()  # af.receipt.unrecorded
    source: str | None = None  # af.receipt.source: wire | instrumentation
    scope_name: str | None = None  # af.receipt.scope.name
    scope_version: str | None = None  # af.receipt.scope.version
    parent_digest: str | None = None  # af.receipt.parent_digest: the parent epoch's digest
    key_id: str | None = None  # af.receipt.key_id (keyed af-2)
    base: str | None = None  # af.run.base
    held: str | None = None  # af.held_history

    @property
    def minted(self) -> bool:
        return self.state == names.STATE_MINTED

    @property
    def binds_context(self) -> bool:
        """Whether the digest binds gaps, unrecorded fields, scope, source and parent (af-2)."""
        return self.scheme in _AF2

    @property
    def keyed(self) -> bool:
        return self.scheme in names.KEYED_SCHEMES

    def to_attributes(self) -> dict[str, Any]:
        """The ``af.receipt.*`` attributes; absent optional values are left out, lists always written."""
        out: dict[str, Any] = {names.RECEIPT_STATE: self.state}
        if not self.minted:
            if self.absent_reason:
                out[names.RECEIPT_ABSENT_REASON] = self.absent_reason
            return out
        out.update(self.fingerprint_attributes())
        out[names.RECEIPT_DIGEST] = self.digest
        return out

    def fingerprint_attributes(self) -> dict[str, Any]:
        """Every minted attribute but the state and the digest: what the digest is taken over
        (together with ``af.epoch`` and ``af.epoch.parent``; in af-2 with the context of §12)."""
        out: dict[str, Any] = {
            names.RECEIPT_SCHEME: self.scheme,
            names.RECEIPT_SYSTEM_HASH: self.system_hash,
            names.RECEIPT_SYSTEM_PIECES: list(self.system_pieces),
            names.RECEIPT_MESSAGES_COUNT: self.messages_count,
            names.RECEIPT_MESSAGES_CHAIN: self.messages_chain,
            names.RECEIPT_MESSAGES_KEPT: self.messages_kept,
            names.RECEIPT_MESSAGES_ADDED: list(self.messages_added),
            names.RECEIPT_TOOLS_NAMES: list(self.tools_names),
            names.RECEIPT_TOOLS_HASHES: list(self.tools_hashes),
            names.RECEIPT_PARAMS: self.params,
            names.RECEIPT_BYTES: self.bytes,
        }
        if self.model is not None:
            out[names.RECEIPT_MODEL] = self.model
        if self.provider is not None:
            out[names.RECEIPT_PROVIDER] = self.provider
        if self.tools_forced is not None:
            out[names.RECEIPT_TOOLS_FORCED] = self.tools_forced
        if self.binds_context:
            out[names.RECEIPT_UNRECORDED] = list(self.unrecorded)
            out[names.RECEIPT_SOURCE] = self.source or ""
            for name, value in (
                (names.RECEIPT_SCOPE_NAME, self.scope_name),
                (names.RECEIPT_SCOPE_VERSION, self.scope_version),
                (names.RECEIPT_PARENT_DIGEST, self.parent_digest),
                (names.RECEIPT_KEY_ID, self.key_id),
            ):
                if value:
                    out[name] = value
        return out

    @staticmethod
    def from_attributes(attributes: Mapping[str, Any]) -> Receipt | MalformedReceipt | None:
        """Read a receipt back from span attributes: ``None`` when the span carries none at all,
        `MalformedReceipt` (with the reason) when what it carries is malformed. Never raises."""
        try:
            return _read(attributes)
        except Exception as exc:
            return MalformedReceipt(
                f"unreadable attributes: {type(exc).__name__}", _af2(attributes)
            )


@dataclass(frozen=True, slots=True)
class MalformedReceipt:
    """Receipt attributes are present but malformed (cut by a backend, edited, wrong types).

    ``af2`` says the attributes carry the marks of an af-2 receipt (the scheme names af-2, or the
    digest has 64 hex digits): in af-2 a receipt that does not read is damaged, not a gap."""

    reason: str
    af2: bool = False


class _Reject(Exception):
    pass


def _str(attrs: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    value = attrs.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _Reject(f"{key} is missing or not a string")
    return value


def _hash(attrs: Mapping[str, Any], key: str, pattern: re.Pattern[str] = _HASH) -> str:
    value = _str(attrs, key)
    assert value is not None
    if not pattern.match(value):
        raise _Reject(f"{key} is not {_digits(pattern)} lowercase hex digits")
    return value


def _digits(pattern: re.Pattern[str]) -> int:
    return 64 if pattern is _HASH_2 else 16


def _int(attrs: Mapping[str, Any], key: str, *, default: int | None = None) -> int:
    value = attrs.get(key)
    if value is None and default is not None:
        return default
    if isinstance(value, str) and _DECIMAL.match(value):
        value = int(value)  # some backends return integer attributes as decimal strings
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _Reject(f"{key} is missing or not a non-negative integer")
    return value


def _strs(
    attrs: Mapping[str, Any],
    key: str,
    *,
    hashes: re.Pattern[str] | None = None,
    flattened: bool = False,
) -> tuple[str, ...]:
    value = attrs.get(key, ())
    if flattened and isinstance(value, str):  # a backend that flattened a one-item array
        value = (value,)
    # Span records hold arrays as tuples: the abstract `Sequence` test is for other mappings.
    if type(value) is not tuple and (isinstance(value, str) or not isinstance(value, Sequence)):
        raise _Reject(f"{key} is not a list of strings")
    out = tuple(value)
    for item in out:
        if not isinstance(item, str) or (hashes is not None and not hashes.match(item)):
            raise _Reject(f"{key} holds a value that is not {'a hash' if hashes else 'a string'}")
    return out


def _context(attrs: Mapping[str, Any], scheme: str, digest: re.Pattern[str]) -> dict[str, Any]:
    """The af-2 bound context as `Receipt` fields; a value that is missing reads as empty (the
    digest then tells whether it was there), one of the wrong shape is refused."""
    parent = _str(attrs, names.RECEIPT_PARENT_DIGEST, optional=True) or None
    if parent is not None and not (_HASH.match(parent) or digest.match(parent)):
        raise _Reject(f"{names.RECEIPT_PARENT_DIGEST} is not a digest")
    key_id = _str(attrs, names.RECEIPT_KEY_ID, optional=True) or None
    if scheme in names.KEYED_SCHEMES and key_id is None:
        raise _Reject(f"a {scheme} receipt without {names.RECEIPT_KEY_ID}")
    if key_id is not None and not _KEY_ID.match(key_id):
        raise _Reject(f"{names.RECEIPT_KEY_ID} is not 16 lowercase hex digits")
    return {
        "gaps": _strs(attrs, names.GAPS, flattened=True),
        "unrecorded": _strs(attrs, names.RECEIPT_UNRECORDED, flattened=True),
        "source": _str(attrs, names.RECEIPT_SOURCE, optional=True),
        "scope_name": _str(attrs, names.RECEIPT_SCOPE_NAME, optional=True),
        "scope_version": _str(attrs, names.RECEIPT_SCOPE_VERSION, optional=True),
        "parent_digest": parent,
        "key_id": key_id,
        "base": _str(attrs, names.RUN_BASE, optional=True),
        "held": _str(attrs, names.HELD_HISTORY, optional=True),
    }


def _read(attrs: Mapping[str, Any]) -> Receipt | MalformedReceipt | None:
    # A receipt's state is always written: the walk over every key is for what is left of one.
    if names.RECEIPT_STATE not in attrs and not any(
        isinstance(k, str) and k.startswith("af.receipt.") for k in attrs
    ):
        return None
    try:
        state = attrs.get(names.RECEIPT_STATE)
        if state not in STATES:
            raise _Reject(f"{names.RECEIPT_STATE} is {state!r}, not one of {', '.join(STATES)}")
        run_id = attrs.get(names.RUN_ID)
        run = run_id if isinstance(run_id, str) else ""
        epoch = _int(attrs, names.EPOCH, default=0)
        parent = _int(attrs, names.EPOCH_PARENT, default=0)
        lane = _str(attrs, names.EPOCH_LANE, optional=True)
        if state != names.STATE_MINTED:
            reason = attrs.get(names.RECEIPT_ABSENT_REASON)
            return Receipt(state, run, epoch, parent, reason if isinstance(reason, str) else None)
        scheme = _str(attrs, names.RECEIPT_SCHEME)
        if scheme not in _SCHEMES:
            raise _Reject(f"{names.RECEIPT_SCHEME} {scheme!r} is not a known scheme")
        digest = _HASH_2 if scheme in _AF2 else _HASH
        pieces = _strs(attrs, names.RECEIPT_SYSTEM_PIECES, hashes=digest)
        count = _int(attrs, names.RECEIPT_MESSAGES_COUNT)
        kept = _int(attrs, names.RECEIPT_MESSAGES_KEPT)
        added = _strs(attrs, names.RECEIPT_MESSAGES_ADDED, hashes=digest)
        if kept + len(added) != count:
            raise _Reject("messages.kept + len(messages.added) differs from messages.count")
        tool_names = _strs(attrs, names.RECEIPT_TOOLS_NAMES)
        tool_hashes = _strs(attrs, names.RECEIPT_TOOLS_HASHES, hashes=digest)
        context = _context(attrs, scheme, digest) if scheme in _AF2 else {}
        if len(tool_names) != len(tool_hashes):
            raise _Reject("tools.names and tools.hashes differ in length")
        return Receipt(
            state="minted",
            run_id=run,
            epoch=epoch,
            parent=parent,
            scheme=scheme,
            digest=_hash(attrs, names.RECEIPT_DIGEST, digest),
            model=_str(attrs, names.RECEIPT_MODEL, optional=True),
            provider=_str(attrs, names.RECEIPT_PROVIDER, optional=True),
            system_hash=_hash(attrs, names.RECEIPT_SYSTEM_HASH, digest),
            system_pieces=pieces,
            messages_count=count,
            messages_chain=_hash(attrs, names.RECEIPT_MESSAGES_CHAIN, digest),
            messages_kept=kept,
            messages_added=added,
            tools_names=tool_names,
            tools_hashes=tool_hashes,
            tools_forced=_str(attrs, names.RECEIPT_TOOLS_FORCED, optional=True),
            params=_str(attrs, names.RECEIPT_PARAMS),
            bytes=_int(attrs, names.RECEIPT_BYTES),
            lane=lane,
            **context,
        )
    except _Reject as reject:
        return MalformedReceipt(str(reject), _af2(attrs))


def _af2(attrs: Mapping[str, Any]) -> bool:
    """Whether receipt attributes that do not read carry an af-2 mark."""
    try:
        if attrs.get(names.RECEIPT_SCHEME) in _AF2 or names.RECEIPT_SOURCE in attrs:
            return True
        hashes = (attrs.get(key) for key in _AF2_MARKS)
        return any(isinstance(value, str) and bool(_HASH_2.match(value)) for value in hashes)
    except Exception:
        return False
