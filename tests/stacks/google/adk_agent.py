"""A two-tool Google ADK agent (an ``LlmAgent`` with two Python function tools on ADK's ``Gemini``
model over the real google-genai client; four questions, 8 model calls) with ADK's built-in
telemetry and af_otel's processor: one scenario of the Google ADK stack test, run as a subprocess
in its side venv.

    python adk_agent.py '<json config>'   # port, trace, store, run_id, run (wrap in af_otel.run),
                                          # sessions (1: one conversation; 2: two of 2 questions),
                                          # handoff (a router agent transfers to the weather agent)
                                          # vertex (a Vertex AI client: gb_agent_common.genai_client)

ADK's telemetry format is ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN's (the legacy scenarios set it):
``1`` writes a ``call_llm`` span around each ``generate_content`` span, with the whole request in
``gcp.vertex.agent.llm_request``. It prints the ADK session ids it made (the conversations).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import Any

import httpx
from google.adk.agents import LlmAgent
from google.adk.models import Gemini
from google.adk.runners import InMemoryRunner
from google.genai import types
from opentelemetry import trace

import af_otel
from tests.stacks import gb_agent_common as common

MODEL = "gemini-2.5-flash"
TURN = {"n": 0}


def get_weather(city: str) -> dict[str, str]:
    """Current weather for a city."""
    return {"result": common.tool_output("get_weather", TURN["n"])}


def get_time(city: str) -> dict[str, str]:
    """The local time now."""
    return {"result": common.tool_output("get_time", TURN["n"])}


async def converse(
    port: int, sessions: int, handoff: bool = False, vertex: dict[str, Any] | None = None
) -> list[str]:
    client = common.genai_client(httpx, port, vertex)
    agent = LlmAgent(
        name="weather_agent",
        model=Gemini(model=MODEL, client=client),
        instruction="You are a terse assistant. Use the tools.",
        tools=[get_weather, get_time],
        generate_content_config=types.GenerateContentConfig(temperature=0.2, max_output_tokens=300),
    )
    if handoff:  # a router whose only tool is ADK's transfer to the weather agent
        agent = LlmAgent(
            name="router",
            model=Gemini(model=MODEL, client=client),
            instruction="Hand every question to weather_agent.",
            sub_agents=[agent],
        )
    runner = InMemoryRunner(agent=agent, app_name="stack")
    made = [
        await runner.session_service.create_session(app_name="stack", user_id="u")
        for _ in range(sessions)
    ]
    # One session holds the four questions; two hold two each, one after the other.
    per = len(common.QUESTIONS) // sessions
    for turn, question in enumerate(common.QUESTIONS):
        TURN["n"] = turn
        session = made[min(turn // per, sessions - 1)]
        message = types.Content(role="user", parts=[types.Part(text=question)])
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass
    return [session.id for session in made]


def main(config: dict[str, Any]) -> None:
    provider = common.provider(config, "google-adk-agent")
    trace.set_tracer_provider(provider)
    scope = af_otel.run(config["run_id"]) if config.get("run", True) else contextlib.nullcontext()
    try:
        with scope:
            sessions = asyncio.run(
                converse(
                    config["port"],
                    config.get("sessions", 1),
                    bool(config.get("handoff")),
                    config.get("vertex"),
                )
            )
    finally:
        provider.shutdown()
    versions = common.versions("google-adk", "google-genai")
    json.dump({"versions": versions, "sessions": sessions}, sys.stdout)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
