"""Bodies sent where no LLM span was current, kept by trace for a span that ends later
(docs/processor.md, Late pairing): LiteLLM's OpenTelemetry callback writes its span after the
call with a back-dated start, and under the exporter no span start is seen, so a body may have
no span to go to when it is sent. It waits here, and an LLM span of the same trace (or, for a
body sent with no trace at all, a root span) may claim it at its end; the rule that decides is
`af_otel.processor.wire_source`'s, this table only keeps and hands out.

Bounded so that it never grows with the process: at most 8 bodies a trace, 256 traces and
16 MiB, none older than 60 seconds (a span written after its call ends within the call's own
logging, and the exporter's batches within their delay), oldest out first. In the exporter form
an LLM span that has ended waits for its batch: its `RunTagger` holds the bodies of its trace
sent within its window (`hold`) until the exporter has it (`release`), and a held body counts
against neither the 8 nor the 60 seconds (at most 64 bodies a trace and 1,024 holds all the
same; the trace and byte bounds never give way). One short lock, made by `af_otel.forksafe`; a
forked child starts empty.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from af_otel import forksafe
from af_otel.wire.sent import Key, Sent

MAX_PER_TRACE: Final = 8
MAX_TRACES: Final = 256
MAX_BYTES: Final = 16 * 1024 * 1024
MAX_AGE_NS: Final = 60 * 1_000_000_000
MAX_KEPT_PER_TRACE: Final = 64  # held ones included
MAX_HOLDS: Final = 1024


@dataclass(frozen=True, slots=True, eq=False)  # one kept body is itself only (identity)
class Kept:
    """A body waiting for its span: the span it is filed under too (the one current when it was
    sent, or started last there; None: no span), and when it was kept (monotonic ns)."""

    sent: Sent
    key: Key | None
    kept_at: int


class LooseTable:
    """Bodies by the trace they were sent in (0: none), oldest trace out first (bounds above)."""

    def __init__(self) -> None:
        self._lock = forksafe.lock(self)
        self._traces: OrderedDict[int, list[Kept]] = OrderedDict()
        self._bytes = 0
        # Spans that hold bodies, oldest first: each trace's windows (start, end) by span.
        self._holds: OrderedDict[Key, tuple[int, ...]] = OrderedDict()
        self._windows: dict[int, dict[Key, tuple[int, int]]] = {}
        forksafe.on_fork(self, LooseTable._clear)

    def add(self, trace: int, sent: Sent, key: Key | None) -> None:
        now = time.monotonic_ns()
        with self._lock:
            kept = self._traces.get(trace)
            if kept is None:
                kept = self._traces[trace] = []
            else:
                self._traces.move_to_end(trace)
            kept.append(Kept(sent, key, now))
            self._bytes += len(sent.body)
            if len(kept) > MAX_PER_TRACE:
                self._bound_trace(trace, kept)
            while self._traces and (len(self._traces) > MAX_TRACES or self._bytes > MAX_BYTES):
                _, dropped = self._traces.popitem(last=False)
                self._bytes -= sum(len(k.sent.body) for k in dropped)

    def _bound_trace(self, trace: int, kept: list[Kept]) -> None:
        """Drop ``trace``'s oldest body no span holds once more than 8 are not held (its oldest
        body at all past 64)."""
        free = [i for i, k in enumerate(kept) if not self._held(trace, k)]
        if len(free) > MAX_PER_TRACE or len(kept) > MAX_KEPT_PER_TRACE:
            index = free[0] if len(free) > MAX_PER_TRACE else 0
            self._bytes -= len(kept.pop(index).sent.body)

    def _held(self, trace: int, kept: Kept) -> bool:
        windows = self._windows.get(trace)
        return windows is not None and any(
            start <= kept.sent.at <= end for start, end in windows.values()
        )

    def keeps(self, traces: tuple[int, ...]) -> bool:
        """Whether any of ``traces`` keeps a body now (no lock: a hint, `hold` looks again)."""
        return any(trace in self._traces for trace in traces)

    def hold(self, key: Key, traces: tuple[int, ...], start: int, end: int) -> bool:
        """Span ``key`` has ended and may claim a body of ``traces`` sent from ``start`` to
        ``end`` when its batch is exported: keep those past the count and age bounds until
        `release` (a hold costs one look-up when its traces keep nothing); whether it holds."""
        with self._lock:
            if not any(trace in self._traces for trace in traces):
                return False
            self._unhold(key)
            self._holds[key] = traces
            for trace in traces:
                self._windows.setdefault(trace, {})[key] = (start, end)
            while len(self._holds) > MAX_HOLDS:
                self._unhold(next(iter(self._holds)))
            return True

    def release(self, keys: list[Key]) -> None:
        """The spans ``keys`` were exported: they hold nothing more."""
        with self._lock:
            if self._holds:
                for key in keys:
                    self._unhold(key)

    def _unhold(self, key: Key) -> None:
        for trace in self._holds.pop(key, ()):
            windows = self._windows.get(trace)
            if windows is not None:
                windows.pop(key, None)
                if not windows:
                    del self._windows[trace]

    def waiting(self, trace: int) -> tuple[Kept, ...]:
        """The bodies of ``trace`` still fresh (or held), in the order they were sent."""
        now = time.monotonic_ns()
        with self._lock:
            kept = self._traces.get(trace)
            if not kept:
                return ()
            fresh = [k for k in kept if now - k.kept_at <= MAX_AGE_NS or self._held(trace, k)]
            if len(fresh) != len(kept):
                self._bytes -= sum(len(k.sent.body) for k in kept if k not in fresh)
                self._set(trace, fresh)
            return tuple(fresh)

    def claim(self, trace: int, taken: tuple[Kept, ...]) -> bool:
        """Take ``taken`` off the table; False when another span took any of them first (then
        none is taken)."""
        with self._lock:
            kept = self._traces.get(trace, [])
            if not all(t in kept for t in taken):
                return False
            self._set(trace, [k for k in kept if k not in taken])
            self._bytes -= sum(len(t.sent.body) for t in taken)
            return True

    def drop(self, trace: int, sent: tuple[Sent, ...]) -> None:
        """Forget bodies their own span took (by identity)."""
        with self._lock:
            kept = self._traces.get(trace)
            if not kept:
                return
            left = [k for k in kept if not any(k.sent is s for s in sent)]
            self._bytes -= sum(len(k.sent.body) for k in kept if k not in left)
            self._set(trace, left)

    def _set(self, trace: int, kept: list[Kept]) -> None:
        if kept:
            self._traces[trace] = kept
        else:
            self._traces.pop(trace, None)

    def __len__(self) -> int:
        return sum(len(kept) for kept in self._traces.values())

    def _clear(self) -> None:
        self._traces = OrderedDict()
        self._bytes = 0
        self._holds = OrderedDict()
        self._windows = {}

    def reset(self) -> None:
        """Forget everything kept (tests, `uninstall`)."""
        with self._lock:
            self._clear()
