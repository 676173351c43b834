"""Per-run state of the emit path: epoch numbering, finished calls, commit sequence, base.

One `RunState` per run id, kept in a `RunTable` bounded two ways: at most
``max_runs`` runs (least recently used evicted first) and none idle longer than ``idle_seconds``.
A run evicted (or released) while still live starts afresh if it comes back: in a new lane
(``af.epoch.lane``), numbered from 1 again, diffing against a base of its own; the reader joins
the lanes of a run into one tree by content, as it does for lanes written by other processes. Within a run, memory is bounded too: the requests of the last `STATE_DEPTH` finished
calls (the only ones a new call can diff against cheaply) and the end times of the last
`HISTORY_DEPTH` (enough to name a parent for any call that overlaps fewer calls than that).
"""

from __future__ import annotations

import bisect
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar, cast

from af_otel import forksafe
from af_otel.model import Request
from af_otel.model.frozen_copy import replaced
from af_otel.model.prefix import identical_prefix
from af_otel.processor.dedupe import RECENT, Opened, Seen
from af_otel.processor.explicit_memo import Explicit
from af_otel.processor.history import History, share_history
from af_otel.processor.wire_source import Compared, Projected
from af_otel.receipts import Receipt, ReceiptDigests
from af_otel.semconv.incremental import Remembered
from af_otel.wire.tail import Layout

_Items = TypeVar("_Items", bound=Sequence[Any])
MAX_RUNS: Final = 10_000
MAX_BYTES: Final = 256 * 1024 * 1024
# What one run costs beyond its history (locks, memo records, the finished-call list).
RUN_OVERHEAD: Final = 4096
# A record's own slots plus its af-2 digest (32 raw bytes), which it keeps for life (an estimate
# from above: the table's budget must hold).
FINISHED_OVERHEAD: Final = 280
IDLE_SECONDS: Final = 3600.0
STATE_DEPTH: Final = 16
HISTORY_DEPTH: Final = 256


class Finished:
    """One finished call: when it ended, its receipt's digest (for life: a later call that grows
    from it binds it, docs/receipt-spec.md §12.3), and (while recent) what it was sent and its
    receipt. Its messages and entries are the first ``count`` of its `History`'s, which later
    calls that extend it share (`RunState.finish`)."""

    __slots__ = ("_digest", "_history", "_receipt", "_request", "count", "end_time", "epoch")

    def __init__(
        self,
        end_time: int,
        epoch: int,
        request: Request | None,
        receipt: Receipt | None,
        digest: str | None = None,
    ) -> None:
        self.end_time = end_time
        self.epoch = epoch
        digest = receipt.digest if receipt is not None else digest
        # Kept as its raw bytes (a record keeps it for life, HISTORY_DEPTH of them a run): the
        # hex text is lowercase hex by construction, so `digest` reads it back unchanged.
        self._digest = bytes.fromhex(digest) if digest else None
        entries = receipt.entries if receipt is not None else None
        self._history = History(request.messages, entries) if request is not None else None
        self.count = len(request.messages) if request is not None else 0
        # Kept without the tuples the history holds, which are later calls' soon.
        self._request = replaced(request, messages=()) if request is not None else None
        self._receipt = receipt
        if receipt is not None and entries is not None and self._history is not None:
            self._receipt = replaced(receipt, entries=None)

    @property
    def digest(self) -> str | None:
        """The call's receipt digest (hex), or None without one."""
        return self._digest.hex() if self._digest is not None else None

    @property
    def request(self) -> Request | None:
        """The request the call was sent, with its own messages."""
        if self._request is None or self._history is None:
            return None
        return replaced(self._request, messages=_first(self._history.messages, self.count))

    @property
    def receipt(self) -> Receipt | None:
        """The call's receipt, with its own entries."""
        if self._receipt is None or self._history is None or self._history.entries is None:
            return self._receipt
        return replaced(self._receipt, entries=_first(self._history.entries, self.count))

    @property
    def size(self) -> int:
        """The canonical bytes of the call's request (0 when it keeps none)."""
        return self._receipt.bytes if self._receipt is not None else 0

    def messages(self) -> tuple[tuple[Any, ...], int] | None:
        """The tuple holding the call's messages in front, and how many they are."""
        if self._request is None or self._history is None:
            return None
        return self._history.messages, self.count

    def forget(self) -> Finished:
        """The record without its request and receipt (its digest stays)."""
        return Finished(self.end_time, self.epoch, None, None, self.digest)


def _first(items: _Items, count: int) -> _Items:
    return items if len(items) == count else cast(_Items, items[:count])


@dataclass(frozen=True, slots=True)
class Base:
    """The state a run started from: its store address, request and epoch-0 pseudo receipt."""

    address: str
    request: Request
    receipt: Receipt | None


@dataclass(slots=True, weakref_slot=True)
class RunState:
    """Mutable state of one run; every access holds ``lock``."""

    run_id: str
    # This state's ``af.epoch.lane``: 64 random bits, so writers that do not share this state (other
    # processes, a restarted or forked one, this one after the run was freed) never share a lane.
    lane: str = field(default_factory=lambda: secrets.token_hex(8))
    lock: forksafe.Lock = field(init=False)
    digests: ReceiptDigests = field(default_factory=ReceiptDigests)
    last_epoch: int = 0
    last_seq: int = 0
    # span key -> (epoch, numbered out of start order) for calls numbered but not finished yet
    open_calls: dict[tuple[int, int], tuple[int, bool]] = field(default_factory=dict)
    latest_start: int = 0  # the greatest start time among numbered calls
    # finished calls sorted by end time; only the last STATE_DEPTH keep their request
    finished: list[Finished] = field(default_factory=list)
    base: Base | None = None
    started_empty: bool = False  # the first call decided the run has no base
    release_requested: bool = False
    touched: float = field(default_factory=time.monotonic)
    seen: Remembered | None = None  # what the last readable call was read from (incremental.py)
    # The layouts of the run's last bodies seen on the wire, newest first (af_otel.wire.tail).
    layouts: tuple[Layout, ...] = ()
    explicit: Explicit | None = None  # the last `llm_call` messages (explicit_memo.py)
    compared: Compared | None = None  # the last record compared with its body (wire_source.py)
    projected: Projected | None = None  # the same, each seen through its projection (same)
    charged: int = 0  # the bytes the table counts for this run (see `weight`)
    # The highest epoch finished so far and its receipt digest ("" without one), for the run's
    # close record (`af_otel.processor.closing`).
    last_call: tuple[int, str] = (0, "")
    # Where that call sits: its trace id and its parent span id (0: none), so the close record
    # lands beside it in its trace.
    last_place: tuple[int, int] = (0, 0)

    def finished_call(
        self, epoch: int, digest: str | None, place: tuple[int, int] | None = None
    ) -> None:
        """Note that the call numbered ``epoch`` finished with ``digest``; the highest is kept."""
        if epoch > self.last_call[0]:
            self.last_call = (epoch, digest or "")
            if place is not None:
                self.last_place = place

    def weight(self) -> int:
        """The bytes this run holds, estimated from what it keeps: its calls share one copy of
        the history (`History`), counted at 2.5 times the canonical size of its longest request
        kept (Python objects and digests: under 2 times at 120 turns, more in a short run, as
        benchmarks/processor.py measures them); what it recognises the next call by is a digest,
        or for a body seen on the wire (and an `llm_call`'s messages) the last bytes themselves,
        counted whole."""
        largest = max((record.size for record in self.finished[-STATE_DEPTH:]), default=0)
        if self.base is not None and self.base.receipt is not None:
            largest = max(largest, self.base.receipt.bytes or 0)
        bodies = sum(len(layout.body) for layout in self.layouts)
        bodies += self.explicit.size if self.explicit is not None else 0
        return RUN_OVERHEAD + FINISHED_OVERHEAD * len(self.finished) + 5 * largest // 2 + bodies

    # The last finished calls, for folding a second record of one call (dedupe.py).
    recent: deque[Seen] = field(default_factory=lambda: deque(maxlen=RECENT))
    opened: Opened | None = None  # the call last numbered at its start (dedupe.number_at_start)

    def __post_init__(self) -> None:
        self.lock = forksafe.lock(self)

    def number(
        self, key: tuple[int, int], start_time: int, *, at_start: bool = False
    ) -> tuple[int, bool]:
        """Give the call ``key`` the next epoch; also say whether that breaks start order (a call
        that started earlier than one already numbered is numbered after it).

        ``at_start``: numbered in ``on_start``. Two calls starting on two threads at once can be
        numbered in either order, but neither can be the other's parent (a parent ends before its
        child starts, so it was numbered before the child began), so that is not a break."""
        found = self.open_calls.get(key)
        if found is not None:
            return found
        self.last_epoch += 1
        out_of_order = not at_start and start_time < self.latest_start
        self.latest_start = max(self.latest_start, start_time)
        self.open_calls[key] = (self.last_epoch, out_of_order)
        return self.last_epoch, out_of_order

    def parent_of(
        self,
        start_time: int,
        request: Request | None = None,
        prefix: tuple[Any, ...] | None = None,
    ) -> Finished | None:
        """The call this one grew from, among the calls that finished before ``start_time``: the
        one whose messages are the longest prefix of ``request``'s (ties: the latest finished).

        Calls that overlap (a fan-out) finish after each other started, so none is another's
        parent and the log is a tree; after a fan-in the follow-up names the call its messages
        extend, not whichever parallel call happened to finish last. Only the calls still holding
        their request (the last `STATE_DEPTH`) can be compared; when none of them is a prefix (or
        this call's request is unknown) the call that finished last is named, so the commits
        still diff against a state the run holds. ``prefix``: a tuple the request's messages were
        built to start with (incremental.py), which is a prefix without comparing it again."""
        at = bisect.bisect_right(self.finished, start_time, key=_end_time)
        if not at:
            return None
        if request is not None:
            kept = self.finished[max(0, len(self.finished) - STATE_DEPTH) : at]
            found = _longest_prefix(kept, request.messages, prefix)
            if found is not None:
                return found
        return self.finished[at - 1]

    def finish(
        self, key: tuple[int, int], record: Finished, prefix: tuple[Any, ...] | None = None
    ) -> None:
        """Keep ``record``. ``prefix``: a tuple its messages were built to start with (the run's
        last call's, incremental.py): the recent calls whose `History` holds that tuple share
        it with this call, which holds the very same messages in front (and its entries, when
        they start with theirs)."""
        self.open_calls.pop(key, None)
        if prefix is not None:
            self._share(record, prefix)
        bisect.insort_right(self.finished, record, key=_end_time)
        if len(self.finished) > HISTORY_DEPTH:
            del self.finished[0]
        # Only the newest STATE_DEPTH records keep requests; forget the one that just fell out.
        if len(self.finished) > STATE_DEPTH:
            self.finished[-STATE_DEPTH - 1] = self.finished[-STATE_DEPTH - 1].forget()

    def _share(self, record: Finished, prefix: tuple[Any, ...]) -> None:
        mine = record._history
        if mine is None:
            return
        histories = (old._history for old in reversed(self.finished[-STATE_DEPTH:]))
        shared = share_history(histories, prefix, mine.messages, mine.entries)
        if shared is not None:
            record._history = shared

    def next_seq(self) -> int:
        self.last_seq += 1
        return self.last_seq


def _end_time(record: Finished) -> int:
    return record.end_time


def _longest_prefix(
    finished: list[Finished], messages: tuple[Any, ...], prefix: tuple[Any, ...] | None = None
) -> Finished | None:
    """The latest-finished record of the longest message list that ``messages`` starts with."""
    best: Finished | None = None
    best_size = -1
    for record in reversed(finished):  # latest first, so a tie keeps the latest
        found = record.messages()
        if found is None:
            continue
        theirs, size = found  # the record's messages are theirs[:size]
        if size <= best_size or size > len(messages):
            continue
        if theirs is prefix and size == len(prefix):
            best, best_size = record, size
            continue
        # The last message first: a sibling branch differs there, and most candidates go.
        if size and not _same(theirs[size - 1], messages[size - 1]):
            continue
        if identical_prefix(theirs[:size], messages) == size or all(
            _same(a, b) for a, b in zip(theirs[:size], messages, strict=False)
        ):
            best, best_size = record, size
    return best


def _same(a: Any, b: Any) -> bool:
    return a is b or bool(a == b)


class RunTable:
    """Run id -> `RunState`, LRU-bounded and idle-expired; thread-safe."""

    def __init__(
        self,
        max_runs: int = MAX_RUNS,
        idle_seconds: float = IDLE_SECONDS,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.max_runs = max_runs
        self.idle_seconds = idle_seconds
        self.max_bytes = max_bytes
        self._runs: OrderedDict[str, RunState] = OrderedDict()
        self._lock = forksafe.lock(self)
        forksafe.on_fork(self, RunTable._forget_runs)
        self._bytes = 0  # the sum of the runs' `charged`
        self.evicted = 0  # runs dropped for the bounds (count, bytes, idle), for benchmarks

    @property
    def bytes(self) -> int:
        """The bytes the table counts now (the sum of its runs' weights when they last settled)."""
        with self._lock:
            return self._bytes

    def get(self, run_id: str) -> RunState:
        """The run's state, created when new; expires idle runs and evicts past the bound."""
        now = time.monotonic()
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                run = RunState(run_id)
                self._runs[run_id] = run
            else:
                self._runs.move_to_end(run_id)
            run.touched = now
            self._expire(now)
            return run

    def peek(self, run_id: str) -> RunState | None:
        """The run's state if the table holds it; neither created nor touched."""
        with self._lock:
            return self._runs.get(run_id)

    def release(self, run_id: str) -> None:
        """Free a run whose root span ended (or whose `af_otel.run` block exited); a run with
        calls still open is freed when its last open call finishes."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                return
            if run.open_calls:
                run.release_requested = True
            else:
                self._drop(run_id)

    def settle(self, run: RunState) -> None:
        """After a call finished: free its run if a release was waiting for it, else count what
        it holds now and evict least recently used runs while the table is over ``max_bytes``
        (never the run that just settled: a single run larger than the budget stays)."""
        weight = run.weight()
        with self._lock:
            if self._runs.get(run.run_id) is not run:
                return
            if run.release_requested and not run.open_calls:
                self._drop(run.run_id)
                return
            self._bytes += weight - run.charged
            run.charged = weight
            while self._bytes > self.max_bytes and len(self._runs) > 1:
                oldest = next(iter(self._runs))
                if oldest == run.run_id:
                    self._runs.move_to_end(oldest)
                    oldest = next(iter(self._runs))
                self._drop(oldest)
                self.evicted += 1

    def _forget_runs(self) -> None:
        """In a forked child: no runs. Another parent thread may have been half-way through one,
        and the calls still open in them are the parent's threads', which the child does not have;
        a run the child carries on restarts at epoch 1 in a new lane (docs/processor.md)."""
        self._runs = OrderedDict()
        self._bytes = 0

    def _drop(self, run_id: str) -> None:
        run = self._runs.pop(run_id)
        self._bytes -= run.charged
        run.charged = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)

    def _expire(self, now: float) -> None:
        while len(self._runs) > self.max_runs:
            self._drop(next(iter(self._runs)))
            self.evicted += 1
        while self._runs:
            oldest = next(iter(self._runs.values()))
            if now - oldest.touched <= self.idle_seconds:
                break
            self._drop(oldest.run_id)
            self.evicted += 1
