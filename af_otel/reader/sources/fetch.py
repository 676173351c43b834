"""One GET of a backend's query API, with httpx imported only when a live source is used.

httpx is the optional ``live`` extra: reading files must not need it, and a missing or failing
fetch must surface as a ``SourceError`` that names the URL.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Final, NamedTuple
from urllib.parse import urlencode

import orjson

from af_otel.errors import SourceError, TraceNotFoundError, UnknownFormatError
from af_otel.reader.sources.stream import SourceFormat, SpanStream

if TYPE_CHECKING:
    import httpx

    from af_otel.reader.records import SpanRecord

__all__ = [
    "TRACE_NOT_FOUND",
    "ByTraceId",
    "TraceApi",
    "expect_body",
    "get_bytes",
    "get_json",
    "parse_json",
    "trace_id_for_url",
    "with_query",
]

TRACE_NOT_FOUND: Final = "trace not found"
_TRACE_ID: Final = re.compile(r"[0-9a-fA-F]{1,32}")
_BODY_EXCERPT: Final = 200


def trace_id_for_url(base_url: str, trace_id: str) -> str:
    """The trace id as 32 lowercase hex digits, checked before it becomes part of a URL path."""
    if not isinstance(trace_id, str) or not _TRACE_ID.fullmatch(trace_id):
        raise SourceError(f"{base_url}: {trace_id!r} is not a trace id (up to 32 hex digits)")
    return trace_id.lower().rjust(32, "0")


def get_bytes(
    url: str,
    *,
    headers: Mapping[str, str],
    timeout: float,
    client: httpx.Client | None,
    not_found: str | None = TRACE_NOT_FOUND,
) -> bytes | None:
    """GET ``url`` and return its body; every failure is a ``SourceError`` naming the URL.

    A 404 raises with ``not_found`` as the reason: `TRACE_NOT_FOUND` (the default, for a URL
    naming one trace) as a ``TraceNotFoundError``, any other reason as a ``SourceError``. With
    ``not_found`` None a 404 returns None (a search that found nothing).
    """
    try:
        import httpx  # noqa: PLC0415 - the optional `live` extra, loaded only to fetch
    except ImportError:
        raise SourceError(
            f"{url}: fetching traces needs httpx; install it with: pip install 'af-otel[live]'"
        ) from None
    request_headers = {"Accept": "application/json", **headers}
    try:
        if client is not None:
            response = client.get(url, headers=request_headers, timeout=timeout)
        else:
            response = httpx.get(
                url, headers=request_headers, timeout=timeout, follow_redirects=True
            )
    except httpx.HTTPError as exc:
        raise SourceError(f"{url}: request failed ({type(exc).__name__}: {exc})") from exc
    if response.status_code == 404:
        if not_found is None:
            return None
        error = TraceNotFoundError if not_found == TRACE_NOT_FOUND else SourceError
        raise error(f"{url}: {not_found} (HTTP 404)")
    if response.status_code >= 400:
        excerpt = response.text[:_BODY_EXCERPT].strip()
        raise SourceError(f"{url}: HTTP {response.status_code}: {excerpt}")
    return response.content


def parse_json(body: bytes, url: str) -> object:
    """A response body as JSON; a body that is not is a ``SourceError`` naming the URL."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise SourceError(f"{url}: the response is not JSON ({exc})") from None


def get_json(
    url: str,
    *,
    headers: Mapping[str, str],
    timeout: float,
    client: httpx.Client | None,
    not_found: str = TRACE_NOT_FOUND,
) -> object:
    """GET ``url`` and parse its JSON body; every failure is a ``SourceError`` naming the URL."""
    body = get_bytes(url, headers=headers, timeout=timeout, client=client, not_found=not_found)
    assert body is not None  # a 404 raised
    return parse_json(body, url)


def with_query(url: str, params: Mapping[str, str | int]) -> str:
    """``url`` with ``params`` as its query string (the URL messages name, parameters and all)."""
    return url + "?" + urlencode(params)


def expect_body(doc: object, url: str, key: str, fmt: SourceFormat) -> Mapping[str, object]:
    """The response body, checked to be the shape the endpoint promises (``key`` at the top)."""
    if isinstance(doc, Mapping) and key in doc:
        return doc
    found = sorted(doc)[:5] if isinstance(doc, Mapping) else type(doc).__name__
    raise UnknownFormatError(f"{url}: expected {fmt.value}, got a body with {found}")


class TraceApi(NamedTuple):
    """A backend's trace-by-id endpoint: its path, the top key of its body, and that body's reader."""

    path: str  # after the base URL, before the trace id: "/api/v2/traces/"
    key: str
    format: SourceFormat
    records: Callable[[Mapping[str, object], str, SpanStream], Iterator[SpanRecord]]

    def url(self, base_url: str, trace_id: str) -> str:
        """The URL of ``trace_id`` (hex) on the backend at ``base_url``."""
        return base_url.rstrip("/") + self.path + trace_id_for_url(base_url, trace_id)


@dataclass(frozen=True, slots=True)
class ByTraceId:
    """What a source that fetches a trace by id (Tempo, Jaeger) does with its URL and options.

    A subclass gives ``api`` its versions and default, and ``APIS``, its endpoints by version.
    ``headers`` carry auth (e.g. a tenant); ``client`` lets a caller bring a configured
    ``httpx.Client``.
    """

    APIS: ClassVar[Mapping[str, TraceApi]]
    url: str
    api: str
    headers: Mapping[str, str] = field(default_factory=dict, kw_only=True)
    timeout: float = field(default=10.0, kw_only=True)
    client: httpx.Client | None = field(default=None, kw_only=True)

    def trace_url(self, trace_id: str) -> str:
        """The URL ``trace`` fetches for ``trace_id`` (hex)."""
        return self.APIS[self.api].url(self.url, trace_id)

    def trace(self, trace_id: str, *, lenient: bool = False) -> SpanStream:
        """Fetch one trace now and return its spans; a missing trace or failed request raises."""
        api = self.APIS[self.api]
        url = self.trace_url(trace_id)
        doc = get_json(url, headers=self.headers, timeout=self.timeout, client=self.client)
        body = expect_body(doc, url, api.key, api.format)
        stream = SpanStream(url, api.format, lenient=lenient)
        return stream.feed(api.records(body, url, stream))
