"""A two-tool agent on the real OpenAI Agents SDK (``openai-agents``) under one real
instrumentation, with af_otel's processor writing OTLP JSON lines; run by the harness in the
stack's side venv:

    python agent.py '<json config>'

``genai``: opentelemetry-instrumentation-genai-openai-agents (agent and tool spans) with
genai-openai (the LLM spans of the openai client underneath); ``openinference``:
openinference-instrumentation-openai-agents, which builds its LLM spans from the SDK's own
response span data. The SDK sends through the Responses API (``api: responses``) or Chat
Completions (``api: chat``). Four questions, each a tool call and an answer: 8 model calls. No
``af_otel.run``: the run is whatever the stack records.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "soa"))
import common  # beside this folder, importable in the side venv


async def _converse(agent: Any, runner: Any) -> int:
    history: list[Any] = []
    for question in common.QUESTIONS:
        result = await runner.run(agent, [*history, {"role": "user", "content": question}])
        history = result.to_input_list()
    return len(common.QUESTIONS) * 2


def main(config: dict[str, Any]) -> None:
    tracer_provider = common.provider(config)
    import agents
    import openai

    # The SDK's own exporter would post traces to OpenAI: no processor but the instrumentation's.
    agents.set_trace_processors([])
    if config["instrumentation"] == "genai":
        from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
        from opentelemetry.instrumentation.genai.openai_agents import OpenAIAgentsInstrumentor

        instrumentors: list[Any] = [OpenAIAgentsInstrumentor(), OpenAIInstrumentor()]
        distributions = (
            "opentelemetry-instrumentation-genai-openai-agents",
            "opentelemetry-instrumentation-genai-openai",
            "opentelemetry-util-genai",
        )
    else:
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        instrumentors = [OpenAIAgentsInstrumentor()]
        distributions = ("openinference-instrumentation-openai-agents",)
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=tracer_provider)
    http = common.http_module("openai")
    client = openai.AsyncOpenAI(
        api_key="sk-wire",
        base_url="https://api.openai.com/v1",
        http_client=common.rerouted(http, config["port"], asynchronous=True),
    )
    agents.set_default_openai_client(client, use_for_tracing=False)
    agents.set_default_openai_api("chat_completions" if config["api"] == "chat" else "responses")
    agent = agents.Agent(
        name="travel",
        instructions=common.INSTRUCTIONS,
        model="gpt-4o-mini",
        tools=[agents.function_tool(common.get_weather), agents.function_tool(common.get_time)],
        model_settings=agents.ModelSettings(
            temperature=common.TEMPERATURE, max_tokens=common.MAX_TOKENS
        ),
    )
    try:
        calls = asyncio.run(_converse(agent, agents.Runner))
    finally:
        for instrumentor in instrumentors:
            instrumentor.uninstrument()
        tracer_provider.shutdown()
    common.report(calls, "openai-agents", *distributions)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
