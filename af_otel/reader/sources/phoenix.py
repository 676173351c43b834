"""Arize Phoenix: its REST span API, and ``PhoenixSource`` to read a project's spans over HTTP.

``GET /v1/projects/<project>/spans/otlpv1`` answers ``{"data": [span, ...], "next_cursor": ...}``:
OTLP JSON spans with the protobuf field names (``trace_id``, ``start_time_unix_nano``), every unset
member of a value written as ``null``, newest span first, at most 1,000 a page. Phoenix keeps
less than OTLP carries, and records read from it show it: no resource (so no service name) and no
scope; the kind is always INTERNAL; times are rounded through a float (sub-microsecond digits
drift); dropped counts are absent (0). It adds its own OpenInference reading of GenAI attributes
(``openinference.span.kind``, ``llm.model_name``, ``llm.provider``, ...) next to the span's own,
and (20.26) refuses to store a span carrying a bytes attribute: such a span is simply absent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

from af_otel.errors import TraceNotFoundError
from af_otel.reader.records import AttrValue, SpanRecord
from af_otel.reader.sources.decoders import Problem
from af_otel.reader.sources.fetch import (
    TRACE_NOT_FOUND,
    expect_body,
    get_json,
    trace_id_for_url,
    with_query,
)
from af_otel.reader.sources.otlp import span_record
from af_otel.reader.sources.source import Ask, InWindow, OneTrace, refused
from af_otel.reader.sources.stream import SourceFormat, SpanStream
from af_otel.reader.sources.window import Window

if TYPE_CHECKING:
    import httpx

__all__ = ["MAX_PAGE", "PhoenixSource", "phoenix_records"]

# Phoenix refuses a larger page (limit le=1000); a page is what memory holds at once.
MAX_PAGE: Final = 1000
_NO_RESOURCE: Final[Mapping[str, AttrValue]] = MappingProxyType({})


def phoenix_records(
    doc: Mapping[str, object], origin: str, stream: SpanStream
) -> Iterator[SpanRecord]:
    """Records of one page: ``{"data": [OTLP JSON span, ...], "next_cursor": ...}``."""
    for index, span in enumerate(stream.member(doc.get("data"), list, f"{origin}: data") or ()):
        try:
            yield span_record(span, _NO_RESOURCE, "", origin)
        except Problem as exc:
            stream.problem(f"{origin}: span {index} (data[{index}]): {exc}", unit="span")


@dataclass(frozen=True, slots=True)
class PhoenixSource:
    """Read a Phoenix project's spans (needs httpx: ``pip install 'af-otel[live]'``).

    ``url`` is the server's base URL (``http://phoenix:6006``), ``project`` the project's name or
    id. ``api_key`` is sent as a bearer token when the server has authentication on; ``headers``
    carry anything else; ``client`` lets a caller bring a configured ``httpx.Client``.
    """

    url: str
    project: str = "default"
    api_key: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 10.0
    page_size: int = MAX_PAGE
    client: httpx.Client | None = None

    def spans_url(self, params: Mapping[str, str | int]) -> str:
        """The span search URL with ``params``."""
        path = f"/v1/projects/{quote(self.project, safe='')}/spans/otlpv1"
        return with_query(self.url.rstrip("/") + path, params)

    def trace(self, trace_id: str, *, lenient: bool = False) -> SpanStream:
        """Fetch one trace's spans now; a trace with no spans, or a failed request, raises."""
        hex_id = trace_id_for_url(self.url, trace_id)
        params: dict[str, str | int] = {"trace_id": hex_id, "limit": self._limit()}
        first = self._page(self.spans_url(params))
        if not first[1].get("data"):
            raise TraceNotFoundError(
                f"{first[0]}: {TRACE_NOT_FOUND} (no spans in {self.project!r})"
            )
        stream = SpanStream(first[0], SourceFormat.PHOENIX, lenient=lenient)
        return stream.feed(self._pages(first, params, stream))

    def window(self, window: Window, *, lenient: bool = False) -> SpanStream:
        """The project's spans that started in ``window``, read a page at a time.

        The first page is asked now (a wrong project or URL fails here); later pages as the
        stream is read, so memory holds one page, not the window.
        """
        params: dict[str, str | int] = {
            "start_time": window.start_iso,
            "end_time": window.end_iso,
            "limit": self._limit(),
        }
        first = self._page(self.spans_url(params))
        stream = SpanStream(first[0], SourceFormat.PHOENIX, lenient=lenient)
        return stream.feed(self._pages(first, params, stream))

    @property
    def label(self) -> str:
        return f"Phoenix at {self.url} (project {self.project})"

    def read(self, ask: Ask, *, lenient: bool = False) -> SpanStream:
        """`Source.read`: one trace by id, or a window's spans (Phoenix has no search of its own
        and pages through the whole window, so an ask's ``search`` is refused and its ``limit``
        does not apply)."""
        if isinstance(ask, OneTrace):
            return self.trace(ask.trace_id, lenient=lenient)
        if isinstance(ask, InWindow) and ask.search is None:
            return self.window(ask.window, lenient=lenient)
        raise refused(self, ask, "one trace by id, or a window without a search")

    def _limit(self) -> int:
        return max(1, min(self.page_size, MAX_PAGE))

    def _headers(self) -> Mapping[str, str]:
        if self.api_key is None:
            return self.headers
        return {"Authorization": f"Bearer {self.api_key}", **self.headers}

    def _page(self, url: str) -> tuple[str, Mapping[str, Any]]:
        doc = get_json(
            url,
            headers=self._headers(),
            timeout=self.timeout,
            client=self.client,
            not_found=f"no project {self.project!r} (or no Phoenix span API) at {self.url}",
        )
        return url, expect_body(doc, url, "data", SourceFormat.PHOENIX)

    def _pages(
        self,
        first: tuple[str, Mapping[str, Any]],
        params: Mapping[str, str | int],
        stream: SpanStream,
    ) -> Iterator[SpanRecord]:
        url, body = first
        previous: str | None = None
        while True:
            yield from phoenix_records(body, url, stream)
            cursor = body.get("next_cursor")
            # A server repeating its cursor must not loop forever.
            if not isinstance(cursor, str) or not cursor or cursor == previous:
                return
            previous = cursor
            url, body = self._page(self.spans_url({**params, "cursor": cursor}))
