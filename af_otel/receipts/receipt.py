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
_DECIMAL = re.compile(r"-?[0-9]{1,20}\Z")
_SCHEMES: Final = (names.SCHEME_PLAIN, names.SCHEME_HMAC)


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
    # so that the next epoch can compute its own `kept`.
    entries: tuple[str, ...] | None = field(default=None, compare=False, repr=False)
    # The writer's lane (``af.epoch.lane``); None on spans written before lanes existed.
    lane: str | None = None

    @property
    def minted(self) -> bool:
        return self.state == names.STATE_MINTED

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
        (together with ``af.epoch`` and ``af.epoch.parent``)."""
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
        return out

    @staticmethod
    def from_attributes(attributes: Mapping[str, Any]) -> Receipt | MalformedReceipt | None:
        """Read a receipt back from span attributes: ``None`` when the span carries none at all,
        `MalformedReceipt` (with the reason) when what it carries is malformed. Never raises."""
        try:
            return _read(attributes)
        except Exception as exc:
            return MalformedReceipt(f"unreadable attributes: {type(exc).__name__}")


@dataclass(frozen=True, slots=True)
class MalformedReceipt:
    """Receipt attributes are present but malformed (cut by a backend, edited, wrong types)."""

    reason: str


class _Reject(Exception):
    pass


def _str(attrs: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    value = attrs.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _Reject(f"{key} is missing or not a string")
    return value


def _hash(attrs: Mapping[str, Any], key: str) -> str:
    value = _str(attrs, key)
    assert value is not None
    if not _HASH.match(value):
        raise _Reject(f"{key} is not 16 lowercase hex digits")
    return value


def _int(attrs: Mapping[str, Any], key: str, *, default: int | None = None) -> int:
    value = attrs.get(key)
    if value is None and default is not None:
        return default
    if isinstance(value, str) and _DECIMAL.match(value):
        value = int(value)  # some backends return integer attributes as decimal strings
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _Reject(f"{key} is missing or not a non-negative integer")
    return value


def _strs(attrs: Mapping[str, Any], key: str, *, hashes: bool = False) -> tuple[str, ...]:
    value = attrs.get(key, ())
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise _Reject(f"{key} is not a list of strings")
    out = tuple(value)
    for item in out:
        if not isinstance(item, str) or (hashes and not _HASH.match(item)):
            raise _Reject(f"{key} holds a value that is not {'a hash' if hashes else 'a string'}")
    return out


def _read(attrs: Mapping[str, Any]) -> Receipt | MalformedReceipt | None:
    if not any(isinstance(k, str) and k.startswith("af.receipt.") for k in attrs):
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
        pieces = _strs(attrs, names.RECEIPT_SYSTEM_PIECES, hashes=True)
        count = _int(attrs, names.RECEIPT_MESSAGES_COUNT)
        kept = _int(attrs, names.RECEIPT_MESSAGES_KEPT)
        added = _strs(attrs, names.RECEIPT_MESSAGES_ADDED, hashes=True)
        if kept + len(added) != count:
            raise _Reject("messages.kept + len(messages.added) differs from messages.count")
        tool_names = _strs(attrs, names.RECEIPT_TOOLS_NAMES)
        tool_hashes = _strs(attrs, names.RECEIPT_TOOLS_HASHES, hashes=True)
        if len(tool_names) != len(tool_hashes):
            raise _Reject("tools.names and tools.hashes differ in length")
        return Receipt(
            state="minted",
            run_id=run,
            epoch=epoch,
            parent=parent,
            scheme=scheme,
            digest=_hash(attrs, names.RECEIPT_DIGEST),
            model=_str(attrs, names.RECEIPT_MODEL, optional=True),
            provider=_str(attrs, names.RECEIPT_PROVIDER, optional=True),
            system_hash=_hash(attrs, names.RECEIPT_SYSTEM_HASH),
            system_pieces=pieces,
            messages_count=count,
            messages_chain=_hash(attrs, names.RECEIPT_MESSAGES_CHAIN),
            messages_kept=kept,
            messages_added=added,
            tools_names=tool_names,
            tools_hashes=tool_hashes,
            tools_forced=_str(attrs, names.RECEIPT_TOOLS_FORCED, optional=True),
            params=_str(attrs, names.RECEIPT_PARAMS),
            bytes=_int(attrs, names.RECEIPT_BYTES),
            lane=lane,
        )
    except _Reject as reject:
        return MalformedReceipt(str(reject))
