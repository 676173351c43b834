"""The run-scoped digest memo: each piece of a request is canonicalized and hashed once per run.

An agent's request at call k is the request at call k-1 plus a few new messages. Without a memo the
mint re-canonicalizes and re-hashes the whole history every call, so a run's hashing work grows with
the square of its length. `ReceiptDigests` keeps, for the current run only:

* per sequence (system parts, messages, tools), the previous call's items with their canonical size
  and entry hash. An item that is *the same* as the item at the same position last call costs no
  canonicalization and no hashing. "The same" is stricter than ``==`` (see `same_json`): Python
  says ``True == 1``, JCS writes ``true`` and ``1``. The messages, which a run has thousands of,
  are kept lean (`_Messages`): the request's own tuple, the receipt's entry hashes as raw
  digest bytes end to end (`af_otel.receipts.entries.Entries`, hex made only where the chain
  and the wire need it) and one machine integer a message, no object per message;
* the messages chain of the previous call: its last link ``c_n`` and every `CHECKPOINT`-th link
  ``c_0, c_16, ...``, so a call whose first k entries are unchanged extends the chain from ``c_k``
  (k = n, the usual append) or from the checkpoint before it (at most 15 links hashed again),
  instead of from ``c_0``; all n + 1 links would cost a hash string a message;
* a by-preimage memo of the system-list hash (its preimage is re-assembled from the pieces' kept
  canonical bytes, so a long system prompt is neither re-canonicalized nor re-hashed).

A mint updates the memo only when it completes: a call that turns out unreadable (a NaN deep in a
tool argument) leaves the memo as the last good call left it.

Bounds. After a completed mint of a request with S system parts, M messages and T tools, the
memo holds exactly S + M + T sequence records, at most M // 16 + 2 chain links and at most 2
preimage records (a ``current`` and a ``previous`` generation of one system hash each, rotated at
every mint, so a value that stops repeating is gone after the next call)::

    retained() <= S + T + 2 * M + 3

where S, M, T are those of the last completed mint of the run (0 before the first). An unreadable
call changes only the generations, never past that bound. A new run id (key, or scheme) starts
fresh.
Nothing grows with the number of calls. The memo changes no result: a receipt minted with it is
byte-identical to one minted without (tests hold it to that).

Cost per call: canonicalizing and hashing what changed, plus a structural comparison of each item
with last call's (one Python call a message, its parts walked inline: the scaffolding
`Request.from_dict` rebuilds is walked, shared content is matched by identity; the leading run
of same messages keeps last call's entries and sizes in one slice each; `benchmarks/mint.py`
measures it).
"""

from __future__ import annotations

import operator
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from af_otel import forksafe
from af_otel.canonical import canonical_json, salted_hash
from af_otel.canonical.digest import DIGITS, salted_digest
from af_otel.model import FrozenDict
from af_otel.model.prefix import identical_prefix
from af_otel.receipts.entries import Entries, common_entries

CHAIN_SEED: Final = "af.messages.v1"
# Every CHECKPOINT-th chain link is kept (with the last): see the module docstring.
CHECKPOINT: Final = 16
# Containers longer than this are compared by their orjson bytes (C speed) rather than item by
# item in Python; shorter ones item by item, so that a shared 1,000-row payload one level down is
# matched by identity in O(1).
_WALK_LIMIT: Final = 64
_MISSING: Final = object()
_VALUE: Final = operator.attrgetter("value")
_MAPPINGS: Final[frozenset[type]] = frozenset((dict, FrozenDict))
_SCALARS: Final[frozenset[type]] = frozenset({str, int, float, bool})
# dict's own methods, so a mapping subclass cannot answer for itself.
_ITEMS: Final = dict.items
_GET: Final = dict.get


@dataclass(frozen=True, slots=True)
class Piece:
    """One item of a sequence: its canonical JSON size and its entry hash."""

    value: Any
    size: int
    digest: str
    body: bytes | None  # canonical bytes, kept only where the mint re-assembles them (system)


class _Hasher:
    """Salted hashing and canonical JSON; the salt and key are fixed for one run. Every hash and
    every canonical encoding of a mint goes through here, and nothing is counted on the way
    (benchmarks/mint.py measures the work by wrapping this module's two functions)."""

    __slots__ = ("digits", "hash_bytes", "hash_raw", "key")

    def __init__(self, salt: str, key: bytes | None, digits: int = DIGITS) -> None:
        self.key = key
        self.digits = digits
        self.hash_bytes: Callable[[bytes], str] = salted_hash(salt, key=key, digits=digits)
        # A message entry is kept as its raw digest (`Entries`), its hex made where needed.
        self.hash_raw: Callable[[bytes], bytes] = salted_digest(salt, key=key, digits=digits)

    def hash_text(self, text: str) -> str:
        return self.hash_bytes(text.encode("utf-8"))

    def canonical(self, value: object) -> bytes:
        return canonical_json(value)


@dataclass(frozen=True, slots=True)
class _Messages:
    """The last call's messages, their entry hashes and ``ends[i]``, the canonical bytes of
    ``values[: i + 1]`` (the tuple and the entries are the request's and the receipt's own)."""

    values: tuple[Any, ...] = ()
    digests: Entries = field(default_factory=Entries)
    ends: array[int] = field(default_factory=lambda: array("q"))

    def size(self, index: int) -> int:
        return self.ends[index] - (self.ends[index - 1] if index else 0)


@dataclass(slots=True)
class _Pending:
    """What one mint will leave in the memo once it completes."""

    sequences: dict[str, tuple[Piece, ...]] = field(default_factory=dict)
    messages: _Messages | None = None
    chain: tuple[tuple[str, ...], str] | None = None  # (marks, last)
    # Last call's entry hashes, when this mint's start with all of them (the very strings): the
    # chain and ``messages.kept`` then extend them without comparing each (`message_entries`).
    extends: Entries | None = None


class ReceiptDigests:
    """Run-scoped digest memo; thread-safe; pass one per agent (or let the processor keep one per run)."""

    def __init__(self) -> None:
        self._lock = forksafe.rlock(self)
        self._run: tuple[str, bytes | None, int] | None = None
        self._reset()
        # A parent thread may have been half-way through a mint at the fork: the child starts
        # the memo afresh, which changes no receipt (only what the next mint hashes again).
        forksafe.on_fork(self, ReceiptDigests._forget)

    def _reset(self) -> None:
        self._sequences: dict[str, tuple[Piece, ...]] = {}
        self._messages = _Messages()
        # The chain over `_messages.digests`: c_0, c_16, c_32, ... and c_n (n: their count).
        self._marks: tuple[str, ...] = ()
        self._last = ""
        self._current: dict[bytes, str] = {}
        self._previous: dict[bytes, str] = {}
        self._pending = _Pending()

    def _forget(self) -> None:
        self._run = None
        self._reset()

    @property
    def lock(self) -> forksafe.RLock:
        return self._lock

    def begin(self, run_id: str, key: bytes | None, digits: int = DIGITS) -> _Hasher:
        """Start one mint for ``run_id``: a new run (key, or hash length: the scheme) drops
        everything; the same run rotates.
        Until `commit`, `pieces`, `message_entries` and `chain` record their results aside: a mint
        that fails half-way leaves the memo as the last completed mint left it."""
        if self._run != (run_id, key, digits):
            self._run = (run_id, key, digits)
            self._reset()
        else:
            self._previous, self._current = self._current, {}
        self._pending = _Pending()
        return _Hasher(run_id, key, digits)

    def commit(self) -> None:
        """Keep what the current mint recorded (see `begin`)."""
        pending, self._pending = self._pending, _Pending()
        self._sequences.update(pending.sequences)
        if pending.messages is not None:
            self._messages = pending.messages
        if pending.chain is not None:
            self._marks, self._last = pending.chain

    def hash_memo(self, hasher: _Hasher, preimage: bytes) -> str:
        """``H(preimage)``, computed at most once while the preimage keeps recurring."""
        found = self._current.get(preimage)
        if found is None:
            found = self._previous.get(preimage)
            if found is None:
                found = hasher.hash_bytes(preimage)
            self._current[preimage] = found
        return found

    def pieces(
        self,
        hasher: _Hasher,
        name: str,
        values: tuple[Any, ...],
        *,
        keep_body: bool,
    ) -> tuple[Piece, ...]:
        """Canonical size and hash of each value, reusing last call's piece at the same position
        when the value is the same JSON (`same_json`). ``keep_body`` keeps each piece's canonical
        bytes (the system parts', whose list preimage is re-assembled from them every call)."""
        before = self._sequences.get(name, ())
        # The leading items that are last call's very objects keep their pieces, found at C speed.
        same = identical_prefix(list(map(_VALUE, before)), values) if before else 0
        out: list[Piece] = list(before[:same])
        for index in range(same, len(values)):
            value = values[index]
            if index < len(before):
                old = before[index]
                if old.value is value:
                    out.append(old)
                    continue
                if same_json(old.value, value):
                    body = None
                    if keep_body:
                        body = old.body if old.body is not None else hasher.canonical(value)
                    out.append(Piece(value, old.size, old.digest, body))
                    continue
            out.append(make_piece(hasher, value, keep_body))
        pieces = tuple(out)
        self._pending.sequences[name] = pieces
        return pieces

    def message_entries(
        self, hasher: _Hasher, values: tuple[Any, ...], prefix: tuple[Any, ...] | None = None
    ) -> tuple[Entries, int]:
        """The entry hash of each message and their canonical bytes in all, reusing last call's
        for a message that is the same JSON at the same position (`same_json`), as `pieces`.
        ``prefix``: a tuple ``values`` was built to start with (its very objects in front); when
        it is last call's messages, they are known to be the same without looking at each."""
        before = self._messages
        if prefix is not None and before.values is prefix and len(values) >= len(prefix):
            same = len(prefix)
        else:
            # The leading messages that are last call's very objects, found at C speed (yet a
            # Python call per message: for thousands of short messages the hint above matters).
            same = identical_prefix(before.values, values) if before.values else 0
        # Then the messages that are the same JSON as last call's at their place (a request
        # rebuilt from the same dicts, as `Request.from_dict` does each call, has new objects):
        # their entries and sizes are taken in one slice each, not one look-up a message.
        same = _same_run(before.values, values, same)
        ends = before.ends[:same]
        total = ends[-1] if same else 0
        added: list[bytes] = []
        for index in range(same, len(values)):
            value = values[index]
            if index < len(before.values) and same_json(before.values[index], value):
                digest, size = before.digests.raw_at(index), before.size(index)
            else:
                data = hasher.canonical(value)
                digest, size = hasher.hash_raw(data), len(data)
            added.append(digest)
            total += size
            ends.append(total)
        width = hasher.digits // 2  # a new scheme is a new run (`begin`): widths never mix
        # One copy of the raw bytes (a memcpy), where a tuple of strings took a reference each.
        raw = before.digests.raw[: same * width] + b"".join(added)
        if same == len(before.digests):  # the usual append: all of last call's entries lead
            self._pending.extends = before.digests
        kept = _Messages(values, Entries(raw, width), ends)
        self._pending.messages = kept
        return kept.digests, total

    def chain(self, hasher: _Hasher, entries: Entries) -> str:
        """The last chain link ``c_n`` for ``entries`` (what `message_entries` gave this mint),
        extended from the common prefix with last call's."""
        at, link, marks = self._chain_from(hasher, entries)
        kept = list(marks)
        for index in range(at, len(entries)):
            link = chain_step(link, entries[index], hasher.hash_text)
            if (index + 1) % CHECKPOINT == 0:
                kept.append(link)
        self._pending.chain = (tuple(kept), link)
        return link

    def _chain_from(self, hasher: _Hasher, entries: Entries) -> tuple[int, str, tuple[str, ...]]:
        """Where to extend the chain from: ``(i, c_i, checkpoints up to c_i)``."""
        if not self._marks:
            first = chain_start(hasher.hash_text)
            return 0, first, (first,)
        before = self._messages.digests
        same = len(before) if self._pending.extends is before else common_entries(before, entries)
        if same == len(before):
            return same, self._last, self._marks[: same // CHECKPOINT + 1]
        mark = same // CHECKPOINT
        return mark * CHECKPOINT, self._marks[mark], self._marks[: mark + 1]

    def kept(self, parent: Sequence[str] | None, entries: Entries) -> int:
        """How many leading ``entries`` (this mint's) equal the ``parent`` receipt's."""
        if not parent:
            return 0
        extends = self._pending.extends
        if extends is not None and parent is extends:
            return len(extends)
        return common_entries(parent, entries)

    def retained(self) -> int:
        """How many memo records are held now (see the module docstring for the bound)."""
        with self._lock:
            records = sum(len(seq) for seq in self._sequences.values())
            records += len(self._messages.digests)
            # The checkpoints, and the last link when it is not one of them.
            links = len(self._marks) + bool(len(self._messages.digests) % CHECKPOINT)
            return records + links + len(self._current) + len(self._previous)


def make_piece(hasher: _Hasher, value: Any, keep_body: bool) -> Piece:
    """Canonicalize and hash ``value``, keeping its bytes if asked."""
    data = hasher.canonical(value)
    return Piece(value, len(data), hasher.hash_bytes(data), data if keep_body else None)


def chain_start(hash_text: Callable[[str], str]) -> str:
    """The messages chain's first link, ``c_0 = H(CHAIN_SEED)``, under the run's salted hash."""
    return hash_text(CHAIN_SEED)


def chain_step(link: str, entry: str, hash_text: Callable[[str], str]) -> str:
    """The link after ``link`` for message entry ``entry``: ``c_i = H(c_{i-1} + "\\x1f" + e_i)``."""
    return hash_text(link + "\x1f" + entry)


def _same_run(before: tuple[Any, ...], values: tuple[Any, ...], start: int) -> int:
    """Where the run of ``values`` from ``start`` that are the same JSON as ``before``'s at their
    place ends (`same_json`, one guard around the run rather than one a message)."""
    end = min(len(before), len(values))
    at = start
    try:
        while at < end:
            old, new = before[at], values[at]
            if old is not new and not _same(old, new):
                break
            at += 1
    except Exception:  # as `same_json`: not the same, recomputed
        pass
    return at


def same_json(old: Any, new: Any) -> bool:
    """True only if ``new`` canonicalizes to the same bytes as ``old``, which canonicalized fine.

    ``==`` is not enough: ``True == 1 == 1.0`` while JCS writes ``true`` and ``1``, and an object
    with a permissive ``__eq__`` equals anything. So scalars must be of the same plain type; long
    containers must be ``==`` and have equal orjson bytes (orjson tells ``true`` from ``1``, and
    ``==`` tells NaN from null); anything unusual is not the same (it is simply recomputed). Never
    raises.
    """
    try:
        return old is new or _same(old, new)
    except Exception:  # a hostile __eq__ or __len__, recursion: recompute rather than guess
        return False


def _same(old: Any, new: Any) -> bool:
    # Exact-type tests first: this runs for every message of every call, so the common shapes
    # (FrozenDict/dict, tuple/list, str) are tested without isinstance or method lookups.
    kind = type(old)
    if kind in _MAPPINGS or (kind not in _SCALARS and isinstance(old, dict)):
        if not isinstance(new, dict) or len(old) != len(new):
            return False
        if len(old) > _WALK_LIMIT:
            return _same_bytes(old, new)
        for key, item in _ITEMS(old):
            other = _GET(new, key, _MISSING)
            if item is other:
                continue
            # A scalar that is not the very object, and a short list's items (a message's
            # parts), are tested here without a call of their own: a message is one call.
            inner = type(item)
            if inner in _SCALARS:
                if type(other) is not inner or not bool(item == other):
                    return False
            elif inner is tuple and type(other) is tuple and len(item) <= _WALK_LIMIT:
                if len(item) != len(other):
                    return False
                # Lengths are equal (tested): zip's strict= would parse a keyword every call.
                for older, newer in zip(item, other):  # noqa: B905
                    if older is newer:
                        continue
                    if (
                        type(older) is FrozenDict
                        and type(newer) is FrozenDict
                        and len(older) == len(newer) <= _WALK_LIMIT
                    ):
                        for name, value in _ITEMS(older):
                            was = _GET(newer, name, _MISSING)
                            if value is not was and not _same(value, was):
                                return False
                    elif not _same(older, newer):
                        return False
            elif not _same(item, other):
                return False
        return True
    if kind in _SCALARS:
        return type(new) is kind and bool(old == new)
    if kind is tuple or kind is list or isinstance(old, list | tuple):
        if not isinstance(new, list | tuple) or len(old) != len(new):
            return False
        if len(old) > _WALK_LIMIT:
            return _same_bytes(old, new)
        for item, other in zip(old, new):  # noqa: B905 - lengths equal, as above
            if item is not other and not _same(item, other):
                return False
        return True
    return old is new  # None; enums, UUIDs, subclasses of scalars: recompute unless identical


def _same_bytes(old: Any, new: Any) -> bool:
    return bool(old == new) and orjson.dumps(old) == orjson.dumps(new)
