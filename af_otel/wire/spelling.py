"""How a body read from the wire spelled what its normalized request does not say, so that a
replay can send exactly that body again (docs/receipt-spec.md §14, exact replay).

The normalized request keeps what the model is shown, once, whatever the spelling: tool-call
arguments as the values they spell, no Anthropic ``cache_control`` marks, no transport keys
(``stream``, ``stream_options``, ...), a bare string as one text part. The endpoint's `Writer`
writes a request back in one spelling; a `Spelling` holds where the body sent said it otherwise:

* ``keys``: every member but the growing array that the writer would not write as sent (the
  transport keys among them), and ``drop``: members the writer writes that the body lacks; kept
  as a blob of their own (a run's bodies mostly share it, so it is stored once);
* ``items``: the elements of the array the writer would not write as sent, by index, each as
  sent (an assistant's tool call with its arguments' own spacing, a block with its cache mark);
* ``parent``: the spelling of the run's latest earlier body that held such an element of its own
  and that this one extends, and ``count``, how many elements that body had: the elements before
  ``count`` are spelled as that parent says (each parent covers fewer elements than the body
  naming it, so a chain ends). A body read whole, or one no earlier body had an element for,
  names no parent (its blob is then the same read whole or from its tail).

Computed from the new elements only (the tail read's), so a run's spellings cost what is new per
call; the blob goes to the store beside the call's other content (`af.wire.spelling`), never on
the span. Nothing here raises: a body the writer cannot spell has no spelling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import orjson

from af_otel.canonical import address_of, canonical_json
from af_otel.model import Request
from af_otel.wire.endpoint import Writer

FORMAT: Final = "af-spelling-1"  # the blob's own field, so a blob of another kind is told apart
_SORTED: Final = orjson.OPT_SORT_KEYS


@dataclass(frozen=True, slots=True)
class Spelling:
    """One body's spelling blob and its address; ``rest`` the (address, bytes) of its keys blob;
    ``size`` its elements, ``own`` whether it holds an element of its own, ``named`` the parent
    it names ("" for none) and ``count`` how many elements that parent covers; ``parent`` that
    parent's spelling while it may not be stored yet (one level: its own was stored with it)."""

    address: str
    data: bytes
    rest: tuple[str, bytes]
    size: int
    own: bool
    named: str = ""
    count: int = 0
    parent: Spelling | None = None

    @property
    def items(self) -> bool:
        """Whether it or a parent holds an element: a body extending it must name a parent."""
        return self.own or bool(self.named)

    def blobs(self) -> list[tuple[str, bytes]]:
        """The blobs to store for this spelling: its keys, itself, its parent's."""
        found = [self.rest, (self.address, self.data)]
        if self.parent is not None:
            found += [self.parent.rest, (self.parent.address, self.parent.data)]
        return found


def plain(value: Any) -> Any:
    """Frozen values (mappings, tuples, the reader's chained tuples) as plain JSON values."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [plain(v) for v in value]
    return value


def plain_rest(request: Request) -> dict[str, Any]:
    """The request but its messages, as a `Writer` takes it. Its frozen values are handed over
    as they are (a `FrozenDict` is a ``dict``, and JSON writes a tuple as an array): copying
    them to plain values would cost more than the spelling itself."""
    return {
        "system": request.system,
        "tools": request.tools,
        "params": request.params,
        "model": request.model,
    }


def _same(written: Any, sent: Any) -> bool:
    return orjson.dumps(written, option=_SORTED) == orjson.dumps(sent, option=_SORTED)


def rest_blob(writer: Writer, request: Request, body: Mapping[str, Any]) -> tuple[str, bytes]:
    """The keys blob of ``body`` (its members; the array's only when it is not an array)."""
    written = writer.rest(plain_rest(request))
    key = writer.items_key
    if isinstance(body.get(key), list):
        written[key] = body[key]  # the elements are spelled one by one (`spell`)
    else:
        written[key] = []  # absent, or a bare string: what an empty array would not say
    keys = {k: v for k, v in body.items() if k not in written or not _same(written[k], v)}
    drop = sorted(k for k in written if k not in body)
    data = canonical_json({"drop": drop, "keys": keys})
    return address_of(data), data


def spell(
    endpoint: str,
    writer: Writer,
    request: Request,
    rest: tuple[str, bytes],
    new: Sequence[Any],
    before: Spelling | None = None,
    path: str = "",
) -> Spelling | None:
    """The spelling of a body whose request is ``request``, whose keys blob is ``rest`` and
    whose array ends with the elements ``new`` as sent (all of them when ``before``, the spelling
    of the earlier body it extends, is None); ``path``: the request path without its query, for
    an endpoint whose path names the model. None when the writer cannot spell the request."""
    try:
        return _spell(endpoint, writer, request, rest, new, before, path)
    except Exception:  # a request the writer has no spelling for: no exact replay
        return None


def _spell(
    endpoint: str,
    writer: Writer,
    request: Request,
    rest: tuple[str, bytes],
    new: Sequence[Any],
    before: Spelling | None,
    path: str,
) -> Spelling | None:
    messages = request.messages
    if writer.lead({"system": request.system}) or len(new) > len(messages):
        return None  # elements that are no message of their own: indices would not line up
    count = len(messages) - len(new)
    items: dict[str, Any] = {}
    for index, sent in enumerate(new, count):
        written = writer.elements(messages[index])
        if len(written) != 1 or not _same(written[0], sent):
            items[str(index)] = sent
    named, covered, kept = "", 0, None
    if before is not None and before.own:
        named, covered, kept = before.address, count, replace(before, parent=None)
    elif before is not None and before.named:  # it holds none of its own: name its parent
        named, covered, kept = before.named, before.count, before.parent
    value: dict[str, Any] = {
        "format": FORMAT,
        "endpoint": endpoint,
        "rest": rest[0],
        "parent": named,
        "count": covered,
        "items": items,
    }
    if path:
        value["path"] = path
    if items or named:  # elements by index: they hold for a body of this size only
        value["size"] = len(messages)
    data = canonical_json(value)
    own = bool(items)
    return Spelling(address_of(data), data, rest, len(messages), own, named, covered, kept)
