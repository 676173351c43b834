"""`llm_call` in time proportional to what is new since the run's last call.

The explicit API is handed the history every call again, in one of two forms.

A `Conversation` (af_otel/model/conversation.py) is append-only and frozen: a message object is
made once, where it was added, so when last call's last message is the object at its place in
this call's, all of last call's messages are, and only the ones after them are read. One
identity test: the call costs the same at turn 1,000 as at turn 10.

A list of the caller's own dicts proves nothing by identity (a caller may change a message in
place between calls), so each call's messages are serialized (orjson, in C: a fraction of a
millisecond for a 1,000-turn history) and the bytes compared with the run's last call's
(`Explicit`, one per run): when they start with all of those bytes, the first messages serialize
exactly as last call's did, and the request is last call's normalized messages, the very
objects, followed by the new ones. The bytes are made and compared `CHUNK` messages at a time,
each chunk a JSON array of its own (orjson writes each item on its own, so equal chunks at the
same places are equal bytes), and a chunk equal to last call's is dropped for last call's object:
a call writes no fresh buffer the size of the history (1.5 MB at 1,000 turns of 1 KB), only
chunks made and freed in the same memory, and the run keeps one copy of the bytes, as before
(under Valgrind with a 1 MB last-level cache, this machine's L2: half the misses at turn 1,000).
The new messages are normalized from deep copies of the caller's dicts, never from the dicts
themselves: a request holding them would change when the caller changes
them, and the receipts memo would take last call's digest for content that is no longer what it
hashed. System, tools and dials are copied and normalized every call, as on the full path
(`Request.from_dict`), so only the messages are taken from the memo.

Exact where the serialization is one to one on what normalization tells apart: types orjson would
write as something else (datetimes, dataclasses, subclasses of the JSON types but af_otel's own
frozen dict) make it refuse, and the call takes the full path (over a deep copy of the request);
orjson writes a non-finite float as ``null`` too, so where the bytes hold a ``null`` value (not
inside a string: a word of the text, a tool result's JSON is no such value, `_null_value`) the new
messages are walked once: a memo whose messages hold a non-finite float is not used (the full
path decides, where such a float makes the request unreadable), and each ``None`` is kept by its
place, which the next call looks up (equal bytes mean the same JSON shape, so the place is there)
to see it still ``None``: a look-up per ``None`` value in the history, in Python, is what such
values cost a call. Enum members
and UUIDs orjson writes by value without asking: a caller that swaps one for its value in place
between calls is not seen (the memo mints the value, which is how canonical JSON writes either).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

import orjson

from af_otel.model import FrozenDict, Request
from af_otel.model.conversation import Conversation
from af_otel.model.gap_rules import sealed_messages
from af_otel.model.request import normalize_message
from af_otel.semconv import responses

_OPTIONS: Final = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)
_NULL: Final = b"null"
# Messages serialized at a time: a chunk of 1 KB messages stays in the cache while it is made,
# compared and freed, and a history of short ones is still a few dozen calls into orjson.
CHUNK: Final = 128
# A string as orjson writes it: quotes around anything but a quote or a backslash, or a backslash
# and the character it escapes (``\uXXXX``'s hex digits hold neither). Outside strings, JSON text
# holds ``null`` only where a value is null.
_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


@dataclass(frozen=True, slots=True)
class Explicit:
    """A run's last `llm_call` messages: what they are recognized by, their normalized form and
    what the engine needs."""

    body: tuple[bytes, ...]  # orjson of the messages, `CHUNK` a chunk; empty for a Conversation
    messages: tuple[FrozenDict, ...]
    null: bool  # the messages hold a non-finite float (orjson writes ``null``)
    sealed: bool  # a message replays sealed reasoning
    scan: responses.Scan  # the server-held-history tell-tales in the messages
    conversation: bool = False  # handed a Conversation: recognized by identity, not bytes
    nones: tuple[tuple[Any, ...], ...] = ()  # the place of each None value in the messages

    @property
    def size(self) -> int:
        """The bytes held to recognize the next call by."""
        return sum(map(len, self.body))


@dataclass(frozen=True, slots=True)
class Read:
    """One call's request, and what its messages were built to start with (None: read whole)."""

    request: Request
    sealed: bool
    scan: responses.Scan
    prefix: tuple[FrozenDict, ...] | None


class Holder(Protocol):
    explicit: Explicit | None


def _default(value: Any) -> Any:
    if type(value) is FrozenDict:
        return dict(value)
    raise TypeError(type(value).__name__)


def detached(request: Mapping[str, Any]) -> Mapping[str, Any]:
    """A deep copy of a request, so that what the engine holds cannot change when the caller's
    dicts do; the request itself where it cannot be copied (it is then refused or read as it
    is)."""
    try:
        return copy.deepcopy(request)
    except Exception:
        return request


def read(request: Mapping[str, Any], run: Holder) -> Read | None:
    """The normalized request, using and updating the run's memo; None when the caller's values
    do not serialize or normalize (the engine then reads a copy itself). Raises nothing."""
    try:
        given: Sequence[Any] = request.get("messages") or ()
        rest = copy.deepcopy({key: value for key, value in request.items() if key != "messages"})
        base = Request.from_dict({**rest, "messages": []})
        before = run.explicit
        if type(given) is Conversation:
            now, extended = _conversation(given, before)
        else:
            now, extended = _listed(given, before)
        run.explicit = now
        # Last call's messages, the very tuple, when this call's were built to start with them.
        reused = before.messages if before is not None and extended else None
        request_out = Request(
            base.system, now.messages, base.tools, base.params, base.model, base.provider
        )
        return Read(request_out, now.sealed, now.scan, reused)
    except Exception:
        run.explicit = None
        return None


def serialized(messages: Sequence[Any], before: tuple[bytes, ...] = ()) -> tuple[bool, Chunks]:
    """A call's one read of the caller's list (benchmarks/processor.py times it on its own):
    whether its bytes start with all of ``before``'s (last call's), and its chunks, last call's
    objects where they are equal. A chunk is made, compared and dropped or kept before the next
    is made. Raises what orjson raises for a value it does not write."""
    chunks: list[bytes] = []
    extends = True
    last = len(before) - 1
    for index, at in enumerate(range(0, len(messages), CHUNK)):
        chunk = orjson.dumps(messages[at : at + CHUNK], default=_default, option=_OPTIONS)
        if extends and index <= last:
            old = before[index]
            if chunk == old:
                chunk = old
            elif not (index == last and _starts_with(chunk, old)):
                extends = False
        chunks.append(chunk)
    return extends and len(chunks) > last, Chunks(
        tuple(chunks), len(before[-1]) - 1 if before else 0
    )


@dataclass(frozen=True, slots=True)
class Chunks:
    """A call's chunks, and where last call's bytes end in the chunk they end in (outside any
    string: at the comma or bracket after its last message)."""

    body: tuple[bytes, ...]
    end: int


def _starts_with(chunk: bytes, old: bytes) -> bool:
    """Whether ``chunk`` holds the messages of ``old`` (a JSON array) and more: all its bytes but
    the closing bracket, then a comma."""
    end = len(old) - 1
    return len(chunk) > end and chunk.startswith(memoryview(old)[:end]) and chunk[end] == 0x2C


def _listed(messages: Sequence[Any], before: Explicit | None) -> tuple[Explicit, bool]:
    """The memo after a call handed a list, and whether it extends ``before``: last call's
    messages where this call's bytes start with all of theirs, then the rest normalized from
    copies."""
    usable = before is not None and not before.conversation and not before.null
    extends, read = serialized(messages, before.body if usable and before is not None else ())
    body = read.body
    if not (
        extends
        and before is not None
        and usable
        and before.messages
        and _still_none(messages, before.nones)
    ):
        added = _normalized(messages)
        null, nones = _nulls(messages, 0) if any(map(_null_value, body)) else (False, ())
        sealed, scan = sealed_messages(added), responses.scan(added)
        return Explicit(body, added, null, sealed, scan, nones=nones), False
    count = len(before.messages)
    added = _normalized(messages[count:])
    # Only the new messages' bytes are looked at: from where last call's end, in the chunk they
    # end in, on (a place outside any string).
    first = len(before.body) - 1
    new_null = _null_value(body[first], read.end) or any(map(_null_value, body[first + 1 :]))
    null, nones = _nulls(messages, count) if new_null else (False, ())
    sealed = before.sealed or sealed_messages(added)
    scan = responses.scan(added, before.scan)
    out = Explicit(body, before.messages + added, null, sealed, scan, nones=before.nones + nones)
    return out, True


def _nulls(messages: Sequence[Any], start: int) -> tuple[bool, tuple[tuple[Any, ...], ...]]:
    """Whether the messages from ``start`` hold a non-finite float, and the place of each None
    value in them (message index, then keys and indexes)."""
    nones: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [
        ((i,), messages[i]) for i in range(start, len(messages))
    ]
    while stack:
        place, value = stack.pop()
        if value is None:
            nones.append(place)
        elif isinstance(value, float) and not math.isfinite(value):
            return True, ()
        elif isinstance(value, dict):
            stack.extend(((*place, key), item) for key, item in value.items())
        elif isinstance(value, list | tuple):
            stack.extend(((*place, index), item) for index, item in enumerate(value))
    return False, tuple(nones)


def _still_none(messages: Sequence[Any], nones: tuple[tuple[Any, ...], ...]) -> bool:
    """Whether each place that held None last call holds None now (not a NaN, whose bytes are
    the same); raises where a place is not there (then the memo is not used)."""
    for place in nones:
        value: Any = messages
        for step in place:
            value = value[step]
        if value is not None:
            return False
    return True


def _null_value(body: bytes, start: int = 0) -> bool:
    """Whether the JSON text from ``start`` (outside any string) holds a ``null`` value: the
    fast test for the four bytes first, then the text with its strings removed (in C, about 10 ms
    a megabyte: paid where the bytes say ``null``, over the new ones only once a memo stands)."""
    if body.find(_NULL, start) < 0:
        return False
    return _NULL in _STRING.sub(b"", body[start:])


def _normalized(messages: Sequence[Any]) -> tuple[FrozenDict, ...]:
    return tuple(normalize_message(m, "messages") for m in copy.deepcopy(list(messages)))


def _conversation(conversation: Conversation, before: Explicit | None) -> tuple[Explicit, bool]:
    """The memo after a call handed a `Conversation`, and whether it extends ``before``: when
    last call's last message is the object at its place here, all of last call's messages are
    (see `Conversation`), and only the ones after them are new. The messages are held as a plain
    tuple (one copy of the pointers, at C speed), as every request's are."""
    messages = tuple(conversation)
    kept = len(before.messages) if before is not None and before.conversation else 0
    if not (
        before is not None
        and 0 < kept <= len(messages)
        and messages[kept - 1] is before.messages[kept - 1]
    ):
        scan = responses.scan(messages)
        return Explicit((), messages, False, sealed_messages(messages), scan, True), False
    added = messages[kept:]
    sealed = before.sealed or sealed_messages(added)
    scan = responses.scan(added, before.scan)
    return Explicit((), messages, False, sealed, scan, True), True
