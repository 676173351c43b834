"""A call's message entry hashes as one run of raw bytes: what the emit path keeps of them.

A run keeps an entry hash per message for as long as it is open (the digest memo compares the
next call's with them, the next receipt counts ``messages.kept`` against them). As 64-digit hex
strings they cost 113 bytes and a tuple slot each, a quarter of the history's own size at 120
turns; as raw digest bytes laid end to end, 32 (8 in af-1). The hex text the wire and the chain
need is made where they need it, for the few new entries of a call (docs/receipt-spec.md §2: an
entry is the hex of the salted hash, so ``bytes.hex`` of its raw digest is that very text).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

__all__ = ["Entries", "common_entries"]


class Entries(Sequence[str]):
    """Entry hashes, ``width`` raw bytes each, end to end in ``raw``; reads as their hex texts."""

    __slots__ = ("raw", "width")

    def __init__(self, raw: bytes = b"", width: int = 32) -> None:
        self.raw = raw
        self.width = width

    def __len__(self) -> int:
        return len(self.raw) // self.width

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Entries: ...
    def __getitem__(self, index: int | slice) -> str | Entries:
        width = self.width
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return Entries(b"".join(self.raw_at(i) for i in range(start, stop, step)), width)
            return Entries(self.raw[start * width : max(start, stop) * width], width)
        count = len(self)
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError("entry index out of range")
        return self.raw[index * width : (index + 1) * width].hex()

    def raw_at(self, index: int) -> bytes:
        return self.raw[index * self.width : (index + 1) * self.width]

    def __iter__(self) -> Iterator[str]:
        return (self[index] for index in range(len(self)))

    def texts(self, start: int = 0) -> tuple[str, ...]:
        """The hex texts of the entries from ``start`` on (a receipt's ``messages.added``)."""
        return tuple(self[start:])

    def first(self, count: int) -> Entries:
        """The first ``count`` entries (this very value when it holds no more)."""
        return self if count >= len(self) else self[:count]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Entries):
            return self.width == other.width and self.raw == other.raw
        if isinstance(other, tuple | list):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.raw, self.width))

    def __repr__(self) -> str:
        return f"Entries({len(self)} x {self.width} bytes)"


def common_entries(before: Sequence[str], now: Sequence[str]) -> int:
    """How many leading entries of ``now`` equal those at the same place in ``before``: for two
    `Entries`, found by comparing bytes (the usual append: one ``startswith``)."""
    if isinstance(before, Entries) and isinstance(now, Entries) and before.width == now.width:
        width = before.width
        size = min(len(before), len(now)) * width
        if now.raw.startswith(before.raw[:size]):  # a whole slice is the very bytes: no copy
            return size // width
        low, high = 0, size // width  # equal up to low entries, not up to high
        while high - low > 1:
            middle = (low + high) // 2
            if before.raw[: middle * width] == now.raw[: middle * width]:
                low = middle
            else:
                high = middle
        return low
    count = 0
    for old, new in zip(before, now, strict=False):
        if old != new:
            break
        count += 1
    return count
