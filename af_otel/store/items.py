"""Message lists stored message by message, so that content many calls share is held once.

A base's ``messages``, and a commit's ``messages`` payload that holds turns other calls were sent
(more than one answer), are stored as item references ``{"af.ref": "sha256:..."}``: each message
a blob of its own canonical JSON. A conversation served by many workers, or continued after a
restart, repeats its history in every request; stored whole per list, each worker that joined
would write that history again. Stored per message, a writer adds only the messages the store does
not hold, plus one list of addresses. A reader accepts references in any stored message list.

The list of addresses would still grow with the conversation at every join, so each full run of
`CHUNK` references from the start of the list is stored as a blob of its own and named by one
chunk reference ``{"af.refs": "sha256:..."}``: a history's first 16, 32, ... messages are the same
chunks whoever stores them, and a join writes only the chunk references plus the last few
message references. A chunk holds message references only. Neither kind of reference can be
mistaken for a message: a message always has a ``role``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import MutableMapping, Sequence
from typing import Any, Final

from af_otel import forksafe
from af_otel.errors import BlobShapeError, InvalidAddressError
from af_otel.store.address import address_of, validate_address
from af_otel.store.base import Store, encode_json

__all__ = [
    "CHUNK",
    "CHUNK_REF",
    "ITEM_REF",
    "StoredItems",
    "chunk_addresses",
    "is_item_ref",
    "load_items",
]

ITEM_REF: Final = "af.ref"
CHUNK_REF: Final = "af.refs"
# Message references per chunk: a join writes about n / 16 chunk references plus up to 16 message
# references, instead of n message references.
CHUNK: Final = 16
# Chunks a writer remembers having stored or found: a join that repeats a history this process
# stored before costs no look-up for it. 4,096 chunks (65,536 messages of history) of about 200
# bytes each: under 1 MB.
REMEMBERED: Final = 4_096


class StoredItems:
    """A writer's bounded memory of the chunks it stored or found in the store (LRU);
    thread-safe."""

    def __init__(self, bound: int = REMEMBERED) -> None:
        self.bound = bound
        self._known: OrderedDict[str, None] = OrderedDict()
        # A forked child keeps the memory: each change is one step of the ordered dict, so it is
        # whole at any fork, and what the parent stored stays stored.
        self._lock = forksafe.lock(self)

    def put(self, store: Store, items: Sequence[Any]) -> list[dict[str, str]]:
        """Store each item once and return the references that stand for the list: a chunk
        reference per full `CHUNK` items from the start, then one reference per item.

        A chunk is stored after its items, so a chunk the store holds (or this writer remembers)
        says its items are there too: a history another worker stored costs one look-up per chunk.
        Raises what the store raises; blobs stored before the failure stay stored (write-once)."""
        bodies = [encode_json(item) for item in items]
        addresses = [address_of(body) for body in bodies]
        whole = len(bodies) - len(bodies) % CHUNK
        out: list[dict[str, str]] = []
        for at in range(0, whole, CHUNK):
            data = encode_json([{ITEM_REF: a} for a in addresses[at : at + CHUNK]])
            address = address_of(data)
            if not self._knows(address) and not store.has(address):
                for body in bodies[at : at + CHUNK]:
                    store.put(body)
                store.put(data)
            self._remember(address)
            out.append({CHUNK_REF: address})
        for body, address in zip(bodies[whole:], addresses[whole:], strict=True):
            store.put(body)
            out.append({ITEM_REF: address})
        return out

    def _knows(self, address: str) -> bool:
        with self._lock:
            if address in self._known:
                self._known.move_to_end(address)
                return True
            return False

    def _remember(self, address: str) -> None:
        with self._lock:
            self._known[address] = None
            self._known.move_to_end(address)
            while len(self._known) > self.bound:
                self._known.popitem(last=False)


def is_item_ref(value: Any) -> bool:
    """An item or chunk reference: an object with the single key ``af.ref`` or ``af.refs``
    holding a string."""
    return (
        isinstance(value, dict)
        and len(value) == 1
        and isinstance(value.get(ITEM_REF, value.get(CHUNK_REF)), str)
    )


def load_items(
    store: Store, items: Sequence[Any], cache: MutableMapping[str, Any] | None = None
) -> list[Any]:
    """``items`` with every reference replaced by what it names (each blob checked against its
    address by the store); ``cache`` keeps what was fetched for the next list of the same read.
    Raises the store's errors (`BlobNotFoundError`, `BlobDamagedError`, ...) naming the address,
    and `BlobShapeError` for a chunk that is not a list of message references."""
    out: list[Any] = []
    for item in items:
        if not is_item_ref(item):
            out.append(item)
        elif ITEM_REF in item:
            out.append(_fetch(store, item[ITEM_REF], cache))
        else:
            address = item[CHUNK_REF]
            chunk = _fetch(store, address, cache)
            out.extend(_fetch(store, ref, cache) for ref in chunk_addresses(address, chunk))
    return out


def chunk_addresses(address: str, chunk: Any) -> list[str]:
    """The message addresses the chunk stored at ``address`` names, in order. A chunk that is not
    a list of message references with valid addresses raises `BlobShapeError` naming it: its
    bytes may hash right, but it is not what a chunk reference promises."""
    if isinstance(chunk, list) and all(
        isinstance(ref, dict) and set(ref) == {ITEM_REF} for ref in chunk
    ):
        try:
            return [validate_address(ref[ITEM_REF]) for ref in chunk]
        except InvalidAddressError:
            pass
    raise BlobShapeError(f"chunk {address} is not a list of message references")


def _fetch(store: Store, address: Any, cache: MutableMapping[str, Any] | None) -> Any:
    address = validate_address(address)
    if cache is not None and address in cache:
        return cache[address]
    value = store.get_json(address)
    if cache is not None:
        cache[address] = value
    return value
