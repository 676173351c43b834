"""A two-tool agent on the real boto3 Bedrock Runtime client (8 Converse calls, two of them
``converse_stream``: four questions, each a tool use and its answer; plus 2 ``invoke_model`` calls with an Anthropic
Messages body), under one real instrumentation (opentelemetry-instrumentation-botocore or
opentelemetry-instrumentation-genai-bedrock), with af_otel's processor: one scenario of the
Bedrock stack test, run as a subprocess in its side venv.

    python agent.py '<json config>'   # port, trace, store, run_id, run, instrumentation

The client keeps Bedrock's own regional host and fake credentials; its HTTP session is wrapped to
send each request to the loopback server with the current span's id in a header (botocore has no
pluggable transport; the tap's ``before-send`` handler sees the request before that).
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import boto3

from tests.stacks import gb_agent_common as common

MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"
INSTRUMENTORS = {
    "botocore": ("opentelemetry.instrumentation.botocore", "BotocoreInstrumentor"),
    "genai-bedrock": ("opentelemetry.instrumentation.genai.bedrock", "BedrockInstrumentor"),
}


def _rerouted(client: Any, port: int) -> Any:
    session = client._endpoint.http_session
    send = session.send

    def rerouted_send(request: Any) -> Any:
        _, _, rest = request.url.partition("://")
        request.url = f"http://127.0.0.1:{port}/" + rest.partition("/")[2]
        tag = common.span_tag()
        if tag:
            request.headers[common.SPAN_HEADER] = tag
        return send(request)

    session.send = rerouted_send
    return client


def _tools() -> list[dict[str, Any]]:
    return [
        {
            "toolSpec": {
                "name": t["name"],
                "description": t["description"],
                "inputSchema": {"json": t["schema"]},
            }
        }
        for t in (common.WEATHER, common.TIME)
    ]


def _settings(call: int) -> dict[str, Any]:
    inference: dict[str, Any] = {"maxTokens": 300, "temperature": 0.2}
    if call % 2 == 0:
        inference["topP"] = 0.9
    settings: dict[str, Any] = {"inferenceConfig": inference}
    tool_config: dict[str, Any] = {"tools": _tools()}
    if call == 3:
        tool_config["toolChoice"] = {"tool": {"name": "get_weather"}}
    settings["toolConfig"] = tool_config
    if call == 6:
        settings["additionalModelRequestFields"] = {"top_k": 5}
    return settings


def _streamed(response: Any) -> dict[str, Any]:
    """The assistant message a ConverseStream answer spells out in events."""
    text: list[str] = []
    use: dict[str, Any] | None = None
    pieces: list[str] = []
    for event in response["stream"]:
        if "contentBlockStart" in event:
            use = dict(event["contentBlockStart"]["start"]["toolUse"])
        delta = event.get("contentBlockDelta", {}).get("delta", {})
        if "text" in delta:
            text.append(delta["text"])
        if "toolUse" in delta:
            pieces.append(delta["toolUse"]["input"])
    if use is not None:
        return {
            "role": "assistant",
            "content": [{"toolUse": {**use, "input": json.loads("".join(pieces))}}],
        }
    return {"role": "assistant", "content": [{"text": "".join(text)}]}


def converse_agent(client: Any) -> int:
    messages: list[dict[str, Any]] = []
    calls = 0
    system = [{"text": "You are a terse assistant. Use the tools."}]
    for turn, question in enumerate(common.QUESTIONS):
        messages.append({"role": "user", "content": [{"text": question}]})
        while True:
            calls += 1
            settings = _settings(calls)
            if calls in (2, 5):  # streamed
                message = _streamed(
                    client.converse_stream(
                        modelId=MODEL, messages=messages, system=system, **settings
                    )
                )
            else:
                response = client.converse(
                    modelId=MODEL, messages=messages, system=system, **settings
                )
                message = response["output"]["message"]
            messages.append(message)
            uses = [b["toolUse"] for b in message["content"] if "toolUse" in b]
            if not uses:
                break
            results = [
                {
                    "toolResult": {
                        "toolUseId": u["toolUseId"],
                        "content": [{"text": common.tool_output(u["name"], turn)}],
                        **({"status": "error"} if turn == 2 else {}),
                    }
                }
                for u in uses
            ]
            messages.append({"role": "user", "content": results})
    return calls


def invoke_agent(client: Any) -> int:
    """Two InvokeModel calls with an Anthropic Messages body: a tool use and its answer."""
    tools = [
        {"name": t["name"], "description": t["description"], "input_schema": t["schema"]}
        for t in (common.WEATHER, common.TIME)
    ]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Oslo?"}]
    for _ in range(2):
        body = {
            "anthropic_version": "bedrock-2023-05-31",
            "max_tokens": 200,
            "system": "Be brief.",
            "messages": messages,
            "tools": tools,
        }
        response = client.invoke_model(modelId=MODEL, body=json.dumps(body))
        answer = json.loads(response["body"].read())
        messages = [*messages, {"role": "assistant", "content": answer["content"]}]
        uses = [b for b in answer["content"] if b["type"] == "tool_use"]
        if not uses:
            break
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": u["id"], "content": "12C"} for u in uses
                ],
            }
        )
    return 2


def main(config: dict[str, Any]) -> None:
    provider = common.provider(config, "bedrock-agent")
    module, name = INSTRUMENTORS[config["instrumentation"]]
    instrumentor = getattr(importlib.import_module(module), name)()
    instrumentor.instrument(tracer_provider=provider)
    client = _rerouted(
        boto3.client(
            "bedrock-runtime",
            region_name="us-east-1",
            aws_access_key_id="AKIDFAKE",
            aws_secret_access_key="fake-secret",
        ),
        config["port"],
    )
    try:
        with common.conversation_scope(config, provider):
            calls = converse_agent(client)
            if config.get("invoke"):
                calls += invoke_agent(client)
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    out = {
        "calls": calls,
        "versions": common.versions(
            "boto3",
            "botocore",
            "opentelemetry-instrumentation-botocore",
            "opentelemetry-instrumentation-genai-bedrock",
        ),
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
