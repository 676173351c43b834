"""Which request paths are LLM endpoints, decided from the path's end alone (any host: OpenAI-
compatible servers such as vLLM, Ollama or a LiteLLM proxy serve the same paths).

The check is a few byte comparisons, because it runs on every POST an application makes while
the tap is on; the body is read only for a path that matches (`af_otel.wire.read`).
"""

from __future__ import annotations

from typing import Final

OPENAI_CHAT: Final = "openai.chat_completions"
OPENAI_RESPONSES: Final = "openai.responses"
ANTHROPIC_MESSAGES: Final = "anthropic.messages"

# Path endings, longest first within a shared tail. ``/messages/count_tokens``,
# ``/responses/{id}/cancel`` and ``/chat/completions/{id}`` end otherwise, so they are not calls.
_ENDINGS: Final = (
    (b"/chat/completions", OPENAI_CHAT),
    (b"/responses", OPENAI_RESPONSES),
    (b"/v1/messages", ANTHROPIC_MESSAGES),
)
_LAST: Final = frozenset(ending[-1:] for ending, _ in _ENDINGS)


def endpoint_of(raw_path: bytes) -> str | None:
    """The LLM endpoint a request path (with its query, as ``URL.raw_path`` gives it) names."""
    query = raw_path.find(b"?")
    path = raw_path if query < 0 else raw_path[:query]
    if path[-1:] not in _LAST:  # one byte decides for almost every other path
        return None
    for ending, endpoint in _ENDINGS:
        if path.endswith(ending):
            return endpoint
    return None
