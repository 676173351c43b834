"""The registry of LLM endpoints (`ENDPOINTS`, one `Endpoint` record each, declared in the
endpoint's own module) and the tap's check of which endpoint a request path names, decided from
the path's end alone (any host: OpenAI-compatible servers such as vLLM, Ollama or a LiteLLM proxy
serve the same paths); Gemini's ``:generateContent`` and Bedrock's ``/model/{id}/converse`` name
their model in the path.

The check is a few byte comparisons, because it runs on every POST an application makes while
the tap is on; the body is read only for a path that matches (`af_otel.wire.read`). Adding an
endpoint is one module declaring its `Endpoint` and one line in `ENDPOINTS`
(docs/instrumentations.md, "Adding an endpoint").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from af_otel.wire import anthropic_messages, bedrock, gemini, openai_chat, openai_responses
from af_otel.wire.endpoint import Endpoint

# Order decides only between endings of which one is the other's tail (none today): the longer
# is compared first (`_BY_LAST`).
ENDPOINTS: Final[tuple[Endpoint, ...]] = (
    openai_chat.ENDPOINT,
    openai_responses.ENDPOINT,
    anthropic_messages.ENDPOINT,
    *gemini.ENDPOINTS,
    *bedrock.ENDPOINTS,
)
BY_NAME: Final[Mapping[str, Endpoint]] = {endpoint.name: endpoint for endpoint in ENDPOINTS}

OPENAI_CHAT: Final = openai_chat.NAME
OPENAI_RESPONSES: Final = openai_responses.NAME
ANTHROPIC_MESSAGES: Final = anthropic_messages.NAME
GEMINI_STREAM, GEMINI_GENERATE = (e.name for e in gemini.ENDPOINTS)
BEDROCK_CONVERSE_STREAM, BEDROCK_CONVERSE, BEDROCK_INVOKE_STREAM, BEDROCK_INVOKE = (
    e.name for e in bedrock.ENDPOINTS
)
# Endpoints whose model is named by the path, not the body (their readers are handed the path).
PATH_MODEL: Final = frozenset(e.name for e in ENDPOINTS if e.path_model)

# (ending, what the path must also hold, endpoint) by the ending's last `_TAIL` bytes (the
# shortest ending's length), longest first: a path is compared only with the endings whose tail
# it ends with, one slice and one dict look-up for almost every other path (the check runs on
# every POST while the tap is on: benchmarks/wire.py holds it to 2 us). ``/messages/count_tokens``,
# ``/responses/{id}/cancel`` and ``/chat/completions/{id}`` end otherwise, so they are not calls.
_TAIL: Final = min(len(ending) for e in ENDPOINTS for ending in e.endings)
_BY_TAIL: Final = {
    tail: tuple(
        sorted(
            (
                (ending, e.within, e.name)
                for e in ENDPOINTS
                for ending in e.endings
                if ending[-_TAIL:] == tail
            ),
            key=lambda row: -len(row[0]),
        )
    )
    for tail in {ending[-_TAIL:] for e in ENDPOINTS for ending in e.endings}
}


def endpoint_of(raw_path: bytes) -> str | None:
    """The LLM endpoint a request path (with its query, as ``URL.raw_path`` gives it) names."""
    query = raw_path.find(b"?")
    path = raw_path if query < 0 else raw_path[:query]
    candidates = _BY_TAIL.get(path[-_TAIL:])
    if candidates is None:  # the tail decides for almost every other path
        return None
    for ending, within, endpoint in candidates:
        if path.endswith(ending):
            if within and within not in path:
                return None
            return endpoint
    return None
