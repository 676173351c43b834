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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from af_otel.model import FrozenDict, Request
from af_otel.model.request import normalize_message
from af_otel.wire import anthropic_messages, bedrock, gemini, openai_chat, openai_responses
from af_otel.wire.endpoints import (
    ANTHROPIC_MESSAGES,
    BEDROCK_CONVERSE,
    BEDROCK_CONVERSE_STREAM,
    BEDROCK_INVOKE,
    BEDROCK_INVOKE_STREAM,
    GEMINI_GENERATE,
    GEMINI_STREAM,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
)
from af_otel.wire.shapes import WireRead


def _listed(key: str) -> Callable[[Mapping[str, Any]], Any]:
    def items(body: Mapping[str, Any]) -> Any:
        return body.get(key) or ()

    return items


def _no_mark(item: Any) -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class Reader:
    """One endpoint's reader: the key of its growing array, how that array's items are listed,
    one item read into a GenAI message, the rest of the body read, and what state an item names
    that the server holds (only when `rest` says the items decide it)."""

    items_key: str
    items: Callable[[Mapping[str, Any]], Any]
    element: Callable[[Any], dict[str, Any]]
    rest: Callable[[Mapping[str, Any]], tuple[WireRead, bool]]
    mark: Callable[[Any], str | None] = _no_mark


READERS: Final[Mapping[str, Reader]] = {
    OPENAI_CHAT: Reader(
        openai_chat.ITEMS, _listed(openai_chat.ITEMS), openai_chat.element, openai_chat.rest
    ),
    OPENAI_RESPONSES: Reader(
        openai_responses.ITEMS,
        openai_responses.items,
        openai_responses.element,
        openai_responses.rest,
        openai_responses.mark,
    ),
    ANTHROPIC_MESSAGES: Reader(
        anthropic_messages.ITEMS,
        _listed(anthropic_messages.ITEMS),
        anthropic_messages.element,
        anthropic_messages.rest,
    ),
}

# Endpoints whose path names the model (`af_otel.wire.endpoints.PATH_MODEL`): read whole, handed
# the path too (their bodies carry no growing array a tail read could take).
PathReader = Callable[[Mapping[str, Any], bytes], WireRead | None]
PATH_READERS: Final[Mapping[str, PathReader]] = {
    GEMINI_GENERATE: gemini.read_path,
    GEMINI_STREAM: gemini.read_path,
    BEDROCK_CONVERSE: bedrock.read_path,
    BEDROCK_CONVERSE_STREAM: bedrock.read_path,
    BEDROCK_INVOKE: lambda body, path: bedrock.read_path(body, path, invoke=True),
    BEDROCK_INVOKE_STREAM: lambda body, path: bedrock.read_path(body, path, invoke=True),
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
