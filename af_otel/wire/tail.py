"""Reading a sent body in time proportional to what is new since the run's last body.

A client sends the whole history on every call: call k's body is call k-1's with new elements
appended to its ``messages`` (``input``) array. Read afresh, a run of n calls costs O(n^2). A run
therefore keeps, from its last bodies, a `Layout`: the body itself, where its array's last element
ends, the members around the array (parsed once), and the normalized messages of its elements.
When a new body starts with those very bytes and continues the array, only what follows is
parsed: the new elements, and the members after the array unless they are byte for byte the
last body's. The request is the remembered messages (the same objects, so the digest memo, the
parent search and the commit diff take them by identity) followed by the new ones.

This is exact, never a guess:

* the prefix is the last body's bytes up to the end of its array's last element, compared byte
  for byte (a ``memcmp``, tens of GB/s: the one pass over the whole body a call costs). The last
  body is kept for that (its size counts in the run's weight, `RunState.weight`): a digest would
  cost a hash pass at under a tenth of that speed;
* where the array sits was proven when the layout was made: the bytes before it, closed with a
  value, parse as an object whose last member is the array's key (its value the one inserted);
  the array itself and the members after it parse on their own; no key occurs on both sides;
* a new body's tail is accepted only when ``[`` + its new elements parse as a JSON array (so the
  bytes close the array exactly there) and the rest parses as the members closing the object; a
  JSON value is delimited by its own syntax, so the parts compose into the one object the whole
  body parses to (orjson keeps the last of duplicate keys: a key on both sides of the array, or
  the array's key after it, takes the full path);
* JSON arrays parse element by element and every reader maps each element on its own
  (`af_otel.wire.read`), so the elements read as the prefix's messages followed by the tail's;
* anything else takes the full path: no layout of the endpoint, a body that differs anywhere
  before the end of the array (an edit in the middle, a reordered or changed member before it),
  an empty array, a tail that does not parse, or any error at all. Tests hold both paths to
  identical requests and receipts over drawn histories and edits.

Bound: at most `MAX_LAYOUTS` layouts a run (the newest bodies; a run's parallel branches each
extend their own), each holding one body.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from af_otel.model import FrozenDict, Request
from af_otel.model.gap_rules import sealed_messages
from af_otel.wire.endpoints import BY_NAME
from af_otel.wire.read import READERS, Reader, message_of, normalized, parse_body
from af_otel.wire.shapes import WireRead
from af_otel.wire.spelling import Spelling, rest_blob, spell

MAX_LAYOUTS: Final = 4
_SPACE: Final = b" \t\n\r"
_SEARCHES: Final = 4  # occurrences of the array's key tried when making a layout
_TRAILING: Final = "unexpected content after document"  # orjson: a value ended before the text


@dataclass(frozen=True, slots=True)
class Sent:
    """One body read: the normalized request, the body keys no reader places, the server-held
    state it continues, whether a message replays sealed reasoning, the tuple its messages
    were built to start with (the run's earlier body's, None when read whole), and how it
    spelled what the request does not say (`af_otel.wire.spelling`; None: no writer spells it)."""

    request: Request
    unread: tuple[str, ...]
    held: str | None
    sealed: bool
    prefix: tuple[FrozenDict, ...] | None = None
    spelling: Spelling | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Layout:
    """What a body was read into, and where in its bytes: enough to read a body extending it."""

    endpoint: str
    body: bytes
    end: int  # bytes up to the end of the array's last element
    after: bytes  # the bytes after the array's closing bracket
    head: Mapping[str, Any]  # the members before the array
    members: Mapping[str, Any]  # the members after it
    rest: WireRead  # the reader's rest of the body (`Reader.rest`)
    marked: bool  # whether the elements' marks decide the held state
    mark: str | None  # the first element's mark
    sent: Sent


def read_sent(
    endpoint: str, body: bytes, layouts: tuple[Layout, ...] = (), path: bytes = b""
) -> tuple[Sent | None, tuple[Layout, ...]]:
    """``body`` (sent to ``path``) read (None: not of the endpoint's shape), and the layouts to
    keep for the run's next body, this one's first. Reads only the tail when a layout holds the
    start; an endpoint whose path names the model is read whole. Raises nothing."""
    reader = READERS.get(endpoint)
    if reader is None:
        return _by_path(endpoint, body, path), layouts
    for index, layout in enumerate(layouts):
        if layout.endpoint != endpoint or not _extends(layout, body):
            continue
        try:
            made = _tail(reader, layout, body)
        except Exception:  # anything unforeseen: the full path decides
            made = None
        if made is not None:
            return made.sent, (made, *layouts[:index], *layouts[index + 1 :])
        break
    try:
        sent, whole = _whole(endpoint, reader, body)
    except Exception:
        return None, layouts
    if whole is None:
        return sent, layouts
    return sent, (whole, *layouts)[:MAX_LAYOUTS]


def _by_path(endpoint: str, body: bytes, path: bytes) -> Sent | None:
    """A body read whole with its path (parsed once: its spelling is made from the same parse)."""
    known = BY_NAME.get(endpoint)
    if known is None or known.read_path is None:
        return None
    try:
        parsed = orjson.loads(body)
        found = known.read_path(parsed, path) if isinstance(parsed, dict) else None
        if found is None:
            return None
        request = Request.from_dict(found.request)
    except Exception:  # a body the reader or the normalizer refuses is not read from the wire
        return None
    writer = known.writer
    items = parsed.get(writer.items_key) if writer is not None else None
    where = path.split(b"?", 1)[0].decode("latin-1")  # the query may hold a key: left out
    spelled = _spelled(endpoint, request, parsed, items if isinstance(items, list) else (), where)
    return Sent(request, found.unread, found.held, sealed_messages(request.messages), None, spelled)


def _extends(layout: Layout, body: bytes) -> bool:
    end = layout.end
    return len(body) > end and body.startswith(memoryview(layout.body)[:end])


def _whole(endpoint: str, reader: Reader, body: bytes) -> tuple[Sent | None, Layout | None]:
    """The full path: parse and read everything, then find the layout for the next body."""
    parsed = parse_body(body)
    if parsed is None:
        return None, None
    rest, marked = reader.rest(parsed)
    items = reader.items(parsed)
    messages = tuple(message_of(reader, item) for item in items)
    first = next((m for m in map(reader.mark, items) if m is not None), None)
    held = first if marked else rest.held
    request = normalized(rest, messages)
    spelled = _spelled(
        endpoint, request, parsed, items if isinstance(parsed.get(reader.items_key), list) else ()
    )
    sent = Sent(request, rest.unread, held, sealed_messages(messages), spelling=spelled)
    try:
        layout = _layout(endpoint, reader, body, parsed, rest, marked, first, sent)
    except Exception:  # no layout: the next body is read whole too
        layout = None
    return sent, layout


def _layout(
    endpoint: str,
    reader: Reader,
    body: bytes,
    parsed: Mapping[str, Any],
    rest: WireRead,
    marked: bool,
    first: str | None,
    sent: Sent,
) -> Layout | None:
    """Where the body's array sits (module docstring), or None when it cannot be proven."""
    key = reader.items_key
    value = parsed.get(key)
    if not isinstance(value, list) or not value:
        return None
    quoted = orjson.dumps(key)
    at = -1
    for _ in range(_SEARCHES):
        at = body.find(quoted, at + 1)
        if at < 0:
            return None
        start = _array_at(body, at + len(quoted))
        if start is None or (at and body[at - 1] == 0x5C):  # a backslash: inside a string
            continue
        try:  # an occurrence inside a member before the array does not close as an object
            head = orjson.loads(body[:start] + b"0}")
        except orjson.JSONDecodeError:
            continue
        if not isinstance(head, dict) or head.get(key) != 0 or type(head[key]) is not int:
            continue
        closed = _closed(body, start)
        if closed is None:
            return None
        end, after, members = closed
        if key in members or not head.keys().isdisjoint(members) or end <= start + 1:
            return None
        head = {k: v for k, v in head.items() if k != key}
        return Layout(endpoint, body, end, after, head, members, rest, marked, first, sent)
    return None


def _array_at(body: bytes, at: int) -> int | None:
    """The index of the ``[`` that follows ``:`` after a key ending at ``at``, or None."""
    at = _skip(body, at)
    if body[at : at + 1] != b":":
        return None
    at = _skip(body, at + 1)
    return at if body[at : at + 1] == b"[" else None


def _skip(body: bytes, at: int) -> int:
    while at < len(body) and body[at] in _SPACE:
        at += 1
    return at


def _closed(body: bytes, start: int) -> tuple[int, bytes, dict[str, Any]] | None:
    """For the array opening at ``start`` (or, when ``body[start]`` is a comma, the elements
    continuing one): where its last element ends, the bytes after its ``]`` and the members they
    close the object with; None when the bytes do not read so."""
    text = body[start + 1 :].decode("utf-8")
    try:
        orjson.loads("[" + text)
    except orjson.JSONDecodeError as error:
        if not error.msg.startswith(_TRAILING):
            return None
        cut = error.pos - 1  # characters of ``text`` up to the array's end (and spaces after)
    else:
        return None  # an array closing the body: no object around it
    inside = text[:cut].rstrip()
    if not inside.endswith("]"):
        return None
    after = text[len(inside) :].encode("utf-8")
    members = _members(after)
    if members is None:
        return None
    end = len(body) - len(after) - (len(inside) - len(inside[:-1].rstrip()))
    return end, after, members


def _members(after: bytes) -> dict[str, Any] | None:
    """The members the bytes after the array close the object with, or None."""
    stripped = after.lstrip(_SPACE)
    if stripped[:1] == b",":
        found = orjson.loads(b"{" + stripped[1:])
        return found if isinstance(found, dict) and found else None
    return {} if stripped.rstrip(_SPACE) == b"}" else None


def _tail(reader: Reader, layout: Layout, body: bytes) -> Layout | None:
    """The layout of ``body``, read from its tail past ``layout`` (module docstring), or None."""
    at = _skip(body, layout.end)
    sign = body[at : at + 1]
    if sign == b"]":
        new: list[Any] = []
        end, after = layout.end, body[at + 1 :]
        members = layout.members if after == layout.after else _members(after)
    elif sign == b",":
        found = _elements(body, at, layout)
        if found is None:
            return None
        new, end, after, members = found
    else:
        return None
    if members is None or reader.items_key in members or not layout.head.keys().isdisjoint(members):
        return None
    if members is layout.members:
        rest, marked = layout.rest, layout.marked
    else:
        rest, marked = reader.rest({**layout.head, **members})
        if not isinstance(rest.request.get("model"), str):
            return None
    added = tuple(message_of(reader, item) for item in new)
    mark = layout.mark
    if mark is None:
        mark = next((m for m in map(reader.mark, new) if m is not None), None)
    before = layout.sent
    request = normalized(rest, before.request.messages + added)
    sent = Sent(
        request,
        rest.unread,
        mark if marked else rest.held,
        before.sealed or sealed_messages(added),
        before.request.messages,
        _spelled_tail(layout, request, members, new),
    )
    return Layout(layout.endpoint, body, end, after, layout.head, members, rest, marked, mark, sent)


def _spelled(
    endpoint: str, request: Request, body: Mapping[str, Any], items: Any, path: str = ""
) -> Spelling | None:
    """A body read whole: its spelling, every element its own (`af_otel.wire.spelling`)."""
    found = BY_NAME.get(endpoint)
    writer = found.writer if found is not None else None
    if writer is None:
        return None
    try:
        rest = rest_blob(writer, request, body)
    except Exception:  # a request the writer has no spelling for
        return None
    return spell(endpoint, writer, request, rest, list(items), path=path)


def _spelled_tail(
    layout: Layout, request: Request, members: Mapping[str, Any], new: list[Any]
) -> Spelling | None:
    """A body read from its tail: the spelling of its new elements on the earlier body's, whose
    keys blob it shares while the members around the array are the same."""
    before = layout.sent.spelling
    found = BY_NAME.get(layout.endpoint)
    writer = found.writer if found is not None else None
    if before is None or writer is None:
        return None
    rest = before.rest
    if members is not layout.members:
        try:
            rest = rest_blob(writer, request, {**layout.head, **members, writer.items_key: []})
        except Exception:  # a request the writer has no spelling for
            return None
    return spell(layout.endpoint, writer, request, rest, new, before)


def _elements(
    body: bytes, comma: int, layout: Layout
) -> tuple[list[Any], int, bytes, Mapping[str, Any]] | None:
    """The new elements after the comma at ``comma``, where the last ends, the bytes after the
    array and their members: cheaply when those bytes are the last body's, else by parsing."""
    after = layout.after
    close = len(body) - len(after)
    if close > comma + 1 and body.endswith(after):
        segment = body[comma + 1 : close]
        try:
            new = orjson.loads(b"[" + segment)
        except orjson.JSONDecodeError:
            new = None
        if isinstance(new, list) and new:
            inside = segment.rstrip(_SPACE)[:-1].rstrip(_SPACE)
            return new, comma + 1 + len(inside), after, layout.members
    closed = _closed(body, comma)
    if closed is None:
        return None
    end, after, members = closed
    new = orjson.loads(b"[" + body[comma + 1 : end] + b"]")
    if not isinstance(new, list) or not new:
        return None
    return new, end, after, members
