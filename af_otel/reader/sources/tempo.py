"""Grafana Tempo: its trace-by-id bodies, and ``TempoSource`` to fetch traces over HTTP.

Tempo marshals with gogo jsonpb, so ids are base64 and enums are names; ``/api/traces`` renames
the top key to ``batches`` (and Tempo 1.x says ``instrumentationLibrarySpans``), ``/api/v2/traces``
wraps the trace in ``{"trace": ...}`` next to a ``status`` that says when the trace is partial.
A window is a TraceQL search (``/api/search``, which lists trace ids, hex with leading zeros
dropped) followed by each trace by id.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import ClassVar, Final, Literal

from af_otel.errors import SourceError
from af_otel.reader.records import SpanRecord
from af_otel.reader.sources.decoders import message_field
from af_otel.reader.sources.fetch import (
    ByTraceId,
    TraceApi,
    expect_body,
    get_json,
    trace_id_for_url,
    with_query,
)
from af_otel.reader.sources.otlp import resource_spans_records
from af_otel.reader.sources.source import Ask, InWindow, OneTrace, refused
from af_otel.reader.sources.stream import NoteKind, SourceFormat, SpanStream
from af_otel.reader.sources.window import DEFAULT_SEARCH_LIMIT, DEFAULT_WORKERS, Window, fetch_each

__all__ = [
    "DEFAULT_QUERY",
    "DEFAULT_SEARCH_LIMIT",
    "TempoSource",
    "tempo_v1_records",
    "tempo_v2_records",
]

# Spans af_otel looked at: every one carries af.receipt.state, a string. A regex match rather than
# `!= nil` so that Tempo versions before attribute-existence queries accept it too.
DEFAULT_QUERY: Final = '{ span.af.receipt.state =~ ".+" }'


def tempo_v1_records(
    doc: Mapping[str, object], origin: str, stream: SpanStream
) -> Iterator[SpanRecord]:
    """Records of a ``GET /api/traces/<id>`` body: ``{"batches": [ResourceSpans...]}``."""
    return resource_spans_records(doc.get("batches"), origin, stream, path="batches")


def tempo_v2_records(
    doc: Mapping[str, object], origin: str, stream: SpanStream
) -> Iterator[SpanRecord]:
    """Records of a ``GET /api/v2/traces/<id>`` body: ``{"trace": {"resourceSpans": [...]}}``."""
    # PartialStatus: COMPLETE = 0 (left out by jsonpb), PARTIAL = 1. A partial trace is a data
    # fact for the fold (missing parents), not a reason to refuse the spans that did arrive.
    if doc.get("status") in ("PARTIAL", 1):
        message = doc.get("message")
        stream.note(
            f"{origin}: Tempo returned a partial trace" + (f" ({message})" if message else ""),
            NoteKind.PARTIAL,
        )
    trace = stream.member(doc.get("trace"), dict, f"{origin}: trace")
    if trace is None:
        return iter(())
    return resource_spans_records(
        message_field(trace, "resourceSpans"), origin, stream, path="trace.resourceSpans"
    )


@dataclass(frozen=True, slots=True)
class TempoSource(ByTraceId):
    """Fetch traces by id from Tempo's HTTP API (needs httpx: ``pip install 'af-otel[live]'``).

    ``url`` is the query frontend's base URL (``http://tempo:3200``); ``api`` picks
    ``/api/v2/traces`` (Tempo 2.x and later) or ``/api/traces``. ``headers`` carry auth (e.g. an
    ``X-Scope-OrgID`` tenant); ``client`` lets a caller bring a configured ``httpx.Client``.
    """

    api: Literal["v2", "v1"] = "v2"

    APIS: ClassVar[Mapping[str, TraceApi]] = {
        "v2": TraceApi("/api/v2/traces/", "trace", SourceFormat.TEMPO_V2, tempo_v2_records),
        "v1": TraceApi("/api/traces/", "batches", SourceFormat.TEMPO_V1, tempo_v1_records),
    }

    def search_url(self, window: Window, query: str, limit: int) -> str:
        """The ``/api/search`` URL ``window`` asks (start and end in whole Unix seconds)."""
        params: dict[str, str | int] = {
            "q": query,
            "start": window.start_ns // 1_000_000_000,
            "end": -(-window.end_ns // 1_000_000_000),
            "limit": limit,
            "spss": 1,
        }
        return with_query(self.url.rstrip("/") + "/api/search", params)

    def window(
        self,
        window: Window,
        *,
        query: str = DEFAULT_QUERY,
        limit: int = DEFAULT_SEARCH_LIMIT,
        workers: int = DEFAULT_WORKERS,
        lenient: bool = False,
    ) -> SpanStream:
        """Search ``window`` now, then fetch each trace found while the stream is read.

        ``query`` is TraceQL (default: spans carrying ``af.receipt.state``). A search that returns
        ``limit`` traces is noted as truncated; a trace that cannot be fetched is a problem of the
        stream (raised, or skipped when ``lenient``).
        """
        url = self.search_url(window, query, limit)
        body = expect_body(
            get_json(url, headers=self.headers, timeout=self.timeout, client=self.client),
            url,
            "traces",
            SourceFormat.TEMPO_SEARCH,
        )
        ids = _search_ids(body, url)
        stream = SpanStream(url, SourceFormat.TEMPO_SEARCH, lenient=lenient)
        stream.traces_expected = len(ids)
        if len(ids) >= limit:
            stream.note(
                f"{url}: Tempo returned {len(ids)} traces, the search limit; traces beyond it in "
                f"{window} were not read (narrow the window or raise the limit)",
                NoteKind.TRUNCATED,
            )
        fetch = partial(self.trace, lenient=lenient)
        return stream.feed(fetch_each(ids, fetch, stream, workers=workers))

    @property
    def label(self) -> str:
        return f"Tempo at {self.url}"

    def read(self, ask: Ask, *, lenient: bool = False) -> SpanStream:
        """`Source.read`: one trace by id, or a window's search (``search``: TraceQL)."""
        if isinstance(ask, OneTrace):
            return self.trace(ask.trace_id, lenient=lenient)
        if isinstance(ask, InWindow):
            query = ask.search or DEFAULT_QUERY
            return self.window(ask.window, query=query, limit=ask.limit, lenient=lenient)
        raise refused(self, ask, "one trace by id, or a window")


def _search_ids(body: Mapping[str, object], url: str) -> list[str]:
    """The trace ids of a SearchResponse, in its order, each once."""
    traces = body.get("traces") or []
    if not isinstance(traces, list):
        raise SourceError(f"{url}: traces must be a list")
    ids: dict[str, None] = {}
    for index, trace in enumerate(traces):
        trace_id = trace.get("traceID") if isinstance(trace, dict) else None
        if not isinstance(trace_id, str):
            raise SourceError(f"{url}: traces[{index}] has no traceID")
        ids[trace_id_for_url(url, trace_id)] = None
    return list(ids)
