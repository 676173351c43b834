"""A tool-using agent on the real openai or anthropic client, under one real instrumentation, with
af_otel's processor writing OTLP JSON lines: one scenario of the wire tests, run as a subprocess.

    python agent.py '<json config>'

The config names the instrumentation, the agent profile, the loopback port, the trace file, the
store directory, the run id and the span limits (``null``: the SDK's defaults). The client talks
to its provider's own host (api.openai.com, api.anthropic.com); its transport reroutes each
request to the loopback server and adds the id of the span current while it was sent. It imports
af_otel but nothing from the tests, so it runs in a side venv with the repository on its path.
Prints the versions of what ran as JSON.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import json
import sys
from collections.abc import Callable
from importlib import metadata
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from responses_agent import responses_agent  # beside this file

import af_otel
from af_otel.store import LocalStore

SPAN_HEADER = "x-af-wire-span"  # tests/wire/server.py reads it
CALLS_OPENAI = 30
CALLS_ANTHROPIC = 20

# instrumentation -> (module, instrumentor class, distribution, client)
INSTRUMENTORS = {
    "genai-openai": (
        "opentelemetry.instrumentation.genai.openai",
        "OpenAIInstrumentor",
        "opentelemetry-instrumentation-genai-openai",
        "openai",
    ),
    "openinference-openai": (
        "openinference.instrumentation.openai",
        "OpenAIInstrumentor",
        "openinference-instrumentation-openai",
        "openai",
    ),
    "openai-v2": (
        "opentelemetry.instrumentation.openai_v2",
        "OpenAIInstrumentor",
        "opentelemetry-instrumentation-openai-v2",
        "openai",
    ),
    "genai-anthropic": (
        "opentelemetry.instrumentation.genai.anthropic",
        "AnthropicInstrumentor",
        "opentelemetry-instrumentation-genai-anthropic",
        "anthropic",
    ),
    "openinference-anthropic": (
        "openinference.instrumentation.anthropic",
        "AnthropicInstrumentor",
        "openinference-instrumentation-anthropic",
        "anthropic",
    ),
    "openllmetry-openai": (
        "opentelemetry.instrumentation.openai",
        "OpenAIInstrumentor",
        "opentelemetry-instrumentation-openai",
        "openai",
    ),
    "openllmetry-anthropic": (
        "opentelemetry.instrumentation.anthropic",
        "AnthropicInstrumentor",
        "opentelemetry-instrumentation-anthropic",
        "anthropic",
    ),
}

# 2,230 characters: longer than a common production value-length limit of 1,500.
LONG_QUESTION = (
    "I am planning a week of outdoor work and need to know the weather. "
    + " ".join(
        f"Day {day}: site {day * 7} needs a dry morning, wind under 30 km/h."
        for day in range(1, 33)
    )
)[:2230]
QUESTIONS = (
    "What is the weather in Paris?",
    "And what time is it there?",
    "Weather in Oslo, please.",
    "What time is it in Lima?",
    "Is it raining in Paris?",
    "Current time in Oslo?",
)
OPENAI_TOOLS = [
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
ANTHROPIC_TOOLS = [
    {
        "name": tool["function"]["name"],  # type: ignore[index]
        "description": tool["function"]["description"],  # type: ignore[index]
        "input_schema": tool["function"]["parameters"],  # type: ignore[index]
    }
    for tool in OPENAI_TOOLS
]
ANSWER_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "answer",
        "schema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}


def _http(client_module: Any) -> Any:
    # openai >= 3 and anthropic >= 2 talk through httpx2 (httpx's API under another name).
    base_client = importlib.import_module(client_module.__name__ + "._base_client")
    return importlib.import_module("httpx2" if "httpx2" in vars(base_client) else "httpx")


def _rerouted(http: Any, port: int, asynchronous: bool) -> Any:
    """An HTTP client whose transport sends every request to the loopback server, over real
    HTTP, with the current span's id in a header; the URL the client built is kept otherwise."""

    def reroute(request: Any) -> None:
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=port)
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            request.headers[SPAN_HEADER] = format(context.span_id, "016x")

    if asynchronous:

        class AsyncReroute(http.AsyncHTTPTransport):  # type: ignore[misc,name-defined]
            async def handle_async_request(self, request: Any) -> Any:
                reroute(request)
                return await super().handle_async_request(request)

        return http.AsyncClient(transport=AsyncReroute())

    class Reroute(http.HTTPTransport):  # type: ignore[misc,name-defined]
        def handle_request(self, request: Any) -> Any:
            reroute(request)
            return super().handle_request(request)

    return http.Client(transport=Reroute())


# -- OpenAI ----------------------------------------------------------------------------------------


def _openai_params(profile: str, call: int, fresh: bool) -> dict[str, Any]:
    """The dials of call number ``call`` (1-based); ``fresh``: the last turn is a new question."""
    params: dict[str, Any] = {"temperature": 0.2, "max_tokens": 300, "seed": 7}
    if call % 4 == 0:
        params["top_p"] = 0.9
    if profile != "dials":
        return params
    params["parallel_tool_calls"] = call % 2 == 0
    if fresh:
        params["tool_choice"] = (
            {"type": "function", "function": {"name": "get_time"}} if call % 3 else "required"
        )
    elif call % 3 == 0:
        params["tool_choice"] = "none"
    if call % 5 == 0:
        params["stop"] = ["END"]
    if call % 7 == 0:
        params["response_format"] = ANSWER_SCHEMA
    if call % 6 == 0:
        params["reasoning_effort"] = "low"
    return params


def _openai_message(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for call in message.tool_calls
        ]
    return out


def _openai_streamed(chunks: Any) -> dict[str, Any]:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
            for piece in delta.tool_calls or []:
                call = calls.setdefault(
                    piece.index,
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                call["id"] = piece.id or call["id"]
                if piece.function is not None:
                    call["function"]["name"] += piece.function.name or ""
                    call["function"]["arguments"] += piece.function.arguments or ""
    out: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        out["tool_calls"] = [calls[index] for index in sorted(calls)]
    return out


def _tool_output(call: dict[str, Any], turn: int) -> str:
    if call["function"]["name"] == "get_time":
        return f"{9 + turn % 10}:{turn % 6}0 local time"
    return f"{12 + turn % 9}C, {'sunny' if turn % 2 else 'light rain'}"


class OpenAIAgent:
    def __init__(self, openai: Any, http: Any, port: int, profile: str) -> None:
        host = "https://api.openai.com/v1"
        self.client = openai.OpenAI(
            api_key="sk-wire", base_url=host, http_client=_rerouted(http, port, False)
        )
        self.aclient = openai.AsyncOpenAI(
            api_key="sk-wire", base_url=host, http_client=_rerouted(http, port, True)
        )
        self.profile = profile
        self.calls = 0

    def _kwargs(self, messages: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
        self.calls += 1
        fresh = messages[-1]["role"] == "user"
        params = _openai_params(self.profile, self.calls, fresh)
        kwargs: dict[str, Any] = {
            # OpenAI refuses reasoning_effort for the gpt-4o family, and af_otel relies on that
            # (af_otel.model.fields.NON_REASONING_MODELS): a call that sets it goes to a
            # reasoning model, as it would have to against the real API.
            "model": "o4-mini" if "reasoning_effort" in params else "gpt-4o-mini",
            "messages": copy.deepcopy(messages),
            "tools": OPENAI_TOOLS,
            **params,
        }
        if stream:
            kwargs |= {"stream": True, "stream_options": {"include_usage": True}}
        return kwargs

    def call(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        stream = (self.calls + 1) % 3 == 0
        kwargs = self._kwargs(messages, stream)
        reply = self.client.chat.completions.create(**kwargs)
        if stream:
            return _openai_streamed(reply)
        return _openai_message(reply.choices[0].message)

    async def acall(self, messages: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
        kwargs = self._kwargs(messages, stream)
        reply = await self.aclient.chat.completions.create(**kwargs)
        if not stream:
            return _openai_message(reply.choices[0].message)
        chunks = [chunk async for chunk in reply]
        return _openai_streamed(chunks)


def _settle(
    messages: list[dict[str, Any]], reply: dict[str, Any], turn: int
) -> list[dict[str, Any]]:
    """Append the assistant turn and, for each tool call it made, the tool's result."""
    messages.append(reply)
    for call in reply.get("tool_calls") or []:
        messages.append(
            {"role": "tool", "tool_call_id": call["id"], "content": _tool_output(call, turn)}
        )
    return messages


def openai_agent(openai: Any, http: Any, port: int, profile: str) -> int:
    agent = OpenAIAgent(openai, http, port, profile)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a weather agent. Use the tools."},
        {"role": "system", "content": "Answer in one sentence."},
        # Three instructions: with OpenInference's attribute count per call this puts one call
        # where the SDK's 128-attribute limit has evicted both tool definitions (and the
        # invocation parameters) while every message is still on the span.
        {"role": "system", "content": "Name the tool you used."},
        {"role": "user", "content": LONG_QUESTION},
    ]
    turn = 0

    def turn_pair() -> None:
        nonlocal turn
        reply = agent.call(messages)
        _settle(messages, reply, turn)
        if reply.get("tool_calls"):
            _settle(messages, agent.call(messages), turn)
        turn += 1
        messages.append({"role": "user", "content": QUESTIONS[turn % len(QUESTIONS)]})

    while agent.calls < 12:
        turn_pair()

    # Fan-out: three questions on the same history at once, then a follow-up that grows from the
    # first branch only (its parent is that branch, whichever finished last).
    async def fan_out() -> list[dict[str, Any]]:
        branches = [
            [*messages[:-1], {"role": "user", "content": f"Branch {index}: weather in Lima?"}]
            for index in range(3)
        ]
        replies = await asyncio.gather(
            *(agent.acall(b, stream=index == 1) for index, b in enumerate(branches))
        )
        return _settle(branches[0], replies[0], turn)

    messages[:] = asyncio.run(fan_out())
    _settle(messages, agent.call(messages), turn)
    turn += 1
    messages.append({"role": "user", "content": QUESTIONS[turn % len(QUESTIONS)]})
    while agent.calls < CALLS_OPENAI:
        turn_pair()
    return agent.calls


# -- Anthropic -------------------------------------------------------------------------------------

SYSTEM_BLOCKS = [
    {
        "type": "text",
        "text": "You are a weather agent. Use the tools; say when one fails.",
        "cache_control": {"type": "ephemeral"},
    },
    {"type": "text", "text": "Answer in one sentence."},
]


def _anthropic_params(call: int, fresh: bool) -> dict[str, Any]:
    params: dict[str, Any] = {"max_tokens": 2048}
    if fresh and call % 3 == 1:
        params["tool_choice"] = {"type": "tool", "name": "get_time"}
        return params  # a forced tool does not go with extended thinking
    if not fresh and call % 4 == 0:
        params["tool_choice"] = {"type": "none"}
    elif call % 5 == 0:
        params["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
    params["thinking"] = {"type": "enabled", "budget_tokens": 1024 + 64 * (call % 4)}
    if call % 6 == 0:
        params["stop_sequences"] = ["END"]
    return params


def _anthropic_streamed(events: Any) -> list[dict[str, Any]]:
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for event in events:
        if event.type == "content_block_start":
            blocks[event.index] = event.content_block.model_dump(exclude_none=True)
        elif event.type == "content_block_delta":
            block, delta = blocks[event.index], event.delta
            if delta.type == "text_delta":
                block["text"] += delta.text
            elif delta.type == "thinking_delta":
                block["thinking"] += delta.thinking
            elif delta.type == "signature_delta":
                block["signature"] += delta.signature
            elif delta.type == "input_json_delta":
                partial[event.index] = partial.get(event.index, "") + delta.partial_json
    for index, text in partial.items():
        blocks[index]["input"] = json.loads(text)
    return [blocks[index] for index in sorted(blocks)]


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [block.model_dump(exclude_none=True) for block in content]


class AnthropicAgent:
    def __init__(self, anthropic: Any, http: Any, port: int) -> None:
        host = "https://api.anthropic.com"
        self.client = anthropic.Anthropic(
            api_key="sk-ant-wire", base_url=host, http_client=_rerouted(http, port, False)
        )
        self.aclient = anthropic.AsyncAnthropic(
            api_key="sk-ant-wire", base_url=host, http_client=_rerouted(http, port, True)
        )
        self.calls = 0
        self.results = 0

    def _kwargs(
        self, messages: list[dict[str, Any]], stream: bool, dials_of: int | None = None
    ) -> dict[str, Any]:
        self.calls += 1
        last = messages[-1]["content"]
        fresh = isinstance(last, str)
        kwargs: dict[str, Any] = {
            "model": "claude-sonnet-5-5",
            "system": SYSTEM_BLOCKS,
            "messages": copy.deepcopy(messages),
            "tools": ANTHROPIC_TOOLS,
            **_anthropic_params(dials_of or self.calls, fresh),
        }
        if stream:
            kwargs["stream"] = True
        return kwargs

    def call(
        self, messages: list[dict[str, Any]], dials_of: int | None = None
    ) -> list[dict[str, Any]]:
        """One call; ``dials_of``: send the dials of that earlier call number."""
        stream = (self.calls + 1) % 3 == 0
        reply = self.client.messages.create(**self._kwargs(messages, stream, dials_of))
        return _anthropic_streamed(reply) if stream else _blocks(reply.content)

    async def acall(self, messages: list[dict[str, Any]], stream: bool) -> list[dict[str, Any]]:
        reply = await self.aclient.messages.create(**self._kwargs(messages, stream))
        if not stream:
            return _blocks(reply.content)
        return _anthropic_streamed([event async for event in reply])

    def settle(self, messages: list[dict[str, Any]], content: list[dict[str, Any]]) -> None:
        messages.append({"role": "assistant", "content": content})
        results = []
        for block in content:
            if block["type"] != "tool_use":
                continue
            self.results += 1
            failed = self.results % 2 == 1  # every other tool run fails
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": block["id"],
                    "content": "upstream timeout" if failed else f"{10 + self.results}C, dry",
                    **({"is_error": True} if failed else {}),
                }
            )
        if results:
            messages.append({"role": "user", "content": results})


def anthropic_agent(anthropic: Any, http: Any, port: int) -> int:
    agent = AnthropicAgent(anthropic, http, port)
    messages: list[dict[str, Any]] = [{"role": "user", "content": LONG_QUESTION}]
    turn = 0

    def turn_pair() -> None:
        nonlocal turn
        content = agent.call(messages)
        agent.settle(messages, content)
        if messages[-1]["role"] == "user":
            agent.settle(messages, agent.call(messages))
        turn += 1
        messages.append({"role": "user", "content": QUESTIONS[turn % len(QUESTIONS)]})

    while agent.calls < 8:
        turn_pair()

    async def fan_out() -> list[dict[str, Any]]:
        branches = [
            [*messages[:-1], {"role": "user", "content": f"Branch {index}: weather in Lima?"}]
            for index in range(3)
        ]
        replies = await asyncio.gather(
            *(agent.acall(b, stream=index == 1) for index, b in enumerate(branches))
        )
        agent.settle(branches[0], replies[0])
        return branches[0]

    messages[:] = asyncio.run(fan_out())
    agent.settle(messages, agent.call(messages))
    turn += 1
    messages.append({"role": "user", "content": QUESTIONS[turn % len(QUESTIONS)]})
    while agent.calls < CALLS_ANTHROPIC - 2:
        turn_pair()
    # A forged signature: the same request twice, the second with one replayed signature changed.
    # The model would reject the second; the record must not make the two one request.
    forged = copy.deepcopy(messages)
    for message in reversed(forged):
        thinking = [
            b for b in message["content"] if isinstance(b, dict) and b.get("type") == "thinking"
        ]
        if message["role"] == "assistant" and thinking:
            thinking[0]["signature"] = "forged" + thinking[0]["signature"]
            break
    agent.call(messages)
    agent.call(forged, dials_of=agent.calls)
    return agent.calls


# -- main ------------------------------------------------------------------------------------------


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def main(config: dict[str, Any]) -> None:
    module_name, class_name, distribution, client_name = INSTRUMENTORS[config["instrumentation"]]
    limits = config.get("limits")
    span_limits = SpanLimits(**limits) if limits is not None else None
    provider = TracerProvider(
        resource=Resource.create({"service.name": "wire-agent"}), span_limits=span_limits
    )
    provider.add_span_processor(
        af_otel.ReceiptSpanProcessor(
            SimpleSpanProcessor(FileSpanExporter(config["trace"])),
            store=LocalStore(config["store"]),
        )
    )
    instrumentor = getattr(importlib.import_module(module_name), class_name)()
    instrumentor.instrument(tracer_provider=provider)
    client_module = importlib.import_module(client_name)
    http = _http(client_module)
    if config["profile"] == "responses":
        client_name = "responses"
    agents: dict[str, Callable[[], int]] = {
        "openai": lambda: openai_agent(client_module, http, config["port"], config["profile"]),
        "responses": lambda: responses_agent(
            client_module.OpenAI(
                api_key="sk-wire",
                base_url="https://api.openai.com/v1",
                http_client=_rerouted(http, config["port"], False),
            )
        ),
        "anthropic": lambda: anthropic_agent(client_module, http, config["port"]),
    }
    try:
        with af_otel.run(config["run_id"]):
            calls = agents[client_name]()
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    versions = {
        name: _version(name)
        for name in (
            distribution,
            client_module.__name__,
            "opentelemetry-sdk",
            "opentelemetry-util-genai",
        )
    }
    json.dump({"calls": calls, "versions": {k: v for k, v in versions.items() if v}}, sys.stdout)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
