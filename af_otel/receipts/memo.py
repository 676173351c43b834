"""The run-scoped digest memo: each piece of a request is canonicalized and hashed once per run.

An agent's request at call k is the request at call k-1 plus a few new messages. Without a memo the
mint re-canonicalizes and re-hashes the whole history every call, so a run's hashing work grows with
the square of its length. `ReceiptDigests` keeps, for the current run only:

* per sequence (system parts, messages, tools), the previous call's items with their canonical size
  and entry hash; an item equal (``==``, a C-speed comparison that short-circuits on shared
  objects) to the item at the same position last call costs no canonicalization and no hashing;
* the messages chain ``c_0..c_n`` of the previous call, so a call whose first k entries are unchanged
  extends the chain from ``c_k`` instead of from ``c_0``;
* a by-preimage memo of hashes of small strings (the system list, params, the receipt digest).

Bounds (STYLE rule 4): the sequence records hold one call's items, which the caller's request holds
anyway; the preimage memo keeps two calls' worth — a ``current`` and a ``previous`` generation,
rotated at every mint, so a value that stops repeating is gone after the next call. A new run id (or
key) starts fresh. Nothing grows with the number of calls. The memo changes no result: a receipt
minted with it is byte-identical to one minted without (tests hold it to that).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from af_otel.canonical import canonical_json, receipt_hash


@dataclass(slots=True)
class WorkCounts:
    """What the mint actually did: for benchmarks and the demo, not part of any result."""

    canonical_bytes: int = 0  # bytes of canonical JSON produced
    sha_bytes: int = 0  # bytes fed to SHA-256 / HMAC
    hashes: int = 0  # hash computations

    def snapshot(self) -> WorkCounts:
        return WorkCounts(self.canonical_bytes, self.sha_bytes, self.hashes)


@dataclass(frozen=True, slots=True)
class Piece:
    """One item of a sequence: its canonical JSON size and its entry hash."""

    value: Any
    size: int
    digest: str
    body: bytes | None  # canonical bytes, kept only for small pieces that are re-assembled


class _Hasher:
    """Salted hashing with work counts; the salt and key are fixed for one run."""

    __slots__ = ("counts", "key", "salt")

    def __init__(self, salt: str, key: bytes | None, counts: WorkCounts) -> None:
        self.salt = salt
        self.key = key
        self.counts = counts

    def hash_text(self, text: str) -> str:
        data = text.encode("utf-8")
        return self.hash_bytes(data)

    def hash_bytes(self, data: bytes) -> str:
        self.counts.sha_bytes += len(self.salt.encode("utf-8")) + 1 + len(data)
        self.counts.hashes += 1
        return receipt_hash(self.salt, data, key=self.key)

    def canonical(self, value: object) -> bytes:
        data = canonical_json(value)
        self.counts.canonical_bytes += len(data)
        return data


class ReceiptDigests:
    """Run-scoped digest memo; thread-safe; pass one per agent (or let the processor keep one per run)."""

    # Pieces at most this many canonical bytes keep their bytes (system parts, tools) so that the
    # whole-list hash can be re-assembled without canonicalizing again; messages keep only sizes.
    KEEP_BODY_LIMIT = 4096

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._run: tuple[str, bytes | None] | None = None
        self.counts = WorkCounts()
        self._reset()

    def _reset(self) -> None:
        self._sequences: dict[str, tuple[Piece, ...]] = {}
        self._chain: tuple[str, ...] = ()
        self._chain_entries: tuple[str, ...] = ()
        self._current: dict[bytes, str] = {}
        self._previous: dict[bytes, str] = {}

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def begin(self, run_id: str, key: bytes | None) -> _Hasher:
        """Start one mint for ``run_id``: a new run (or key) drops everything; the same run rotates."""
        if self._run != (run_id, key):
            self._run = (run_id, key)
            self._reset()
        else:
            self._previous, self._current = self._current, {}
        return _Hasher(run_id, key, self.counts)

    def hash_memo(self, hasher: _Hasher, preimage: bytes) -> str:
        found = self._current.get(preimage)
        if found is None:
            found = self._previous.get(preimage)
            if found is None:
                found = hasher.hash_bytes(preimage)
            self._current[preimage] = found
        return found

    def pieces(self, hasher: _Hasher, name: str, values: tuple[Any, ...]) -> tuple[Piece, ...]:
        """Canonical size and hash of each value, reusing last call's piece at the same position."""
        before = self._sequences.get(name, ())
        out: list[Piece] = []
        for index, value in enumerate(values):
            if index < len(before):
                old = before[index]
                if old.value is value or old.value == value:
                    out.append(
                        old if old.value is value else Piece(value, old.size, old.digest, old.body)
                    )
                    continue
            out.append(make_piece(hasher, value, self.KEEP_BODY_LIMIT))
        pieces = tuple(out)
        self._sequences[name] = pieces
        return pieces

    def chain(self, hasher: _Hasher, entries: tuple[str, ...]) -> tuple[str, ...]:
        """The chain links ``c_0..c_n`` for ``entries``, extended from last call's common prefix."""
        links = chain_links(hasher, entries, self._chain_prefix(entries))
        self._chain_entries = entries
        self._chain = links
        return links

    def _chain_prefix(self, entries: tuple[str, ...]) -> tuple[str, ...]:
        if not self._chain:
            return ()
        same = 0
        for new, old in zip(entries, self._chain_entries, strict=False):
            if new != old:
                break
            same += 1
        return self._chain[: same + 1]

    def retained(self) -> int:
        """How many memo records are held now (the bound the tests check)."""
        with self._lock:
            records = sum(len(seq) for seq in self._sequences.values())
            return records + len(self._chain) + len(self._current) + len(self._previous)


CHAIN_SEED = "af.messages.v1"


def make_piece(hasher: _Hasher, value: Any, keep_limit: int) -> Piece:
    data = hasher.canonical(value)
    # A copy: orjson hands back bytes holding its whole write buffer (4 KiB even for a short
    # message), and the memo keeps these for the life of the run.
    body = bytes(memoryview(data)) if len(data) <= keep_limit else None
    return Piece(value, len(data), hasher.hash_bytes(data), body)


def chain_links(
    hasher: _Hasher, entries: tuple[str, ...], prefix: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """``c_0 = H("af.messages.v1")``, ``c_i = H(c_{i-1} + "\\x1f" + e_i)``; ``prefix`` is reused."""
    links = list(prefix) if prefix else [hasher.hash_text(CHAIN_SEED)]
    for entry in entries[len(links) - 1 :]:
        links.append(hasher.hash_text(links[-1] + "\x1f" + entry))
    return tuple(links)
