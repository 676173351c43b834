"""Drive the real openai (or anthropic) client through one instrumentation and print the ended spans as JSON.

Runs as a subprocess, in the project's venv or in a pinned side venv (see envs.py), so it imports
nothing from af_otel or the tests. The OpenAI API is an httpx MockTransport: no network.

    python capture.py {genai|openinference|openllmetry} {weather|dials|mixed}
    python capture.py genai-anthropic weather

Content capture is set by the caller through the environment, as a user would set it.
"""

from __future__ import annotations

import importlib
import json
import sys
from importlib import metadata
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

# instrumentation -> (module, its distribution, instrumentor class, the client it wraps)
INSTRUMENTORS = {
    "genai": (
        "opentelemetry.instrumentation.genai.openai",
        "opentelemetry-instrumentation-genai-openai",
        "OpenAIInstrumentor",
        "openai",
    ),
    "genai-anthropic": (
        "opentelemetry.instrumentation.genai.anthropic",
        "opentelemetry-instrumentation-genai-anthropic",
        "AnthropicInstrumentor",
        "anthropic",
    ),
    "openinference": (
        "openinference.instrumentation.openai",
        "openinference-instrumentation-openai",
        "OpenAIInstrumentor",
        "openai",
    ),
    "openllmetry": (
        "opentelemetry.instrumentation.openai",
        "opentelemetry-instrumentation-openai",
        "OpenAIInstrumentor",
        "openai",
    ),
}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
}
WEATHER_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18C and sunny"},
]
# The same conversation with what some instrumentations record differently: a named user with
# text plus an image, and an assistant turn with both text and a tool call.
MIXED_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {
        "role": "user",
        "name": "alice",
        "content": [
            {"type": "text", "text": "What is the weather in Paris?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/paris.png"}},
        ],
    },
    {"role": "assistant", "content": "Let me check.", "tool_calls": [TOOL_CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18C and sunny"},
]
SCENARIOS: dict[str, dict[str, Any]] = {
    "weather": {
        "model": "gpt-4o-mini",
        "messages": WEATHER_MESSAGES,
        "tools": [WEATHER_TOOL],
        "temperature": 0.2,
        "max_tokens": 256,
    },
    "dials": {
        "model": "gpt-4o-mini",
        "messages": WEATHER_MESSAGES,
        "tools": [WEATHER_TOOL],
        "temperature": 0.2,
        "max_tokens": 256,
        "top_p": 0.9,
        "seed": 7,
        "stop": ["END"],
        "frequency_penalty": 0.1,
        "presence_penalty": 0.3,
        "n": 2,
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    },
    "mixed": {
        "model": "gpt-4o-mini",
        "messages": MIXED_MESSAGES,
        "tools": [WEATHER_TOOL],
        "temperature": 0.2,
        "max_tokens": 256,
    },
}
# The weather conversation as the Anthropic Messages API takes it: the system prompt is a field of
# its own, tool calls are `tool_use` blocks and results are `tool_result` blocks in a user turn.
ANTHROPIC_SCENARIOS: dict[str, dict[str, Any]] = {
    "weather": {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "system": "You are a helpful assistant.",
        "tools": [
            {
                "name": "get_weather",
                "description": "Get the current weather for a city.",
                "input_schema": WEATHER_TOOL["function"]["parameters"],  # type: ignore[index]
            }
        ],
        "messages": [
            {"role": "user", "content": "What is the weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "call_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "18C and sunny"}
                ],
            },
        ],
    }
}
ANTHROPIC_RESPONSE = {
    "id": "msg_af1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "It is 18C and sunny in Paris."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 84, "output_tokens": 9},
}
RESPONSE = {
    "id": "chatcmpl-af1",
    "object": "chat.completion",
    "created": 1767225600,
    "model": "gpt-4o-mini-2024-07-18",
    "system_fingerprint": "fp_af0001",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "logprobs": None,
            "message": {
                "role": "assistant",
                "content": "It is 18C and sunny in Paris.",
                "refusal": None,
            },
        }
    ],
    "usage": {"prompt_tokens": 84, "completion_tokens": 9, "total_tokens": 93},
}


def _http_module(client_module: Any) -> Any:
    # openai >= 3 and anthropic >= 2 talk through httpx2 (a fork with httpx's API); older
    # releases through httpx.
    base_client = importlib.import_module(client_module.__name__ + "._base_client")
    uses_httpx2 = "httpx2" in vars(base_client)
    return importlib.import_module("httpx2" if uses_httpx2 else "httpx")


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def main(instrumentation: str, scenario: str) -> None:
    module_name, distribution, class_name, client_name = INSTRUMENTORS[instrumentation]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = getattr(importlib.import_module(module_name), class_name)()
    instrumentor.instrument(tracer_provider=provider)

    client_module = importlib.import_module(client_name)
    http = _http_module(client_module)
    requests: list[dict[str, Any]] = []
    anthropic = client_name == "anthropic"

    def answer(request: Any) -> Any:
        requests.append(json.loads(request.content))
        return http.Response(200, json=ANTHROPIC_RESPONSE if anthropic else RESPONSE)

    http_client = http.Client(transport=http.MockTransport(answer))
    if anthropic:
        client_module.Anthropic(
            api_key="sk-test", base_url="http://127.0.0.1:9", http_client=http_client
        ).messages.create(**ANTHROPIC_SCENARIOS[scenario])
    else:
        client_module.OpenAI(
            api_key="sk-test", base_url="http://127.0.0.1:9/v1", http_client=http_client
        ).chat.completions.create(**SCENARIOS[scenario])
    instrumentor.uninstrument()
    provider.shutdown()

    spans = [
        {
            "name": span.name,
            "kind": span.kind.name,
            "scope": span.instrumentation_scope.name if span.instrumentation_scope else None,
            "attributes": {key: _plain(value) for key, value in (span.attributes or {}).items()},
        }
        for span in exporter.get_finished_spans()
    ]
    versions = {
        name: _version(name)
        for name in (distribution, client_name, "opentelemetry-sdk", "opentelemetry-util-genai")
    }
    json.dump(
        {
            "instrumentation": instrumentation,
            "scenario": scenario,
            "versions": {key: value for key, value in versions.items() if value},
            "request_sent": requests[0],
            "spans": spans,
        },
        sys.stdout,
        indent=1,
        sort_keys=True,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
