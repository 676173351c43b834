"""A two-tool agent on the real google-genai client (8 model calls: four questions, each a
function call and its answer; two of them streamed, one async), under the real
opentelemetry-instrumentation-google-genai, with af_otel's processor: one scenario of the Google
GenAI stack test, run as a subprocess in its side venv.

    python genai_agent.py '<json config>'   # port, trace, store, run_id, run, instrument, vertex

The client keeps the Gemini API's own host; its httpx (2.x) or httpx2 (3.x) transport reroutes
each request to the loopback server. With ``vertex`` (``project``, ``location``, and optionally
``model``, ``api_version``, ``base_url``) it is a Vertex AI client (`common.genai_client`).
Prints the versions that ran and the instrumentor's fate.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from typing import Any

from google.genai import types

from tests.stacks import gb_agent_common as common

MODEL = "gemini-2.5-flash"


def _http() -> Any:
    major = int(importlib.metadata.version("google-genai").split(".")[0])
    return importlib.import_module("httpx2" if major >= 3 else "httpx")


def _config(call: int) -> types.GenerateContentConfig:
    tools = [
        types.Tool(
            function_declarations=[
                types.FunctionDeclaration(
                    name=t["name"], description=t["description"], parameters_json_schema=t["schema"]
                )
                for t in (common.WEATHER, common.TIME)
            ]
        )
    ]
    settings: dict[str, Any] = {
        "system_instruction": "You are a terse assistant. Use the tools.",
        "tools": tools,
        "temperature": 0.2,
        "max_output_tokens": 300,
        "automatic_function_calling": types.AutomaticFunctionCallingConfig(disable=True),
    }
    if call % 2 == 0:
        settings["top_p"] = 0.9
        settings["seed"] = 7
    if call == 3:
        settings["tool_config"] = types.ToolConfig(
            function_calling_config=types.FunctionCallingConfig(
                mode="ANY", allowed_function_names=["get_weather"]
            )
        )
    if call == 6:
        settings["thinking_config"] = types.ThinkingConfig(thinking_budget=0)
    if call == 8:
        settings["response_mime_type"] = "application/json"
        settings["response_json_schema"] = {
            "type": "object",
            "properties": {"text": {"type": "string"}},
        }
    return types.GenerateContentConfig(**settings)


class Agent:
    def __init__(self, port: int, vertex: dict[str, Any] | None = None) -> None:
        self.client = common.genai_client(_http(), port, vertex)
        self.model = (vertex or {}).get("model") or MODEL
        self.calls = 0

    def call(self, contents: list[types.Content]) -> types.Content:
        self.calls += 1
        config = _config(self.calls)
        if self.calls in (2, 5):  # streamed
            chunks = list(
                self.client.models.generate_content_stream(
                    model=self.model, contents=contents, config=config
                )
            )
            parts = [p for c in chunks for p in c.candidates[0].content.parts]
            text = "".join(p.text for p in parts if p.text)
            if text:
                return types.Content(role="model", parts=[types.Part(text=text)])
            return types.Content(role="model", parts=parts)
        if self.calls == 7:  # async
            response = asyncio.run(
                self.client.aio.models.generate_content(
                    model=self.model, contents=contents, config=config
                )
            )
        else:
            response = self.client.models.generate_content(
                model=self.model, contents=contents, config=config
            )
        return response.candidates[0].content


def run(agent: Agent) -> int:
    contents: list[types.Content] = []
    for turn, question in enumerate(common.QUESTIONS):
        contents.append(types.Content(role="user", parts=[types.Part(text=question)]))
        while True:
            answer = agent.call(contents)
            contents.append(answer)
            calls = [p.function_call for p in answer.parts or [] if p.function_call]
            if not calls:
                break
            contents.append(
                types.Content(
                    role="user",
                    parts=[
                        types.Part.from_function_response(
                            name=c.name, response={"result": common.tool_output(c.name, turn)}
                        )
                        for c in calls
                    ],
                )
            )
    return agent.calls


def main(config: dict[str, Any]) -> None:
    provider = common.provider(config, "google-genai-agent")
    instrumented = None
    if config.get("instrument", True):
        from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor

        instrumentor = GoogleGenAiSdkInstrumentor()
        # skip_dep_check: run it on a google-genai outside its supported range anyway (3.x)
        skip = bool(config.get("skip_dep_check"))
        instrumentor.instrument(tracer_provider=provider, skip_dep_check=skip)
        instrumented = instrumentor.is_instrumented_by_opentelemetry
    try:
        with common.conversation_scope(config, provider):
            calls = run(Agent(config["port"], config.get("vertex")))
    finally:
        provider.shutdown()
    out = {
        "calls": calls,
        "instrumented": instrumented,
        "versions": common.versions("google-genai", "opentelemetry-instrumentation-google-genai"),
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
