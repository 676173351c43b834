"""The store blobs a trace refers to, and what one read fetched of them.

`referenced_blobs` lets a reader tell a store that cannot be the trace's (none of them there) from
one that lost a few (each loss is a gap on its call). `Blobs` fetches a read's blobs once each and
sorts every failure three ways: a blob that is absent is a gap on the calls that need it; a blob
whose bytes do not hash to its address, or that is not what its reference promised (not JSON, not
the shape its place needs), is damage (`BlobDamage`), which `verify` reports as a damaged verdict
and never as a gap; a store that fails to read (I/O, a refused path) raises its `StoreError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Final, Literal

from af_otel import names
from af_otel.errors import (
    AfOtelError,
    BlobDamagedError,
    InvalidAddressError,
    StoreError,
)
from af_otel.reader.records import SpanRecord
from af_otel.store import LocalStore, Store, validate_address
from af_otel.store.items import CHUNK_REF, ITEM_REF, chunk_addresses, is_item_ref

__all__ = ["BlobDamage", "BlobKind", "Blobs", "DamagedBlob", "held_open", "referenced_blobs"]

# What a blob is to the record that names it: a run's base, a commit's payload, a chunk of message
# references, or one message of a stored list (docs/store.md).
BlobKind = Literal["base", "payload", "chunk", "message"]
# The field a blob damages when the whole of a base is unreadable: every request key it held.
WHOLE_BASE: Final = "base"


@dataclass(frozen=True, slots=True)
class BlobDamage:
    """A stored blob a call's view depends on that is damaged: its bytes do not hash to its
    address, or they are not what its reference promised. ``field`` is the request key the blob
    feeds (``messages``, ``tools``, ...), or ``base`` for a whole base; ``named_by`` says which
    record refers to it (the run's base, or a commit of a span)."""

    address: str
    kind: BlobKind
    field: str
    reason: str
    named_by: str

    @property
    def text(self) -> str:
        """One sentence for a verdict: the blob, the field, who named it and what is wrong."""
        return (
            f"stored {self.kind} blob {self.address} ({self.field}, named by {self.named_by}) "
            f"is damaged: {self.reason}"
        )


class DamagedBlob(Exception):
    """Raised inside `Blobs` and the run reader for one damaged blob; carries its account."""

    def __init__(self, damage: BlobDamage) -> None:
        super().__init__(damage.text)
        self.damage = damage


# A message normalizer: (raw message, where) -> the frozen normalized message; raises for a
# value that is not a message.
Normalize = Callable[[object, str], Any]


class Blobs:
    """What one read fetched from the store: each blob by address once (a message stored once is
    fetched once, a blob that failed fails once), and the normalized form of each fetched message
    (so the lanes of a run share one object per message, computed once)."""

    __slots__ = ("failed", "fetched", "normal")

    def __init__(self) -> None:
        self.fetched: dict[str, Any] = {}
        self.failed: dict[str, StoreError] = {}
        self.normal: dict[int, tuple[Any, Any]] = {}

    def json(self, store: Store, address: str, kind: BlobKind, field: str, named_by: str) -> Any:
        """The JSON value at ``address``. Raises `InvalidAddressError` for an address that is not
        one (a record's problem, not the store's), `BlobNotFoundError` for a blob that is absent,
        `DamagedBlob` for one that is damaged or not JSON, and the store's `StoreError` when it
        cannot read."""
        validate_address(address)
        if address in self.fetched:
            return self.fetched[address]
        failure = self.failed.get(address)
        if failure is None:
            try:
                value = store.get_json(address)
            except StoreError as exc:
                self.failed[address] = failure = exc
            else:
                self.fetched[address] = value
                return value
        if isinstance(failure, BlobDamagedError):
            raise DamagedBlob(BlobDamage(address, kind, field, str(failure), named_by))
        raise failure

    def messages(
        self,
        store: Store,
        items: list[Any],
        where: str,
        holder: tuple[str, BlobKind],
        named_by: str,
        normalize: Normalize,
        field: str = "messages",
    ) -> tuple[Any, ...]:
        """A stored message list (held by the blob ``holder``: its address and kind), references
        resolved, each message normalized once per read. A reference that is not one, a chunk that
        is not a list of message references, or a message that is not a message raises
        `DamagedBlob` naming the blob that holds it; otherwise as `json`."""
        out: list[Any] = []

        def damaged(address: str, kind: BlobKind, reason: str) -> DamagedBlob:
            return DamagedBlob(BlobDamage(address, kind, field, reason, named_by))

        for index, item in enumerate(items):
            found: list[tuple[str, BlobKind, Any]] = []
            if not is_item_ref(item):
                found.append((*holder, item))
            else:
                ref = item.get(ITEM_REF, item.get(CHUNK_REF))
                try:
                    validate_address(ref)
                except InvalidAddressError as exc:
                    raise damaged(
                        *holder, f"{field}[{index}] is not a valid reference: {exc}"
                    ) from None
                if ITEM_REF in item:
                    found.append(
                        (ref, "message", self.json(store, ref, "message", field, named_by))
                    )
                else:
                    chunk = self.json(store, ref, "chunk", field, named_by)
                    try:
                        addresses = chunk_addresses(ref, chunk)
                    except BlobDamagedError as exc:
                        raise damaged(ref, "chunk", str(exc)) from None
                    for address in addresses:
                        message = self.json(store, address, "message", field, named_by)
                        found.append((address, "message", message))
            for address, kind, raw in found:
                at = f"{where}: {field}[{len(out)}]"
                known = self.normal.get(id(raw))
                if known is None or known[0] is not raw:
                    try:
                        known = (raw, normalize(raw, at))
                    except (AfOtelError, ValueError) as exc:
                        raise damaged(address, kind, f"it is not a message ({exc})") from None
                    self.normal[id(raw)] = known
                out.append(known[1])
        return tuple(out)


def held_open(store: Store | None) -> AbstractContextManager[Store | None]:
    """``store`` for one read's many blobs: a local store with the directories above its blobs
    held open for the read (`LocalStore.reading`), any other as it is."""
    if isinstance(store, LocalStore):
        return store.reading()
    return nullcontext(store)


def referenced_blobs(spans: Iterable[SpanRecord]) -> list[str]:
    """The valid store addresses ``spans`` refer to (run bases, commit payloads), each once, in
    the order met. An invalid address is left out: the fold reports it as a gap on its call.
    The messages a stored list names by reference (`af_otel.store.items`) are not followed: they
    are behind these blobs, so a store holding none of these cannot be the trace's either."""
    found: dict[str, None] = {}
    for span in spans:
        base = span.attributes.get(names.RUN_BASE)
        candidates = [base] if isinstance(base, str) else []
        for event in span.events:
            if event.name == names.COMMIT_EVENT:
                ref = event.attributes.get(names.COMMIT_REF)
                if isinstance(ref, str):
                    candidates.append(ref)
        for address in candidates:
            try:
                found[validate_address(address)] = None
            except InvalidAddressError:
                continue
    return list(found)
