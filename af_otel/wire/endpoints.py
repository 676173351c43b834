"""Which request paths are LLM endpoints, decided from the path's end alone (any host: OpenAI-
compatible servers such as vLLM, Ollama or a LiteLLM proxy serve the same paths); Gemini's
``:generateContent`` and Bedrock's ``/model/{id}/converse`` name their model in the path.

The check is a few byte comparisons, because it runs on every POST an application makes while
the tap is on; the body is read only for a path that matches (`af_otel.wire.read`).
"""

from __future__ import annotations

from typing import Final

OPENAI_CHAT: Final = "openai.chat_completions"
OPENAI_RESPONSES: Final = "openai.responses"
ANTHROPIC_MESSAGES: Final = "anthropic.messages"
GEMINI_GENERATE: Final = "gemini.generate_content"
GEMINI_STREAM: Final = "gemini.stream_generate_content"
BEDROCK_CONVERSE: Final = "bedrock.converse"
BEDROCK_CONVERSE_STREAM: Final = "bedrock.converse_stream"
BEDROCK_INVOKE: Final = "bedrock.invoke_model"
BEDROCK_INVOKE_STREAM: Final = "bedrock.invoke_model_stream"
# Endpoints whose model is named by the path, not the body (their readers are handed the path).
PATH_MODEL: Final = frozenset(
    {
        GEMINI_GENERATE,
        GEMINI_STREAM,
        BEDROCK_CONVERSE,
        BEDROCK_CONVERSE_STREAM,
        BEDROCK_INVOKE,
        BEDROCK_INVOKE_STREAM,
    }
)
# Bedrock's paths are ``/model/{modelId}/<operation>``: an ending alone (``/invoke``) is too common.
_BEDROCK: Final = frozenset(
    {BEDROCK_CONVERSE, BEDROCK_CONVERSE_STREAM, BEDROCK_INVOKE, BEDROCK_INVOKE_STREAM}
)

# Path endings, longest first within a shared tail. ``/messages/count_tokens``,
# ``/responses/{id}/cancel`` and ``/chat/completions/{id}`` end otherwise, so they are not calls.
_ENDINGS: Final = (
    (b"/chat/completions", OPENAI_CHAT),
    (b"/responses", OPENAI_RESPONSES),
    (b"/v1/messages", ANTHROPIC_MESSAGES),
    (b":streamGenerateContent", GEMINI_STREAM),
    (b":generateContent", GEMINI_GENERATE),
    (b"/converse-stream", BEDROCK_CONVERSE_STREAM),
    (b"/converse", BEDROCK_CONVERSE),
    (b"/invoke-with-response-stream", BEDROCK_INVOKE_STREAM),
    (b"/invoke", BEDROCK_INVOKE),
)
# The endings by their last byte: a path is compared only with the endings that end as it does.
_BY_LAST: Final = {
    last: tuple(pair for pair in _ENDINGS if pair[0][-1:] == last)
    for last in {ending[-1:] for ending, _ in _ENDINGS}
}


def endpoint_of(raw_path: bytes) -> str | None:
    """The LLM endpoint a request path (with its query, as ``URL.raw_path`` gives it) names."""
    query = raw_path.find(b"?")
    path = raw_path if query < 0 else raw_path[:query]
    candidates = _BY_LAST.get(path[-1:])
    if candidates is None:  # one byte decides for almost every other path
        return None
    for ending, endpoint in candidates:
        if path.endswith(ending):
            if endpoint in _BEDROCK and b"/model/" not in path:
                return None
            return endpoint
    return None
