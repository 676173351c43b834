"""`llm_call` in time proportional to what is new since the run's last call.

The explicit API is handed the request as the caller's own dicts, every call the whole history
again. Their identity proves nothing (a caller may change a message in place between calls), so
each call's messages are serialized (orjson, in C: a fraction of a millisecond for a 1,000-turn
history) and the bytes compared with the run's last call's (`Explicit`, one per run): when they
start with all of those bytes, the first messages serialize exactly as last call's did, and the
request is last call's normalized messages, the very objects, followed by the new ones normalized
from the caller's own dicts. System, tools and dials are normalized from the caller's values every
call, as on the full path (`Request.from_dict`), so only the messages are taken from the memo.

Exact where the serialization is one to one on what normalization tells apart: types orjson would
write as something else (datetimes, dataclasses, subclasses of the JSON types but af_otel's own
frozen dict) make it refuse, and the call takes the full path; orjson writes a non-finite float as
``null``, so a memo whose messages hold ``null`` anywhere is not used (the full path decides,
where such a float makes the request unreadable). Enum members and UUIDs orjson writes by value
without asking: a caller that swaps one for its value in place between calls is not seen (the
full path would find the request unreadable; the memo mints it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

import orjson

from af_otel.model import FrozenDict, Request
from af_otel.model.gap_rules import sealed_messages
from af_otel.model.request import normalize_message
from af_otel.semconv import responses

_OPTIONS: Final = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)
_NULL: Final = b"null"


@dataclass(frozen=True, slots=True)
class Explicit:
    """A run's last `llm_call` messages: their bytes, normalized form and what the engine needs."""

    body: bytes  # orjson of the message list
    messages: tuple[FrozenDict, ...]
    null: bool  # the bytes hold ``null``
    sealed: bool  # a message replays sealed reasoning
    scan: responses.Scan  # the server-held-history tell-tales in the messages


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


def read(request: Mapping[str, Any], run: Holder) -> Read | None:
    """The normalized request, using and updating the run's memo; None when the caller's values
    do not serialize or normalize (the engine then reads the dict itself). Raises nothing."""
    try:
        messages: Sequence[Any] = request.get("messages") or ()
        body = orjson.dumps(messages, default=_default, option=_OPTIONS)
        base = Request.from_dict({**request, "messages": []})
        before = run.explicit
        end = len(before.body) - 1 if before is not None else 0
        reused: tuple[FrozenDict, ...] = ()
        if (
            before is not None
            and not before.null
            and before.messages
            and len(body) > end
            and body.startswith(memoryview(before.body)[:end])
            and body[end : end + 1] in (b",", b"]")
        ):
            reused = before.messages
        added = tuple(normalize_message(m, "messages") for m in messages[len(reused) :])
        if reused:
            assert before is not None
            null = before.null or body.find(_NULL, max(0, end - len(_NULL))) >= 0
            sealed = before.sealed or sealed_messages(added)
            scan = responses.scan(added, before.scan)
        else:
            null, sealed, scan = _NULL in body, sealed_messages(added), responses.scan(added)
        whole = reused + added
        run.explicit = Explicit(body, whole, null, sealed, scan)
        request_out = Request(
            base.system, whole, base.tools, base.params, base.model, base.provider
        )
        return Read(request_out, sealed, scan, reused if reused else None)
    except Exception:
        run.explicit = None
        return None
