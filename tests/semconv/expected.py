"""The requests capture.py sends, written out by hand in the normalized GenAI shape (docs/receipt-spec.md §3).

Written independently of the adapters: a test compares what an adapter rebuilt from a real
instrumentation's span with these, never with another adapter's output alone.
"""

from __future__ import annotations

from typing import Any, Final

SYSTEM_PROMPT: Final = "You are a helpful assistant."
TOOL_CALL: Final = {
    "type": "tool_call",
    "id": "call_1",
    "name": "get_weather",
    "arguments": {"city": "Paris"},
}
TOOL_RESULT: Final = {"type": "tool_call_response", "id": "call_1", "response": "18C and sunny"}
QUESTION: Final = {"type": "text", "content": "What is the weather in Paris?"}
IMAGE: Final = {"type": "uri", "modality": "image", "uri": "https://example.com/paris.png"}
WEATHER_TOOL: Final = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    },
}
WEATHER_MESSAGES: Final = [
    # Chat Completions sends the system prompt inside the message list: it stays a message.
    {"role": "system", "parts": [{"type": "text", "content": SYSTEM_PROMPT}]},
    {"role": "user", "parts": [QUESTION]},
    {"role": "assistant", "parts": [TOOL_CALL]},
    {"role": "tool", "parts": [TOOL_RESULT]},
]
BASIS: Final = {"model": "gpt-4o-mini", "provider": "openai"}


def weather() -> dict[str, Any]:
    return {
        "system": [],
        "messages": WEATHER_MESSAGES,
        "tools": [WEATHER_TOOL],
        "params": {"temperature": 0.2, "max_tokens": 256},
        **BASIS,
    }


# The dials of the `dials` scenario, and which of them each instrumentation records.
ALL_DIALS: Final = {
    "temperature": 0.2,
    "max_tokens": 256,
    "top_p": 0.9,
    "seed": 7,
    "stop_sequences": ["END"],
    "frequency_penalty": 0.1,
    "presence_penalty": 0.3,
    "choice_count": 2,
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
}
DIALS_NOT_RECORDED: Final = {
    "genai": {"tool_choice"},
    "openinference": set(),
    "openllmetry-new": {"seed", "stop_sequences", "choice_count", "tool_choice"},
    "openllmetry-old": {"seed", "stop_sequences", "choice_count", "tool_choice"},
}


def mixed(*, tool_call_first: bool, user_name: bool) -> dict[str, Any]:
    """The `mixed` scenario: a named user with text and an image, an assistant turn with text and
    a tool call. Instrumentations disagree on the part order and on keeping the user's name."""
    said = {"type": "text", "content": "Let me check."}
    user: dict[str, Any] = {"role": "user", "parts": [QUESTION, IMAGE]}
    if user_name:
        user["name"] = "alice"
    return {
        "system": [],
        "messages": [
            WEATHER_MESSAGES[0],
            user,
            {
                "role": "assistant",
                "parts": [TOOL_CALL, said] if tool_call_first else [said, TOOL_CALL],
            },
            WEATHER_MESSAGES[3],
        ],
        "tools": [WEATHER_TOOL],
        "params": {"temperature": 0.2, "max_tokens": 256},
        **BASIS,
    }


def anthropic_weather() -> dict[str, Any]:
    """The weather call through Anthropic's API: the system prompt is the request's `system`, and
    the tool result travels in a user turn."""
    return {
        "system": [{"type": "text", "content": SYSTEM_PROMPT}],
        "messages": [
            {"role": "user", "parts": [QUESTION]},
            {"role": "assistant", "parts": [TOOL_CALL]},
            {"role": "user", "parts": [TOOL_RESULT]},
        ],
        "tools": [WEATHER_TOOL],
        "params": {"max_tokens": 256},
        "model": "claude-sonnet-4-5",
        "provider": "anthropic",
    }
