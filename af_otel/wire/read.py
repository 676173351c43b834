"""A sent body read into af_otel's normalized request: the endpoint's reader, and what it could not
place. Shared by the per-endpoint readers so that each rule is written once.

A body key a reader does not know is *unread*: it is named on the receipt's
``af.receipt.unrecorded`` (so ``unrecorded-field`` says the receipt does not cover it) rather than
silently left out, since any key of a request body may steer the model. Keys known to show the
model nothing (transport and bookkeeping) are dropped by each reader's own list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from af_otel.wire import anthropic_messages, openai_chat, openai_responses
from af_otel.wire.endpoints import ANTHROPIC_MESSAGES, OPENAI_CHAT, OPENAI_RESPONSES
from af_otel.wire.shapes import WireRead

Reader = Callable[[Mapping[str, Any]], WireRead | None]
READERS: Final[Mapping[str, Reader]] = {
    OPENAI_CHAT: openai_chat.read,
    OPENAI_RESPONSES: openai_responses.read,
    ANTHROPIC_MESSAGES: anthropic_messages.read,
}


def read_body(endpoint: str, body: bytes) -> WireRead | None:
    """The body sent to ``endpoint`` read into a request; None when it is not a JSON object of
    that endpoint's shape (then the call is not taken from the wire). Raises nothing."""
    try:
        parsed = orjson.loads(body)
        if not isinstance(parsed, dict) or not isinstance(parsed.get("model"), str):
            return None
        return READERS[endpoint](parsed)
    except Exception:
        return None
