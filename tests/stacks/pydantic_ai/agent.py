"""A two-tool agent on the real pydantic-ai (``pydantic-ai-slim[openai]``) with its native GenAI
instrumentation (``InstrumentationSettings``: ``gen_ai.input.messages`` and a
``model_request_parameters`` JSON), and af_otel's processor writing OTLP JSON lines; run by the
harness in the stack's side venv:

    python agent.py '<json config>'

``api``: ``chat`` (OpenAIChatModel) or ``responses`` (OpenAIResponsesModel); ``version``: the
instrumentation's data format version. Four questions, each a tool call and an answer: 8 model
calls, the conversation carried by ``message_history``. No ``af_otel.run``; it prints the
conversation ids pydantic-ai gave.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "soa"))
import common  # beside this folder, importable in the side venv


def main(config: dict[str, Any]) -> None:
    tracer_provider = common.provider(config)
    import openai
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    http = common.http_module("openai")
    client = openai.AsyncOpenAI(
        api_key="sk-wire",
        base_url="https://api.openai.com/v1",
        http_client=common.rerouted(http, config["port"], asynchronous=True),
    )
    model_class = OpenAIResponsesModel if config["api"] == "responses" else OpenAIChatModel
    model = model_class("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))
    agent = Agent(
        model,
        instructions=common.INSTRUCTIONS,
        tools=[common.get_weather, common.get_time],
        model_settings={"temperature": common.TEMPERATURE, "max_tokens": common.MAX_TOKENS},
    )
    # Every agent instrumented, as `logfire.instrument_pydantic_ai()` would do it.
    Agent.instrument_all(
        InstrumentationSettings(tracer_provider=tracer_provider, version=config.get("version", 5))
    )
    # One conversation of the four questions, or (`conversations: 2`) two of two each, one
    # after the other: a fresh message history starts a new one (pydantic-ai gives it a new id).
    count = int(config.get("conversations", 1))
    per = len(common.QUESTIONS) // count
    conversations: list[str] = []
    try:
        for k in range(count):
            history: list[Any] = []
            for question in common.QUESTIONS[k * per : (k + 1) * per]:
                result = agent.run_sync(question, message_history=history)
                history = result.all_messages()
            conversations.append(result.conversation_id)
    finally:
        tracer_provider.shutdown()
    common.report(len(common.QUESTIONS) * 2, "pydantic-ai-slim", conversations=conversations)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
