"""Reading a call's request in time proportional to what is new since the run's last call.

An instrumentation that captures content writes the whole history on every call: call k's
``gen_ai.input.messages`` is call k-1's JSON array with the new messages appended. Parsed and
normalized afresh, a run of n calls costs O(n^2). A run therefore remembers, from its last
readable call, the length and digest of that attribute's text up to its closing bracket, and the
normalized messages read from it (`Remembered`). When the new text starts with text of that
length and digest and continues with a comma, only the rest is parsed: ``"[" + rest`` holds the
new messages, and the request is the remembered messages followed by them. The remembered
messages are the same objects as last call's, so the digest memo, the parent search and the
commit diff match them by identity, and the run's recent calls share one tuple of them
(`af_otel.processor.history.History`).

This is exact, never a guess:

* the prefix is recognised by its digest (the text itself is not kept: it would cost as much
  memory as the history again): BLAKE3 with the ``fast`` extra, several GB/s, else SHA-256, under
  2 GB/s (as much as all the rest of a 1,000-turn call). The new text is hashed once a call, a
  piece at a time; a collision would have to be found in the hash. The prefix must end where the previous array
  closed, so it holds exactly the previous call's messages;
* JSON arrays parse element by element, and the GenAI message shape (``genai_messages``) and the
  request model (``normalize_message``) map each message on its own, so the whole array reads as
  the prefix's messages followed by the tail's; the other request fields (system, tools, model,
  dials) are read from the span as on the full path;
* anything else takes the full path: no previous call, another attribute or convention, an edit
  anywhere before the end, an array that was empty, a tail that does not read, span limits that
  may have cut the record, or any error at all. Tests hold both paths to identical receipts over
  random histories, edits, reordered keys and both attribute shapes.

Which attribute is such an array is the family's `Convention.incremental` (the GenAI conventions'
and OpenLLMetry >=0.55's ``gen_ai.input.messages``); a family without one (OpenInference's indexed
``llm.input_messages.N.*``, OpenLLMetry's legacy ``gen_ai.prompt.N.*``) always takes the full
path: proving their prefix unchanged means reading every attribute again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from af_otel.model import FrozenDict, Request, fields
from af_otel.model.fields import Shown
from af_otel.model.frozen_copy import replaced
from af_otel.model.gap_rules import sealed_messages
from af_otel.receipts.memo import same_json
from af_otel.semconv import placement, responses
from af_otel.semconv.adapted import Adapted
from af_otel.semconv.builders import Absent, content_value
from af_otel.semconv.coerce import parse_json
from af_otel.semconv.convention import named
from af_otel.semconv.conventions.genai import SLOTS
from af_otel.semconv.limits import Limits, cut_by
from af_otel.semconv.record import Recorded

_SYSTEM: Final = next(slot for slot in SLOTS if slot.target == "system")
_JSON_SPACE: Final = " \t\n\r"
_PIECE: Final = 1 << 15  # characters hashed at a time (`_hashed`)


class Running(Protocol):
    """A hash being fed a text piece by piece (`_hashed`)."""

    def update(self, data: bytes, /) -> object: ...
    def digest(self) -> bytes: ...


# The digest never leaves the process, so either hash recognises a prefix; BLAKE3 is several
# times faster than SHA-256 on a long history.
new_hash: Any = hashlib.sha256
try:
    import blake3

    new_hash = blake3.blake3  # the `fast` extra
except ImportError:  # pragma: no cover - the test extra installs it
    pass


@dataclass(frozen=True, slots=True)
class Remembered:
    """What a run's last readable call was read from: enough to recognise its bytes again."""

    convention: str
    length: int  # characters of the attribute's text before its closing bracket
    digest: bytes  # the digest of their UTF-8 bytes (`_hashed`, `new_hash`)
    messages: tuple[FrozenDict, ...]
    system: tuple[FrozenDict, ...]
    tools: tuple[FrozenDict, ...]
    shown: Shown  # what the messages show (the field ledger's one pass over them)
    sealed: bool  # whether one of them replays sealed reasoning (the thinking-replay gap)
    scan: responses.Scan  # the server-held-history tell-tales in them
    first: bool = False  # the one form put the system prompt first (`_prompt_first`)

    def prefix_of(self, text: str) -> Running | None:
        """The running hash of ``text``'s first `length` characters, when they are the
        remembered ones and more follows (to be continued over the new characters), else None."""
        if len(text) <= self.length:
            return None
        running = _hashed(new_hash(), text, 0, self.length)
        return running if running.digest() == self.digest else None


@dataclass(frozen=True, slots=True)
class Read:
    """One call's request as read off its span: the adapter's answer, the parsed request (None
    when there is none or it does not parse), what to remember, and whether the tail sufficed."""

    adapted: Adapted
    request: Request | None
    seen: Remembered | None
    reused: int = 0  # messages taken from the previous call without reading them
    # The passes over the request's messages the engine needs, folded over the new messages only
    # (None: not computed, the engine makes them itself).
    shown: Shown | None = None
    sealed: bool | None = None
    scan: responses.Scan | None = None
    # The tuple ``request.messages`` was built to start with (the run's last call's messages),
    # so that prefix needs no comparing again (None on the full path).
    prefix: tuple[FrozenDict, ...] | None = None


def read(recorded: Recorded, limits: Limits | None, seen: Remembered | None) -> Read:
    """The call's request off its span's ``recorded`` attributes, reading only what follows
    ``seen`` when that is proven safe."""
    if seen is not None:
        try:
            found = _tail(recorded, limits, seen)
        except Exception:  # anything unforeseen: the full path decides
            found = None
        if found is not None:
            return found
    return full(recorded, limits)


def full(recorded: Recorded, limits: Limits | None, *, remember: bool = True) -> Read:
    """The full path: adapt and parse everything (``remember``: hash what the run's next call
    may extend; a call no run reads on from needs no memory)."""
    adapted = recorded.adapt(limits=limits)
    request = parse_request(adapted.request, shaped=True)
    if request is None:
        return Read(adapted, None, None)
    shown, sealed = fields.shown(request), sealed_messages(request.messages)
    scan = responses.scan(request.messages)
    seen = (
        _remember(recorded.attributes, adapted, request, shown, sealed, scan) if remember else None
    )
    return Read(adapted, request, seen, 0, shown, sealed, scan)


def _tail(recorded: Recorded, limits: Limits | None, seen: Remembered) -> Read | None:
    attributes = recorded.attributes
    key = _array_key(seen.convention)
    text = attributes.get(key) if key is not None else None
    if key is None or not isinstance(text, str):
        return None
    # The cheap tests first: hashing the remembered prefix reads the whole history.
    rest = text[seen.length :].lstrip(_JSON_SPACE)
    if not rest.startswith(","):
        return None
    if limits is not None and cut_by(attributes, limits) is not None:
        return None
    running = seen.prefix_of(text)
    if running is None:
        return None
    tail_text = "[" + rest[1:]
    adapted = recorded.with_content(key, tail_text).adapt()
    if adapted.convention != seen.convention or adapted.request is None:
        return None
    tail = parse_request(adapted.request, shaped=True)
    if tail is None or not tail.messages:
        return None
    # The one form (semconv/placement.py) places the system prompt by the whole request, which
    # the tail alone does not show: a prompt put first is put first in the tail too, and is the
    # previous call's first message when unchanged; leading system messages an Anthropic tail
    # starts with would be moved into `system`. Anything else takes the full path.
    added = tail.messages
    first = _prompt_first(attributes, tail.provider)
    if first != seen.first:
        return None
    if first:
        if not same_json(seen.messages[:1], added[:1]) or len(added) < 2:
            return None
        added = added[1:]
    if tail.provider in placement.SYSTEM_AS_FIELD and (
        not same_json(seen.system, tail.system) or _count(tail_text) != len(added)
    ):
        return None
    request = Request(
        _shared(seen.system, tail.system),
        seen.messages + added,
        _shared(seen.tools, tail.tools),
        tail.params,
        tail.model,
        tail.provider,
    )
    whole = replaced(adapted, request={**adapted.request, "messages": request.messages})
    new = fields.shown(tail)
    shown = fields.Shown(seen.shown.kinds | new.kinds, seen.shown.fields | new.fields)
    sealed = seen.sealed or sealed_messages(tail.messages)
    scan = responses.scan(added, seen.scan)
    after = _seen(
        adapted.convention, text, request, shown, sealed, scan, first, running, seen.length
    )
    return Read(whole, request, after, len(seen.messages), shown, sealed, scan, seen.messages)


def _remember(
    attributes: Mapping[str, Any],
    adapted: Adapted,
    request: Request,
    shown: Shown,
    sealed: bool,
    scan: responses.Scan,
) -> Remembered | None:
    key = _array_key(adapted.convention)
    text = attributes.get(key) if key is not None else None
    if not isinstance(text, str) or not request.messages:
        return None
    first = _prompt_first(attributes, request.provider)
    return _seen(adapted.convention, text, request, shown, sealed, scan, first)


def _array_key(convention: str) -> str | None:
    """The attribute holding the family's message list as the GenAI JSON array
    (`Convention.incremental`), or None: its calls are always read in full."""
    family = named(convention)
    return family.incremental if family is not None else None


def _prompt_first(attributes: Mapping[str, Any], provider: str | None) -> bool:
    """Whether the one form put the record's system prompt first among its messages: the
    provider sends it so (`placement.prompt_first`) and the system slot holds one."""
    raw = attributes.get(_SYSTEM.key)
    if raw is None or not placement.prompt_first(provider, attributes):
        return False
    try:
        return bool(content_value(raw))
    except Absent:  # unreadable: the adapter read no request either
        return False


def _count(text: str) -> int | None:
    """The elements of a JSON array, or None when it does not read as one."""
    value = parse_json(text)
    return len(value) if isinstance(value, list) else None


def _seen(
    convention: str,
    text: str,
    request: Request,
    shown: Shown,
    sealed: bool,
    scan: responses.Scan,
    first: bool,
    running: Running | None = None,
    hashed: int = 0,
) -> Remembered | None:
    """What to remember of ``text``. ``running``: the hash over its first ``hashed`` characters
    (the prefix the call extends), continued here over the new characters only."""
    body = text.rstrip(_JSON_SPACE)
    if not body.endswith("]"):
        return None
    length = len(body) - 1
    running = _hashed(running if running is not None else new_hash(), text, hashed, length)
    return Remembered(
        convention,
        length,
        running.digest(),
        request.messages,
        request.system,
        request.tools,
        shown,
        sealed,
        scan,
        first,
    )


def _hashed(running: Running, text: str, start: int, end: int) -> Running:
    """``running`` continued over the UTF-8 bytes of ``text[start:end]`` (a lone surrogate as it
    stands, so no two texts hash alike by encoding), a piece at a time: a piece is copied in the
    cache, a whole long text would be copied into fresh pages at every call."""
    for at in range(start, end, _PIECE):
        running.update(text[at : min(at + _PIECE, end)].encode("utf-8", "surrogatepass"))
    return running


def _shared(before: tuple[FrozenDict, ...], now: tuple[FrozenDict, ...]) -> tuple[FrozenDict, ...]:
    """Last call's objects when they are the same JSON: one copy per run, not one per call."""
    if len(before) == len(now) and all(same_json(a, b) for a, b in zip(before, now, strict=True)):
        return before
    return now


def parse_request(
    data: Mapping[str, Any] | Request | None, *, shaped: bool = False
) -> Request | None:
    """The request ``data`` holds, or None: a shape the adapter let through is unreadable content
    (the engine names it `content-unreadable`), never a crash. ``shaped``: ``data`` is an
    adapter's request, already read into the GenAI shape (`Request.from_shaped`)."""
    if data is None or isinstance(data, Request):
        return data
    try:
        return Request.from_shaped(data) if shaped else Request.from_dict(data)
    except Exception:
        return None
