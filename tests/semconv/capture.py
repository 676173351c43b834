"""Drive the real openai client through one instrumentation and print the ended spans as JSON.

Runs as a subprocess, in the project's venv or in a pinned side venv (see envs.py), so it imports
nothing from af_otel or the tests. The OpenAI API is an httpx MockTransport: no network.

    python capture.py {genai|openinference|openllmetry} {weather|dials|mixed}

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

INSTRUMENTORS = {
    "genai": (
        "opentelemetry.instrumentation.genai.openai",
        "opentelemetry-instrumentation-genai-openai",
    ),
    "openinference": (
        "openinference.instrumentation.openai",
        "openinference-instrumentation-openai",
    ),
    "openllmetry": ("opentelemetry.instrumentation.openai", "opentelemetry-instrumentation-openai"),
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


def _http_module() -> Any:
    # openai >= 3 talks through httpx2 (a fork with the same API); older releases through httpx.
    import openai

    major = int(openai.__version__.split(".", 1)[0])
    return importlib.import_module("httpx2" if major >= 3 else "httpx")


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def main(instrumentation: str, scenario: str) -> None:
    module_name, distribution = INSTRUMENTORS[instrumentation]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = importlib.import_module(module_name).OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)

    import openai

    http = _http_module()
    requests: list[dict[str, Any]] = []

    def answer(request: Any) -> Any:
        requests.append(json.loads(request.content))
        return http.Response(200, json=RESPONSE)

    client = openai.OpenAI(
        api_key="sk-test",
        base_url="http://127.0.0.1:9/v1",
        http_client=http.Client(transport=http.MockTransport(answer)),
    )
    client.chat.completions.create(**SCENARIOS[scenario])
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
        for name in (distribution, "openai", "opentelemetry-sdk", "opentelemetry-util-genai")
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
