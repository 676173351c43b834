"""One GET of a backend's query API, with httpx imported only when a live source is used.

httpx is the optional ``live`` extra: reading files must not need it, and a missing or failing
fetch must surface as a ``SourceError`` that names the URL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final
from urllib.parse import urlencode

import orjson

from af_otel.errors import SourceError, UnknownFormatError
from af_otel.reader.sources.stream import SourceFormat

if TYPE_CHECKING:
    import httpx

__all__ = [
    "expect_body",
    "get_bytes",
    "get_json",
    "parse_json",
    "trace_id_for_url",
    "with_query",
]

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
    not_found: str | None = "trace not found",
) -> bytes | None:
    """GET ``url`` and return its body; every failure is a ``SourceError`` naming the URL.

    A 404 raises with ``not_found`` as the reason, or returns None when ``not_found`` is None (a
    search that found nothing).
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
        raise SourceError(f"{url}: {not_found} (HTTP 404)")
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
    not_found: str = "trace not found",
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
