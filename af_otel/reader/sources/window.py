"""Reading a time window from a backend: the window itself, and many traces fetched a few at a time.

A window is read as the backend lists it (trace ids from a search, or pages of spans), each trace
fetched with at most ``workers`` requests in flight and yielded as soon as it and those before it
have arrived. Only the traces in flight are held, so memory stays flat however many traces the
window holds.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from functools import partial
from typing import Final

from af_otel import forksafe
from af_otel.errors import SourceError
from af_otel.reader.records import SpanRecord
from af_otel.reader.sources.stream import SpanStream

__all__ = [
    "DEFAULT_SEARCH_LIMIT",
    "DEFAULT_WORKERS",
    "Window",
    "fetch_each",
    "parse_duration",
    "parse_instant",
]

# Four requests in flight: enough to hide a backend's latency, few enough not to load its query
# path the way a dashboard refresh would.
DEFAULT_WORKERS: Final = 4
# Traces one search may return; reaching it is noted as a truncation (narrow the window).
DEFAULT_SEARCH_LIMIT: Final = 1000
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION: Final = re.compile(r"([0-9]+)([smhdw])")
_NS: Final = 1_000_000_000
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_FRACTION: Final = re.compile(r"(?P<head>.*T\d\d:\d\d:\d\d)[.,](?P<digits>\d+)(?P<zone>.*)")


def parse_duration(text: str) -> int:
    """``90s``, ``15m``, ``1h``, ``2d``, ``1w`` or a sum like ``1h30m``, in nanoseconds."""
    compact = text.strip().replace(" ", "")
    parts = _DURATION.findall(compact)
    if not parts or "".join(n + u for n, u in parts) != compact:
        raise ValueError(f"{text!r} is not a duration like 90s, 15m, 1h, 2d or 1h30m")
    total = sum(int(n) * _UNITS[u] for n, u in parts) * _NS
    if total <= 0:
        raise ValueError(f"{text!r} is an empty duration")
    return total


def parse_instant(text: str) -> int:
    """An ISO 8601 time (``2026-11-30T14:00:00Z``; no zone means UTC) or Unix seconds, in ns.

    Exact to the nanosecond: fractions are read as decimals, never through a float.
    """
    stripped = text.strip()
    try:
        return int(Decimal(stripped) * _NS)
    except (InvalidOperation, ValueError):
        pass
    fraction = 0
    parts = _FRACTION.fullmatch(stripped)
    if parts is not None:  # datetime keeps microseconds only; the digits past them are kept here
        stripped = parts["head"] + parts["zone"]
        fraction = int(parts["digits"][:9].ljust(9, "0"))
    try:
        moment = datetime.fromisoformat(stripped)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither an ISO 8601 time (2026-11-30T14:00:00Z) nor Unix seconds"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(seconds=1) * _NS + fraction


@dataclass(frozen=True, slots=True)
class Window:
    """A span start-time range ``[start_ns, end_ns)`` in Unix nanoseconds."""

    start_ns: int
    end_ns: int

    def __post_init__(self) -> None:
        if self.end_ns <= self.start_ns:
            raise ValueError(
                f"the window ends ({self.end_iso}) before it starts ({self.start_iso})"
            )

    @classmethod
    def since(cls, duration: str, *, now_ns: int | None = None) -> Window:
        """The last ``duration`` (``1h``) up to now."""
        end = time.time_ns() if now_ns is None else now_ns
        return cls(end - parse_duration(duration), end)

    @classmethod
    def between(cls, start: str, end: str | None = None, *, now_ns: int | None = None) -> Window:
        """From ``start`` to ``end`` (default now); each ISO 8601 or Unix seconds."""
        stop = parse_instant(end) if end else (time.time_ns() if now_ns is None else now_ns)
        return cls(parse_instant(start), stop)

    @property
    def start_iso(self) -> str:
        return _iso(self.start_ns)

    @property
    def end_iso(self) -> str:
        return _iso(self.end_ns)

    def __str__(self) -> str:
        return f"{self.start_iso} to {self.end_iso}"


def _iso(ns: int) -> str:
    """RFC 3339 in UTC with nanoseconds, as Jaeger's time parameters take it."""
    seconds, rest = divmod(ns, _NS)
    moment = _EPOCH + timedelta(seconds=seconds)
    return f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}.{rest:09d}Z"


_Fetched = tuple[list[SpanRecord], SpanStream | None, SourceError | None]


def _fetch_one(fetch: Callable[[str], SpanStream], trace_id: str) -> _Fetched:
    try:
        stream = fetch(trace_id)
        return list(stream), stream, None
    except SourceError as exc:
        return [], None, exc


def fetch_each(
    trace_ids: Iterable[str],
    fetch: Callable[[str], SpanStream],
    into: SpanStream,
    *,
    workers: int = DEFAULT_WORKERS,
) -> Iterator[SpanRecord]:
    """Fetch each trace with ``fetch``, at most ``workers`` at a time, and yield their records.

    Traces come out in the order of ``trace_ids``; each one's notes and skipped counts are added
    to ``into``. A trace that cannot be fetched is a problem of ``into``: raised when it is
    strict, counted when lenient. ``into.traces_read`` counts the traces done.
    """
    pending: deque[Callable[[], _Fetched]] = deque()
    with forksafe.thread_pool(workers, "af-otel-fetch") as pool:
        for trace_id in trace_ids:
            pending.append(pool.submit(partial(_fetch_one, fetch, trace_id)))
            if len(pending) >= workers:
                yield from _collect(pending.popleft()(), into)
        while pending:
            yield from _collect(pending.popleft()(), into)


def _collect(fetched: _Fetched, into: SpanStream) -> Iterator[SpanRecord]:
    records, stream, error = fetched
    if error is not None:
        into.problem(str(error), unit="line", error=type(error))
    if stream is not None:
        into.absorb(stream)
    into.traces_read += 1
    yield from records
