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

Reader = Callable[[Mapping[str, Any]], WireRead | None]
READERS: Final[Mapping[str, Reader]] = {
    OPENAI_CHAT: openai_chat.read,
    OPENAI_RESPONSES: openai_responses.read,
    ANTHROPIC_MESSAGES: anthropic_messages.read,
}
# Endpoints whose path names the model (`af_otel.wire.endpoints.PATH_MODEL`): handed the path too.
PathReader = Callable[[Mapping[str, Any], bytes], WireRead | None]
PATH_READERS: Final[Mapping[str, PathReader]] = {
    GEMINI_GENERATE: gemini.read_path,
    GEMINI_STREAM: gemini.read_path,
    BEDROCK_CONVERSE: bedrock.read_path,
    BEDROCK_CONVERSE_STREAM: bedrock.read_path,
    BEDROCK_INVOKE: lambda body, path: bedrock.read_path(body, path, invoke=True),
    BEDROCK_INVOKE_STREAM: lambda body, path: bedrock.read_path(body, path, invoke=True),
}


def read_body(endpoint: str, body: bytes, path: bytes = b"") -> WireRead | None:
    """The body sent to ``endpoint`` (at ``path``) read into a request; None when it is not a
    JSON object of that endpoint's shape (then the call is not taken from the wire). Raises
    nothing."""
    try:
        parsed = orjson.loads(body)
        by_path = PATH_READERS.get(endpoint)
        if by_path is not None:
            return by_path(parsed, path) if isinstance(parsed, dict) else None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("model"), str):
            return None
        return READERS[endpoint](parsed)
    except Exception:
        return None
