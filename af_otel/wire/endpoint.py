"""What af_otel knows of one LLM endpoint on the wire, as one record: the `Endpoint` each endpoint's
module declares (``openai_chat.ENDPOINT``, ``gemini.ENDPOINTS``, ...) and the registry
(`af_otel.wire.endpoints.ENDPOINTS`) derives the tap's path check, the readers' dispatch, the
providers' own hosts and the replay writers from. docs/instrumentations.md ("Adding an endpoint")
says how one is added.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from af_otel.wire.shapes import WireRead


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


# A body of an endpoint whose path names the model, read with that path (None: not its shape).
PathReader = Callable[[Mapping[str, Any], bytes], WireRead | None]


class Unwritable(Exception):
    """A part of a request an endpoint's writer has no spelling for."""


def _no_lead(request: Mapping[str, Any]) -> list[Any]:
    return []


@dataclass(frozen=True, slots=True)
class Writer:
    """The inverse of an endpoint's `Reader`: a normalized request (plain JSON values: ``system``,
    ``messages``, ``tools``, ``params``, ``model``) written back as the body the client sends.
    `rest` writes every member but the growing array, `lead` the elements the array starts with
    that come from the request's ``system`` (Chat Completions' system messages), `elements` one
    message as the elements of the array it reads from (one, for a message read from the wire);
    each raises `Unwritable` for what it cannot spell. ``path``: for an endpoint whose path names
    the model (the body does not), the request path the body goes to, from the request."""

    items_key: str
    elements: Callable[[Mapping[str, Any]], list[Any]]
    rest: Callable[[Mapping[str, Any]], dict[str, Any]]
    lead: Callable[[Mapping[str, Any]], list[Any]] = _no_lead
    path: Callable[[Mapping[str, Any]], str] | None = None

    def body(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The whole body: its rest, with the array (the lead, then every message's elements)."""
        items = self.lead(request)
        for message in request.get("messages") or ():
            items += self.elements(message)
        return {**self.rest(request), self.items_key: items}


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One LLM endpoint. ``endings``: the ends of its request paths (any host: compatible servers
    serve the same paths), each needing ``within`` in the path too where an ending alone is too
    common; ``provider``: who serves it (`gen_ai.provider.name`). A body with a growing array has
    a `Reader` (read from its tail along a run, `af_otel.wire.tail`); an endpoint whose path names
    the model has a `PathReader` instead and is read whole. ``writer``: the replay writer, when
    the endpoint has one; ``hosts``: provider -> the full-match pattern of the provider's own
    hosts, for providers whose hosts carry a region (`af_otel.wire.hosts`)."""

    name: str
    endings: tuple[bytes, ...]
    provider: str
    reader: Reader | None = None
    read_path: PathReader | None = None
    writer: Writer | None = None
    within: bytes = b""
    hosts: Mapping[str, re.Pattern[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.reader is None) == (self.read_path is None):
            raise ValueError(f"endpoint {self.name}: one of reader and read_path, not both")

    @property
    def path_model(self) -> bool:
        """Whether the path names the model (the body does not): the reader is handed the path."""
        return self.read_path is not None
