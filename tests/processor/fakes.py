"""Provider APIs faked at the HTTP layer (httpx.MockTransport), so that the real openai and
anthropic clients and their real instrumentations run end to end without a network."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx
import httpx2
import openai
from opentelemetry.sdk.trace import TracerProvider

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _openai_reply(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    last = body["messages"][-1]
    if last["role"] == "user" and body.get("tools"):
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{len(body['messages'])}",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        }
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": f"answer {len(body['messages'])}"}
        finish = "stop"
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        },
    )


def openai_client() -> openai.OpenAI:
    transport = httpx.MockTransport(_openai_reply)
    return openai.OpenAI(api_key="test", http_client=httpx.Client(transport=transport))


def _anthropic_reply(request: httpx2.Request) -> httpx2.Response:
    body = json.loads(request.content)
    return httpx2.Response(
        200,
        json={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": f"answer {len(body['messages'])}"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
    )


def anthropic_client() -> anthropic.Anthropic:
    # This anthropic release only takes its own fork of httpx (httpx2); same MockTransport API.
    transport = httpx2.MockTransport(_anthropic_reply)
    return anthropic.Anthropic(api_key="test", http_client=httpx2.Client(transport=transport))


@contextmanager
def instrumented_openai(provider: TracerProvider, **options: Any) -> Iterator[openai.OpenAI]:
    """The real genai-openai instrumentation on ``provider`` for the duration of the block."""
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider, **options)
    try:
        yield openai_client()
    finally:
        instrumentor.uninstrument()


@contextmanager
def instrumented_anthropic(
    provider: TracerProvider, **options: Any
) -> Iterator[anthropic.Anthropic]:
    """The real genai-anthropic instrumentation on ``provider`` for the duration of the block."""
    from opentelemetry.instrumentation.genai.anthropic import AnthropicInstrumentor

    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(tracer_provider=provider, **options)
    try:
        yield anthropic_client()
    finally:
        instrumentor.uninstrument()


def weather_agent(client: openai.OpenAI, turns: int = 2) -> list[dict[str, Any]]:
    """A scripted tool-using agent: ask, run the tool the model asks for, answer; repeat."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"Weather in Paris? ({turn})"})
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, tools=[WEATHER_TOOL], temperature=0.2, seed=7
        )
        choice = reply.choices[0].message
        messages.append(choice.model_dump(exclude_none=True))
        for call in choice.tool_calls or []:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 21C"})
            reply = client.chat.completions.create(
                model="gpt-4o-mini",
                messages=messages,
                tools=[WEATHER_TOOL],
                temperature=0.2,
                seed=7,
            )
            messages.append(reply.choices[0].message.model_dump(exclude_none=True))
    return messages
