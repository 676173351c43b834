"""A two-tool agent on the real OpenAI Agents SDK (``openai-agents``) under one real
instrumentation, with af_otel's processor writing OTLP JSON lines; run by the harness in the
stack's side venv:

    python agent.py '<json config>'

``genai``: opentelemetry-instrumentation-genai-openai-agents (agent and tool spans) with
genai-openai (the LLM spans of the openai client underneath); ``openinference``:
openinference-instrumentation-openai-agents, which builds its LLM spans from the SDK's own
response span data. The SDK sends through the Responses API (``api: responses``) or Chat
Completions (``api: chat``). Four questions, each a tool call and an answer: 8 model calls (with
``handoff``: each a handoff and an answer). No ``af_otel.run``: the run is whatever the stack
records; it prints the conversations it held.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "soa"))
import common  # beside this folder, importable in the side venv


def _conversations(config: dict[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    """The conversations the agent holds, each an id and its questions: one of the four
    questions, or (``conversations: 2``) two of two each, one after the other."""
    count = int(config.get("conversations", 1))
    per = len(common.QUESTIONS) // count
    return [
        (f"conversation-{k + 1}", common.QUESTIONS[k * per : (k + 1) * per]) for k in range(count)
    ]


async def _converse(agent: Any, config: dict[str, Any]) -> list[str]:
    """Each turn one ``Runner.run`` (one trace of the SDK's); a conversation is named the way
    the SDK names one, its ``group_id``, and under OpenInference also with ``using_session``
    (``session: true``), which OpenInference stamps on its spans as ``session.id``."""
    import agents

    held = []
    for conversation, questions in _conversations(config):
        history: list[Any] = []
        run_config = agents.RunConfig(group_id=conversation)
        scope: Any = contextlib.nullcontext()
        if config.get("session"):
            from openinference.instrumentation import using_session

            scope = using_session(conversation)
        with scope:
            for question in questions:
                turn = [*history, {"role": "user", "content": question}]
                result = await agents.Runner.run(agent, turn, run_config=run_config)
                history = result.to_input_list()
        held.append(conversation)
    return held


def _agent(config: dict[str, Any]) -> Any:
    """The travel agent with the two tools; with ``handoff: true`` behind a triage agent whose
    only tool is the handoff to it (each turn: the triage agent's call hands off, the travel
    agent's answers)."""
    import agents

    travel = agents.Agent(
        name="travel",
        instructions=common.INSTRUCTIONS,
        model="gpt-4o-mini",
        tools=[agents.function_tool(common.get_weather), agents.function_tool(common.get_time)],
        model_settings=agents.ModelSettings(
            temperature=common.TEMPERATURE, max_tokens=common.MAX_TOKENS
        ),
    )
    if not config.get("handoff"):
        return travel
    return agents.Agent(
        name="triage",
        instructions="Hand every travel question to the travel agent.",
        model="gpt-4o-mini",
        handoffs=[travel],
        model_settings=agents.ModelSettings(
            temperature=common.TEMPERATURE, max_tokens=common.MAX_TOKENS
        ),
    )


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
    try:
        conversations = asyncio.run(_converse(_agent(config), config))
    finally:
        for instrumentor in instrumentors:
            instrumentor.uninstrument()
        tracer_provider.shutdown()
    calls = len(common.QUESTIONS) * 2
    common.report(calls, "openai-agents", *distributions, conversations=conversations)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
