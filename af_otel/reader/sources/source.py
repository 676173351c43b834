"""The seam every span source stands behind: a `Source` answers an `Ask` with a `SpanStream`.

A read asks for every span a source holds (`AllSpans`: a trace file read whole), for one trace by
id (`OneTrace`), or for the traces that started in a time window (`InWindow`). The reading
commands and ``af-otel serve`` build one source from their options and read it through this
Protocol alone, so a new backend is one class that implements it (and one option that builds it).
A source asked for what it cannot answer raises `ReaderError` naming itself and the ask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from af_otel.errors import ReaderError
from af_otel.reader.sources.stream import SpanStream
from af_otel.reader.sources.window import DEFAULT_SEARCH_LIMIT, Window

__all__ = ["AllSpans", "Ask", "InWindow", "OneTrace", "Source", "refused"]


@dataclass(frozen=True, slots=True)
class AllSpans:
    """Every span the source holds, read whole (a trace file)."""

    def __str__(self) -> str:
        return "every span"


@dataclass(frozen=True, slots=True)
class OneTrace:
    """One trace, by its id (hex, as trace UIs and backends write it)."""

    trace_id: str

    def __str__(self) -> str:
        return f"trace {self.trace_id}"


@dataclass(frozen=True, slots=True)
class InWindow:
    """The traces whose spans started in ``window``. ``search`` is the backend's own narrowing,
    where it has one (Tempo: a TraceQL query, by default the spans af_otel enriched; Jaeger: the
    service, which its search needs); ``limit`` is the most traces one search returns, where the
    backend's search takes one (Phoenix pages through every span of the window instead)."""

    window: Window
    search: str | None = None
    limit: int = DEFAULT_SEARCH_LIMIT

    def __str__(self) -> str:
        return f"the window {self.window}"


Ask = AllSpans | OneTrace | InWindow


class Source(Protocol):
    """Where spans are read from: a trace file, a trace backend, a table of spans.

    ``label`` names the source for people (``Tempo at http://tempo:3200``); ``read`` answers one
    ask with a stream of span records, fetched now or as the stream is read (each source says
    which), strict unless ``lenient`` (then bad lines and spans are skipped and counted)."""

    @property
    def label(self) -> str: ...

    def read(self, ask: Ask, *, lenient: bool = False) -> SpanStream: ...


def refused(source: Source, ask: Ask, reads: str) -> ReaderError:
    """The error of ``source`` asked for ``ask``, which it cannot answer; ``reads``: what it does
    read (``one trace by id, or a window``)."""
    return ReaderError(f"{source.label} reads {reads}, not {ask}")
