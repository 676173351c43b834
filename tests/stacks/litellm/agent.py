"""A two-tool agent loop on the real LiteLLM (``litellm.completion`` of ``openai/gpt-4o-mini``)
under one real instrumentation, with af_otel's processor writing OTLP JSON lines; run by the
harness in the stack's side venv:

    python agent.py '<json config>'

``callback``: LiteLLM's own OpenTelemetry callback (``litellm_request`` and its
``raw_gen_ai_request`` child, written after the call); ``openinference``:
openinference-instrumentation-litellm. ``route``: ``openai-client`` hands LiteLLM an openai client
whose transport reroutes to the loopback server; ``own-openai`` lets LiteLLM make its own openai
client; ``own-anthropic`` sends an Anthropic model through LiteLLM's own httpx handler (both with
``api_base`` at the loopback server). Four questions, each a tool call and an answer: 8 model
calls.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "soa"))
import common  # beside this folder, importable in the side venv

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The local time now.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]


def _run_tool(call: Any) -> str:
    arguments = json.loads(call.function.arguments or "{}")
    if call.function.name == "get_weather":
        return common.get_weather(**arguments)
    return common.get_time()


def converse(litellm: Any, client: Any, route: dict[str, Any]) -> int:
    messages: list[dict[str, Any]] = [{"role": "system", "content": common.INSTRUCTIONS}]
    calls = 0
    for question in common.QUESTIONS:
        messages.append({"role": "user", "content": question})
        while True:
            response = litellm.completion(
                messages=messages,
                tools=TOOLS,
                temperature=common.TEMPERATURE,
                max_tokens=common.MAX_TOKENS,
                api_key="sk-wire",
                **route,
                **({"client": client} if client is not None else {}),
            )
            calls += 1
            message = response.choices[0].message
            tool_calls = message.tool_calls or []
            entry: dict[str, Any] = {"role": "assistant", "content": message.content}
            if tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in tool_calls
                ]
            messages.append(entry)
            if not tool_calls:
                break
            for call in tool_calls:
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": _run_tool(call)}
                )
    return calls


def main(config: dict[str, Any]) -> None:
    tracer_provider = common.provider(config)
    import litellm
    import openai

    instrumentor: Any = None
    if config["instrumentation"] == "callback":
        from litellm.integrations.opentelemetry import OpenTelemetry

        litellm.callbacks = [OpenTelemetry(tracer_provider=tracer_provider)]
        distributions: tuple[str, ...] = ()
    else:
        from openinference.instrumentation.litellm import LiteLLMInstrumentor

        instrumentor = LiteLLMInstrumentor()
        instrumentor.instrument(tracer_provider=tracer_provider)
        distributions = ("openinference-instrumentation-litellm",)
    route = config.get("route", "openai-client")
    client = None
    if route == "openai-client":  # the caller's openai client, rerouted with the span header
        client = openai.OpenAI(
            api_key="sk-wire",
            base_url="https://api.openai.com/v1",
            http_client=common.rerouted(common.http_module("openai"), config["port"], False),
        )
        arguments: dict[str, Any] = {"model": "openai/gpt-4o-mini"}
    elif route == "own-openai":  # LiteLLM's own openai client (no span header: matched by turns)
        base = f"http://127.0.0.1:{config['port']}/v1"
        arguments = {"model": "openai/gpt-4o-mini", "api_base": base}
    else:  # Anthropic through LiteLLM's own httpx handler
        base = f"http://127.0.0.1:{config['port']}"
        arguments = {"model": "anthropic/claude-sonnet-4-5", "api_base": base}
    try:
        calls = converse(litellm, client, arguments)
        time.sleep(1.0)  # LiteLLM logs success from a worker thread after the call returns
    finally:
        if instrumentor is not None:
            instrumentor.uninstrument()
        tracer_provider.shutdown()
    common.report(calls, "litellm", *distributions)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
