"""Message lists stored message by message, so that content many calls share is held once.

A stored ``messages`` payload (a commit's ``af.commit.ref``, a base's ``messages``) holds item
references ``{"af.ref": "sha256:..."}``: each message is a blob of its own canonical JSON. A
conversation served by many workers, or continued after a restart, repeats its history in every
request; stored whole per list, each worker that joined would write that history again. Stored per
message, a writer adds only the messages the store does not hold, plus one list of addresses.
An item reference can never be mistaken for a message: a message always has a ``role``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import MutableMapping, Sequence
from typing import Any, Final

from af_otel.store.address import address_of, validate_address
from af_otel.store.base import Store, encode_json

__all__ = ["ITEM_REF", "StoredItems", "is_item_ref", "load_items"]

ITEM_REF: Final = "af.ref"
# Addresses a writer remembers having stored: a message repeated by every later call of a run is
# then neither written nor looked up again. 16,384 addresses of 71 characters: about 2 MB.
REMEMBERED: Final = 16_384


class StoredItems:
    """A writer's bounded memory of the item blobs it stored (LRU); thread-safe."""

    def __init__(self, bound: int = REMEMBERED) -> None:
        self.bound = bound
        self._known: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self.written = 0  # item blobs this writer handed to a store (not those it remembered)

    def put(self, store: Store, items: Sequence[Any]) -> list[dict[str, str]]:
        """Store each item once and return the list of their references. Raises what the store
        raises; items stored before the failure stay stored (blobs are write-once)."""
        out: list[dict[str, str]] = []
        for item in items:
            data = encode_json(item)
            address = address_of(data)
            with self._lock:
                known = address in self._known
                if known:
                    self._known.move_to_end(address)
            if not known:
                store.put(data)
                with self._lock:
                    self.written += 1
                    self._known[address] = None
                    while len(self._known) > self.bound:
                        self._known.popitem(last=False)
            out.append({ITEM_REF: address})
        return out

    def clear(self) -> None:
        with self._lock:
            self._known.clear()


def is_item_ref(value: Any) -> bool:
    """An item reference: an object with the single key ``af.ref`` holding a string."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(ITEM_REF), str)


def load_items(
    store: Store, items: Sequence[Any], cache: MutableMapping[str, Any] | None = None
) -> list[Any]:
    """``items`` with every item reference replaced by the JSON it names (checked against its
    address by the store); ``cache`` keeps what was fetched for the next list of the same read.
    Raises the store's errors (`BlobNotFoundError`, `BlobDamagedError`, ...) naming the address."""
    out: list[Any] = []
    for item in items:
        if not is_item_ref(item):
            out.append(item)
            continue
        address = validate_address(item[ITEM_REF])
        if cache is not None and address in cache:
            out.append(cache[address])
            continue
        value = store.get_json(address)
        if cache is not None:
            cache[address] = value
        out.append(value)
    return out
