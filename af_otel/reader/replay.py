"""The provider-native request body of one call, rebuilt from its served view, so that a user can
send exactly that call again (``af-otel served --request``, `replay`, `replay_request`).

Each endpoint's `Writer` (af_otel/wire/, the inverse of its reader) writes the view's request:
OpenAI Chat Completions, OpenAI Responses, Anthropic Messages, Gemini ``generateContent`` and
Bedrock ``Converse`` / ``InvokeModel``; for the last two, whose path names the model, the path the
body goes to is `Replayed.path`. A body is rebuilt only from a
view `verify` calls ``verified`` with no partial gap and no server-held history; otherwise the
rebuild is refused with `ReplayRefusedError` naming the gap (or the reason). The body must read
back, through the endpoint's own reader, to the very request the receipt proves.

**Exact** where the record can prove it: a call minted from the wire names its spelling
(``af.wire.spelling``, `af_otel.wire.spelling`), the blobs that say how the body spelled what the
request does not (transport keys, cache marks, tool-call arguments as sent); with it the body is
the one sent, byte for byte as RFC 8785 JSON. Without it (a call from an instrumentation's record,
a store without the blob), the body is written in the writer's one spelling and `Replayed.notice`
names what it leaves out (docs/receipt-spec.md §14).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from af_otel import names
from af_otel.errors import BlobNotFoundError, ReplayRefusedError, StoreError
from af_otel.model import Request
from af_otel.reader.verify import VerdictStatus, verify
from af_otel.reader.view import ServedView
from af_otel.store.base import Store
from af_otel.store.url import open_store
from af_otel.wire import bedrock, gemini, openai_responses
from af_otel.wire.endpoint import Endpoint, Unwritable
from af_otel.wire.endpoints import BEDROCK_CONVERSE, BY_NAME, ENDPOINTS, GEMINI_GENERATE
from af_otel.wire.read import read_body
from af_otel.wire.spelling import FORMAT, plain

__all__ = ["ReplayRefusedError", "Replayed", "replay", "replay_request"]

# Gap kinds about other calls of the run, not about this request's content.
# What a body in the writer's one spelling leaves out (docs/receipt-spec.md §14).
NOT_SPELLED: Final = (
    "transport keys (stream, stream_options, ...), cache_control marks and the client's own "
    "spelling (tool-call argument spacing, a string for a one-text content) are not on record"
)
_RESPONSES_ONLY: Final = frozenset({"reasoning_summary", "truncation", "store"})
# Endpoints whose path names the model: a call with no spelling (which names the endpoint) does
# not say which operation it was; it is written for the one that is not streamed.
_UNSTREAMED: Final = {
    gemini.PROVIDER: GEMINI_GENERATE,
    gemini.VERTEX: GEMINI_GENERATE,
    bedrock.PROVIDER: BEDROCK_CONVERSE,
}


@dataclass(frozen=True, slots=True)
class Replayed:
    """A rebuilt body: the endpoint it goes to, whether it is spelled as sent (``exact``), and
    otherwise the notice that names what it leaves out; ``path``: for an endpoint whose path
    names the model (Gemini, Bedrock), the request path the body goes to ("" for the others)."""

    body: dict[str, Any]
    endpoint: str
    exact: bool
    notice: str = ""
    path: str = ""


StoreLike = Store | str | os.PathLike[str] | None


def replay_request(view: ServedView, key: Any = None, store: StoreLike = None) -> dict[str, Any]:
    """The body the client sent for ``view``'s call (`replay`'s body)."""
    return replay(view, key, store).body


def replay(view: ServedView, key: Any = None, store: StoreLike = None) -> Replayed:
    """``view``'s call rebuilt (module rules; ``key``: as for `verify`; ``store``: a `Store` or
    its URL, where the call's spelling is, for an exact body; without one the body is not
    exact). Raises `ReplayRefusedError` where the record cannot rebuild it."""
    where = f"span {view.span_id} (run {view.run_id}, epoch {view.epoch})"
    _proven(view, key, where)
    if isinstance(store, str | os.PathLike):
        store = open_store(store)
    spelling = _spelling(view, store, where) if view.spelling else None
    endpoint = _endpoint(view, spelling, where)
    writer = endpoint.writer
    assert writer is not None  # `_endpoint` picks only endpoints with one
    request = _request(view)
    try:
        body = writer.body(request) if spelling is None else _spelled(endpoint, request, *spelling)
    except Unwritable as exc:
        raise ReplayRefusedError(f"{where}: cannot rebuild the request body ({exc})") from None
    path = _path(endpoint, request, spelling)
    _reads_back(endpoint, body, request, path, where)
    if spelling is not None:
        return Replayed(body, endpoint.name, True, path=path)
    if view.spelling:
        notice = f"the spelling {view.spelling} is not in the store; {NOT_SPELLED}"
    else:
        notice = f"rebuilt from the {view.source} record in one spelling; {NOT_SPELLED}"
    if endpoint.path_model:
        notice += f"; the operation is not on record: written for {endpoint.name} ({path})"
    return Replayed(body, endpoint.name, False, notice, path)


def _path(endpoint: Endpoint, request: Mapping[str, Any], spelling: Any) -> str:
    """The request path of an endpoint whose path names the model: the writer's, its part before
    the query as the spelling holds it when it does ("" for an endpoint of a body-named model)."""
    writer = endpoint.writer
    if writer is None or writer.path is None:
        return ""
    written = writer.path(request)
    sent = spelling[0].get("path") if spelling is not None else None
    if not isinstance(sent, str) or not sent:
        return written
    _, mark, query = written.partition("?")
    return sent + mark + query


def _proven(view: ServedView, key: Any, where: str) -> None:
    verdict = verify(view, key=key)
    blocking = [g for g in view.gaps if g.holds_back(view.source)]
    if verdict.status is not VerdictStatus.VERIFIED or blocking:
        first = blocking[0] if blocking else None
        why = f"gap {first.kind}: {first.detail or first.why}" if first else verdict.reason
        raise ReplayRefusedError(f"{where}: cannot rebuild the request body ({why})")
    if view.held:
        raise ReplayRefusedError(
            f"{where}: cannot rebuild the request body (gap {names.GAP_HELD_HISTORY}: the server "
            "holds history this request does not carry)"
        )


def _endpoint(view: ServedView, spelling: Any, where: str) -> Endpoint:
    """The endpoint the call went to: the one its spelling names, else the provider's (OpenAI's
    Responses API told by the span's name or a Responses-only setting)."""
    if spelling is not None:
        found = BY_NAME.get(spelling[0].get("endpoint"))
        if found is not None and found.writer is not None:
            return found
        raise ReplayRefusedError(f"{where}: no writer for the endpoint of {view.spelling}")
    if view.provider == openai_responses.PROVIDER and (
        "respon" in view.name.lower() or _RESPONSES_ONLY & set(view.params or {})
    ):
        return openai_responses.ENDPOINT
    if view.provider in _UNSTREAMED:
        return BY_NAME[_UNSTREAMED[view.provider]]
    for endpoint in ENDPOINTS:
        if endpoint.provider == view.provider and endpoint.writer is not None:
            return endpoint
    raise ReplayRefusedError(f"{where}: no writer for provider {view.provider!r}")


def _request(view: ServedView) -> dict[str, Any]:
    return {
        "system": plain(view.system or ()),
        "messages": plain(view.messages or ()),
        "tools": plain(view.tools or ()),
        "params": plain(view.params or {}),
        "model": view.model,
        "provider": view.provider,
    }


def _spelling(view: ServedView, store: Store | None, where: str) -> Any:
    """The call's spelling blob, its keys blob and its elements as sent by index; None when the
    store does not hold them (then the body is not exact). Damage is refused."""
    if store is None:
        return None
    try:
        return _load(store, str(view.spelling), len(view.messages or ()))
    except BlobNotFoundError:
        return None
    except (StoreError, ValueError, TypeError, KeyError) as exc:
        raise ReplayRefusedError(
            f"{where}: cannot rebuild the request body (its spelling {view.spelling}: {exc})"
        ) from None


def _load(store: Store, address: str, size: int) -> tuple[Mapping[str, Any], Any, dict[int, Any]]:
    blob = store.get_json(address)
    if not isinstance(blob, dict) or blob.get("format") != FORMAT or blob.get("size", size) != size:
        raise ValueError("not the spelling of this request")
    rest = store.get_json(blob["rest"])
    elements: dict[int, Any] = {}
    node, upto = blob, size
    for _ in range(size + 2):  # each parent covers fewer elements than the body naming it
        count = node["count"]
        for index, item in node["items"].items():
            if count <= int(index) < upto:
                elements.setdefault(int(index), item)
        if not node["parent"]:
            return blob, rest, elements
        parent = store.get_json(node["parent"])
        if not isinstance(parent, dict) or parent.get("size") != count or parent["count"] >= count:
            raise ValueError(f"its parent {node['parent']} is not the earlier body's")
        node, upto = parent, count
    raise ValueError("a parent chain that does not end")


def _spelled(
    endpoint: Endpoint,
    request: Mapping[str, Any],
    blob: Mapping[str, Any],
    rest: Any,
    elements: Mapping[int, Any],
) -> dict[str, Any]:
    """The body as sent: the writer's, each element and member the spelling holds as sent."""
    writer = endpoint.writer
    assert writer is not None
    if writer.lead(request):
        raise Unwritable("a system a wire body holds nowhere")
    items: list[Any] = []
    for index, message in enumerate(request["messages"]):
        items += [elements[index]] if index in elements else writer.elements(message)
    body = {**writer.rest(request), writer.items_key: items, **rest["keys"]}
    for key in rest["drop"]:
        body.pop(key, None)
    return body


def _reads_back(
    endpoint: Endpoint, body: Mapping[str, Any], request: Mapping[str, Any], path: str, where: str
) -> None:
    """Refuse a body that the endpoint's reader (handed ``path``) does not read as the proven
    request."""
    try:
        found = read_body(endpoint.name, orjson.dumps(body), path.encode())
        back = Request.from_dict(found.request) if found is not None else None
        proven = Request.from_dict({**request, "provider": endpoint.provider})
    except Exception as exc:  # any failure to read back is a refusal
        back, proven, why = None, None, str(exc)
    else:
        why = "unread keys" if found is not None and (found.unread or found.held) else ""
    fields = ("system", "messages", "tools", "params", "model")
    if (
        back is None
        or proven is None
        or why
        or any(getattr(back, f) != getattr(proven, f) for f in fields)
    ):
        differs = [f for f in fields if back and proven and getattr(back, f) != getattr(proven, f)]
        detail = why or f"differs on {', '.join(differs) or 'its shape'}"
        raise ReplayRefusedError(
            f"{where}: cannot rebuild the request body (the rebuilt body does not read back to "
            f"the verified request: {detail})"
        )
