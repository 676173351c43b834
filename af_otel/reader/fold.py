"""The keyed fold: a run's state at any epoch, from its base and the commits along the epoch's path.

A run's log is a tree (parallel calls share a parent), so epoch k's state is the base with the
commits of every epoch on the path base -> ... -> parent(k) -> k applied in order. Folding that
whole path again for every epoch costs the square of the run's length; `KeyedFold` instead indexes
the writes per key and answers ``value_at(key, k)`` from the nearest epoch on k's path that wrote
the key, replaying only from the nearest whole-value write (``set`` or ``delete``) or memoized
answer above it. The tests hold it equal to the plain definition (the whole path, every time).

Answers are shared between epochs (epoch k's messages tuple is its parent's plus the new ones) and
memoized, so they are immutable all the way down: payloads are frozen on the way in (`freeze`),
and every verb builds a new value instead of changing the one before it.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from af_otel import forksafe
from af_otel.model import FrozenDict
from af_otel.model.prefix import common_prefix
from af_otel.names import CommitVerb

__all__ = [
    "ABSENT",
    "UNKNOWN",
    "ChainedTuple",
    "Commit",
    "KeyedFold",
    "Marker",
    "apply_verb",
    "freeze",
    "replay",
]


class Marker(enum.Enum):
    """Values the fold can hold that are not JSON: a key not in the state, or one whose value
    is not on record (a payload withheld or lost), which later appends cannot repair."""

    ABSENT = "absent"
    UNKNOWN = "unknown"

    def __repr__(self) -> str:
        return self.value.upper()


ABSENT: Final = Marker.ABSENT
UNKNOWN: Final = Marker.UNKNOWN


class ChainedTuple(Sequence[Any]):
    """An immutable list that is an earlier list plus a tail, holding the earlier one by reference.

    Epoch k's messages are its parent's plus the few it added; a tuple per epoch would hold the
    conversation once per epoch (the square of its length in memory, and in garbage-collector
    work). A chain holds only its tail. Tails are merged as a binary counter carries: extending a
    chain whose top tail stands for no more extensions than the new one joins the two (and so on
    down), so a chain built by m extensions is as many links deep as m has one bits (at most
    about log2(m)), and over the whole run each item is copied at most about log2(m) times.
    Copying the earlier list every few links instead bounds the depth too, but copies the run's
    history once per few epochs: the square of its length again. It reads like a tuple: ``len``,
    indexing, slices (returned as tuples), iteration, ``==`` with tuples and chains, ``hash``,
    ``+`` a tuple."""

    __slots__ = ("_head", "_size", "_split", "_tail", "_weight")
    _head: tuple[Any, ...] | ChainedTuple
    _tail: tuple[Any, ...]
    _split: int
    _size: int
    _weight: int  # how many extensions ``_tail`` holds: always a power of two

    def __init__(
        self, head: tuple[Any, ...] | ChainedTuple, tail: tuple[Any, ...], weight: int
    ) -> None:
        # Five calls spelled out, not a loop over pairs: a view and its check build several.
        setter = object.__setattr__
        split = len(head)
        setter(self, "_head", head)
        setter(self, "_tail", tail)
        setter(self, "_split", split)
        setter(self, "_size", split + len(tail))
        setter(self, "_weight", weight)

    @staticmethod
    def extend(before: Sequence[Any], tail: tuple[Any, ...]) -> tuple[Any, ...] | ChainedTuple:
        """``before`` followed by ``tail``, sharing ``before`` but for the top tails the new one
        is merged with."""
        if not tail:
            return before if isinstance(before, tuple | ChainedTuple) else tuple(before)
        if not before:
            return tail
        if not isinstance(before, ChainedTuple):
            return ChainedTuple(before if isinstance(before, tuple) else tuple(before), tail, 1)
        head: tuple[Any, ...] | ChainedTuple = before
        weight = 1
        pieces = [tail]
        while isinstance(head, ChainedTuple) and head._weight <= weight:
            pieces.append(head._tail)
            weight += head._weight
            head = head._head
        if len(pieces) > 1:
            pieces.reverse()
            tail = tuple(itertools.chain.from_iterable(pieces))
        return ChainedTuple(head, tail, weight)

    @property
    def head(self) -> tuple[Any, ...] | ChainedTuple:
        """The list this one's tail follows: the one it extended, or an earlier one whose
        followers' tails were merged into this one's."""
        return self._head

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ChainedTuple is immutable")

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._size)
            if step != 1:
                return tuple(self)[index]
            return self._part(start, max(start, stop))
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError("ChainedTuple index out of range")
        node: Any = self
        while isinstance(node, ChainedTuple):
            if index >= node._split:
                return node._tail[index - node._split]
            node = node._head
        return node[index]

    def _part(self, start: int, stop: int) -> tuple[Any, ...]:
        """Items ``start`` to ``stop``, copying only the tails that hold them."""
        pieces: list[tuple[Any, ...]] = []
        node: Any = self
        while isinstance(node, ChainedTuple) and stop > start:
            if stop > node._split:
                pieces.append(node._tail[max(start - node._split, 0) : stop - node._split])
                stop = node._split
            node = node._head
        if stop > start:
            pieces.append(node[start:stop])
        if len(pieces) == 1:
            return pieces[0]
        pieces.reverse()
        return tuple(itertools.chain.from_iterable(pieces))

    @staticmethod
    def common_prefix(new: Sequence[Any], old: Sequence[Any]) -> int:
        """`af_otel.model.prefix.common_prefix` of two lists, chains or not, comparing only what
        they do not hold by reference in common: an epoch's list and its parent's share all but
        the top tails the extension merged, so this costs about what that merge copied, not the
        conversation."""
        held = {id(link): link for link in _links(old)}
        known = next((len(link) for link in _links(new) if held.get(id(link)) is link), 0)
        size = min(len(new), len(old))
        if known >= size:
            return size
        return known + common_prefix(_part(new, known, size), _part(old, known, size))

    def __iter__(self) -> Iterator[Any]:
        segments: list[tuple[Any, ...]] = []
        node: Any = self
        while isinstance(node, ChainedTuple):
            segments.append(node._tail)
            node = node._head
        segments.append(node)
        segments.reverse()
        return itertools.chain.from_iterable(segments)  # iterates at C speed

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, ChainedTuple | tuple):
            size = self._size
            return len(other) == size and ChainedTuple.common_prefix(self, other) == size
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: tuple[Any, ...]) -> tuple[Any, ...] | ChainedTuple:
        if not isinstance(other, tuple | ChainedTuple):
            return NotImplemented
        return ChainedTuple.extend(self, tuple(other))

    def __radd__(self, other: tuple[Any, ...]) -> tuple[Any, ...]:
        if not isinstance(other, tuple):
            return NotImplemented
        return other + tuple(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (tuple(self),))

    def __repr__(self) -> str:
        return f"ChainedTuple({tuple(self)!r})"


def _links(value: Sequence[Any]) -> Iterator[Sequence[Any]]:
    """``value``, then each list it holds by reference, down to the tuple it starts from."""
    while isinstance(value, ChainedTuple):
        yield value
        value = value.head
    yield value


def _part(value: Sequence[Any], start: int, stop: int) -> tuple[Any, ...]:
    if isinstance(value, ChainedTuple):
        return value._part(start, stop)
    return tuple(value[start:stop])


_LEAVES: Final = frozenset({str, int, float, bool, type(None)})


def freeze(value: Any) -> Any:
    """A deep immutable form of a JSON value: objects become `FrozenDict`, arrays tuples.

    Canonical JSON and ``==`` see the same value, so hashes taken over the frozen form are the
    hashes of the JSON it came from. Parts that are already frozen (a `FrozenDict` or tuple whose
    contents are) are returned as they are, not copied."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is FrozenDict:
        body: dict[str, Any] | None = None
        for key, item in value.items():
            if type(item) in _LEAVES:
                if body is not None:
                    body[key] = item
                continue
            frozen = freeze(item)
            if body is None and frozen is not item:
                body = {k: v for k, v in value.items() if k != key}  # rebuilt, order aside
            if body is not None:
                body[key] = frozen
        return value if body is None else FrozenDict(body)
    if kind is tuple:
        items: list[Any] | None = None
        for index, item in enumerate(value):
            frozen = item if type(item) in _LEAVES else freeze(item)
            if items is None and frozen is not item:
                items = list(value[:index])
            if items is not None:
                items.append(frozen)
        return value if items is None else tuple(items)
    if isinstance(value, Mapping):
        return FrozenDict({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(item) for item in value)
    return value


@dataclass(frozen=True, slots=True)
class Commit:
    """One change of one key, its payload already decoded and frozen.

    ``value`` is a tuple for ``append``, anything for ``set`` and
    `ABSENT` for ``delete``; `UNKNOWN` for a payload that is not on record."""

    seq: int
    key: str
    verb: CommitVerb
    value: Any = ABSENT

    def __post_init__(self) -> None:
        value = self.value
        if self.verb == "delete":
            if value is not ABSENT:
                raise ValueError(f"commit {self.seq}: delete carries no value")
        elif value is ABSENT:
            raise ValueError(f"commit {self.seq}: {self.verb} needs a value")
        elif self.verb == "append" and not (value is UNKNOWN or isinstance(value, tuple)):
            raise ValueError(f"commit {self.seq}: append needs a list, got {type(value).__name__}")

    @property
    def anchors(self) -> bool:
        """A whole-value write: nothing written to the key before it matters after it."""
        return self.verb != "append"


def apply_verb(verb: CommitVerb, before: Any, payload: Any) -> Any:
    """The key's value after one commit. Total: every verb has an answer for every ``before``.

    ``append`` onto a value that is not a list (or is absent) starts the list with the payload;
    onto `UNKNOWN` it stays `UNKNOWN` (part of the value is not on record, so no part of it is
    claimed)."""
    if verb == "set":
        return payload
    if verb == "delete":
        return ABSENT
    if payload is UNKNOWN or before is UNKNOWN:
        return UNKNOWN
    return ChainedTuple.extend(before, payload) if _is_list(before) else payload


def replay(writes: Sequence[Commit], value: Any) -> Any:
    """``value`` after ``writes`` (one key's, in order), as `apply_verb` one by one gives it.

    A run of appends becomes one concatenation: an epoch that appends sixteen messages one commit
    each copies the conversation once, not sixteen times."""
    tail: list[Any] = []
    for commit in writes:
        if commit.verb == "append" and commit.value is not UNKNOWN and value is not UNKNOWN:
            if not _is_list(value):
                value = ()  # an append onto a non-list starts the list
            tail.extend(commit.value)
            continue
        if tail:
            value = ChainedTuple.extend(value, tuple(tail))
            tail = []
        value = apply_verb(commit.verb, value, commit.value)
    if tail:
        value = ChainedTuple.extend(value, tuple(tail))
    return value


def _is_list(value: Any) -> bool:
    return isinstance(value, tuple | ChainedTuple)


class KeyedFold:
    """Per-key index of a run's writes; ``value_at(key, epoch)`` replays from the nearest anchor.

    ``parents`` maps every epoch to its parent (0 is the base); each parent must be 0 or a smaller
    epoch that is also a key, which makes the log a tree. ``commits`` holds each epoch's own
    commits in ``seq`` order. Answers are memoized per (key, writing epoch), so reading every key
    at every epoch costs each commit once. The memo is safe to share between threads: two threads
    computing the same answer produce equal values and either may be kept.
    """

    def __init__(
        self,
        base: Mapping[str, Any],
        parents: Mapping[int, int],
        commits: Mapping[int, Sequence[Commit]],
    ) -> None:
        for epoch, parent in parents.items():
            if not (parent == 0 or (parent in parents and parent < epoch)):
                raise ValueError(f"epoch {epoch}: parent {parent} is not 0 or an earlier epoch")
        self._base = MappingProxyType({k: freeze(v) for k, v in base.items()})
        self._parents = dict(parents)
        # key -> epoch -> that epoch's commits on the key, and where its last anchor is (-1: none)
        self._touches: dict[str, dict[int, tuple[tuple[Commit, ...], int]]] = {}
        for epoch, own in commits.items():
            if epoch not in self._parents:
                raise ValueError(f"commits for epoch {epoch}, which has no parent")
            by_key: dict[str, list[Commit]] = {}
            for commit in own:
                by_key.setdefault(commit.key, []).append(commit)
            for key, writes in by_key.items():
                anchor = max((i for i, c in enumerate(writes) if c.anchors), default=-1)
                self._touches.setdefault(key, {})[epoch] = (tuple(writes), anchor)
        self._nearest: dict[str, dict[int, int]] = {}
        self._values: dict[tuple[str, int], Any] = {}
        self._lock = forksafe.lock(self)
        self.replayed = 0  # commits applied so far: what the tests count to prove the keyed cost

    @property
    def base(self) -> Mapping[str, Any]:
        return self._base

    @property
    def epochs(self) -> Iterable[int]:
        return self._parents.keys()

    def keys(self) -> frozenset[str]:
        """Every key the base holds or any commit writes."""
        return frozenset(self._base) | frozenset(self._touches)

    def writer(self, key: str, epoch: int) -> int:
        """The nearest epoch on ``epoch``'s path (itself included) that wrote ``key``; 0 if none."""
        touched = self._touches.get(key)
        if not touched:
            return 0
        memo = self._nearest.setdefault(key, {})
        walked: list[int] = []
        at = epoch
        while at != 0 and at not in touched:
            found = memo.get(at)
            if found is not None:
                at = found
                break
            walked.append(at)
            at = self._parents[at]
        for step in walked:
            memo[step] = at
        return at

    def value_at(self, key: str, epoch: int) -> Any:
        """``key``'s value in the state after ``epoch`` (0: the base); `ABSENT` if not there."""
        if epoch != 0 and epoch not in self._parents:
            raise KeyError(f"no epoch {epoch} in this run")
        at = self.writer(key, epoch)
        if at == 0:
            return self._base.get(key, ABSENT)
        found = self._values.get((key, at), _MISSING)
        if found is not _MISSING:
            return found
        touched = self._touches[key]
        # Walk up the writers of this key to a memoized answer, an anchor, or the base.
        chain: list[int] = []
        value: Any = ABSENT
        while True:
            chain.append(at)
            if touched[at][1] >= 0:
                break
            above = self.writer(key, self._parents[at])
            if above == 0:
                value = self._base.get(key, ABSENT)
                break
            found = self._values.get((key, above), _MISSING)
            if found is not _MISSING:
                value = found
                break
            at = above
        for step in reversed(chain):
            writes, anchor = touched[step]
            value = replay(writes[max(anchor, 0) :], value)
            with self._lock:
                self.replayed += len(writes) - max(anchor, 0)
                self._values[(key, step)] = value
        return value

    def extends_parent(self, key: str, epoch: int) -> bool:
        """Whether ``key``'s value at ``epoch`` is its parent's value with items appended (or the
        parent's value itself): then the parent's whole list is a prefix of it, element for
        element, and nobody needs to compare the two to know."""
        touched = self._touches.get(key, {}).get(epoch)
        if touched is None:
            return True
        writes, anchor = touched
        return anchor < 0 and all(c.verb == "append" and c.value is not UNKNOWN for c in writes)


_MISSING: Final = object()
