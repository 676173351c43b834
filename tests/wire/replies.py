"""The canned answers the wire tests' MockTransports give: a Chat Completions reply and an
Anthropic Messages reply, each saying "ok", for tests that look at what was sent, not at what
came back."""

from __future__ import annotations

from typing import Any, Final

CHAT_REPLY: Final[dict[str, Any]] = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
    ],
}
MESSAGE_REPLY: Final[dict[str, Any]] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-5-5",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
