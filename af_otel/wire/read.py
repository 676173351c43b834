"""A sent body read into af_otel's normalized request: the endpoint's reader, and what it could not
place. Shared by the per-endpoint readers so that each rule is written once.

A body key a reader does not know is *unread*: it is named on the receipt's
``af.receipt.unrecorded`` (so ``unrecorded-field`` says the receipt does not cover it) rather than
silently left out, since any key of a request body may steer the model. Keys known to show the
model nothing (transport and bookkeeping) are dropped by each reader's own list.

Each reader reads the array that grows call by call (``messages``, the Responses API's ``input``)
one element at a time, on its own (`Reader.element`), and everything else in one go
(`Reader.rest`): so a body's request is its rest's request with the elements' messages in order,
which is what lets `af_otel.wire.tail` read only the elements a run's last body did not hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from af_otel.model import FrozenDict, Request
from af_otel.model.request import normalize_message
from af_otel.wire.endpoint import PathReader, Reader
from af_otel.wire.endpoints import ENDPOINTS
from af_otel.wire.shapes import WireRead

__all__ = [
    "PATH_READERS",
    "READERS",
    "Reader",
    "message_of",
    "normalized",
    "parse_body",
    "read_body",
    "read_parsed",
]

# The dispatch, from the registry: an endpoint with a growing array has a `Reader`; one whose path
# names the model (`Endpoint.path_model`) is read whole, handed the path too (its body carries no
# growing array a tail read could take).
READERS: Final[Mapping[str, Reader]] = {e.name: e.reader for e in ENDPOINTS if e.reader}
PATH_READERS: Final[Mapping[str, PathReader]] = {
    e.name: e.read_path for e in ENDPOINTS if e.read_path
}


def parse_body(body: bytes) -> dict[str, Any] | None:
    """The body as a JSON object naming a model, else None. Raises nothing."""
    try:
        parsed = orjson.loads(body)
    except Exception:
        return None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("model"), str):
        return None
    return parsed


def read_parsed(reader: Reader, parsed: Mapping[str, Any]) -> WireRead:
    """A parsed body read in the GenAI shape (raises on a shape the reader cannot read)."""
    found, marked = reader.rest(parsed)
    items = reader.items(parsed)
    messages = [reader.element(item) for item in items]
    held = found.held
    if marked:
        held = next((m for m in map(reader.mark, items) if m is not None), None)
    request = {**found.request, "messages": messages}
    return WireRead(request, found.unread, held)


def read_body(endpoint: str, body: bytes, path: bytes = b"") -> WireRead | None:
    """The body sent to ``endpoint`` (at ``path``) read into a request; None when it is not a
    JSON object of that endpoint's shape (then the call is not taken from the wire). Raises
    nothing."""
    by_path = PATH_READERS.get(endpoint)
    if by_path is not None:
        try:
            parsed = orjson.loads(body)
            return by_path(parsed, path) if isinstance(parsed, dict) else None
        except Exception:
            return None
    parsed = parse_body(body)
    if parsed is None:
        return None
    try:
        return read_parsed(READERS[endpoint], parsed)
    except Exception:
        return None


def normalized(found: WireRead, messages: tuple[FrozenDict, ...]) -> Request:
    """The request of a body's rest (`Reader.rest`, its messages empty) with ``messages``, the
    body's elements normalized one by one (`message_of`): `Request.from_dict` of the whole."""
    base = Request.from_dict(found.request)
    return Request(base.system, messages, base.tools, base.params, base.model, base.provider)


def message_of(reader: Reader, item: Any) -> FrozenDict:
    """One element of the body's growing array, read and normalized."""
    return normalize_message(reader.element(item), "messages")
