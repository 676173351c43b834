"""Bodies sent where no LLM span was current, kept by trace for a span that ends later
(docs/processor.md, Late pairing): LiteLLM's OpenTelemetry callback writes its span after the
call with a back-dated start, and under the exporter no span start is seen, so a body may have
no span to go to when it is sent. It waits here, and an LLM span of the same trace (or, for a
body sent with no trace at all, a root span) may claim it at its end; the rule that decides is
`af_otel.processor.wire_source`'s, this table only keeps and hands out.

Bounded so that it never grows with the process: at most 8 bodies a trace, 256 traces and
16 MiB, none older than 60 seconds (a span written after its call ends within the call's own
logging, and the exporter's batches within their delay), oldest out first. One short lock, made
by `af_otel.forksafe`; a forked child starts empty.
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
                self._bytes -= len(kept.pop(0).sent.body)
            while self._traces and (len(self._traces) > MAX_TRACES or self._bytes > MAX_BYTES):
                _, dropped = self._traces.popitem(last=False)
                self._bytes -= sum(len(k.sent.body) for k in dropped)

    def waiting(self, trace: int) -> tuple[Kept, ...]:
        """The bodies of ``trace`` still fresh, in the order they were sent."""
        now = time.monotonic_ns()
        with self._lock:
            kept = self._traces.get(trace)
            if not kept:
                return ()
            fresh = [k for k in kept if now - k.kept_at <= MAX_AGE_NS]
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

    def reset(self) -> None:
        """Forget everything kept (tests, `uninstall`)."""
        with self._lock:
            self._clear()
