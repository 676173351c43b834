"""Just enough of the Gemini API's ``generateContent`` and ``streamGenerateContent`` (SSE) for a
two-tool agent: a user turn with tools allowed gets a ``functionCall`` (``get_time`` when the
question asks the time, else ``get_weather``; ADK's ``transfer_to_agent``, with the first agent it
allows, when that is the agent's only function), anything else a text answer. Answers are a function
of the request alone, so one agent sends the same requests in every run."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.stacks.gb_server import LoggingServer

TRANSFER = "transfer_to_agent"  # ADK's handoff: a function the model calls with the agent's name


def _label(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body.get("contents"), sort_keys=True).encode()).hexdigest()[:8]


def _tool_names(body: dict[str, Any]) -> list[str]:
    return [
        str(d.get("name"))
        for tool in body.get("tools") or []
        for d in tool.get("functionDeclarations") or []
    ]


def _wanted(body: dict[str, Any]) -> str | None:
    # ADK's transfer only when it is the agent's one function (a sub-agent may transfer back).
    names = [name for name in _tool_names(body) if name != TRANSFER] or _tool_names(body)
    last = (body.get("contents") or [{}])[-1]
    texts = [p["text"] for p in last.get("parts") or [] if isinstance(p.get("text"), str)]
    config = (body.get("toolConfig") or {}).get("functionCallingConfig") or {}
    if not names or not texts or config.get("mode") == "NONE":
        return None
    allowed = config.get("allowedFunctionNames") or names
    return "get_time" if "time" in " ".join(texts) and "get_time" in allowed else allowed[0]


def _transfer_target(body: dict[str, Any]) -> str | None:
    """The first agent ADK's ``transfer_to_agent`` declaration allows (its ``agent_name`` enum)."""
    for tool in body.get("tools") or []:
        for d in tool.get("functionDeclarations") or []:
            if d.get("name") != TRANSFER:
                continue
            keys = ("parametersJsonSchema", "parameters_json_schema", "parameters")
            schema = next((d[key] for key in keys if isinstance(d.get(key), dict)), {})
            names = (schema.get("properties") or {}).get("agent_name", {}).get("enum") or []
            return str(names[0]) if names else None
    return None


def reply(body: dict[str, Any], seq: int, model: str) -> dict[str, Any]:
    label = _label(body)
    tool = _wanted(body)
    if tool is not None:
        city = ["Paris", "Oslo", "Lima"][int(label, 16) % 3]
        args: dict[str, Any] = {"city": city} if tool == "get_weather" else {}
        if tool == TRANSFER:
            args = {"agent_name": _transfer_target(body)}
        part: dict[str, Any] = {"functionCall": {"name": tool, "args": args}}
        finish = "STOP"
    else:
        part = {"text": f"Answer {label}: it is mild."}
        finish = "STOP"
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": finish, "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": 40 + seq,
            "candidatesTokenCount": 7,
            "totalTokenCount": 47 + seq,
        },
        "modelVersion": f"{model}-001",
        "responseId": f"gem-w{seq}",
    }


def answer(path: str, body: dict[str, Any], seq: int) -> tuple[str, bytes] | None:
    route = path.split("?", 1)[0]
    head, _, method = route.rpartition(":")
    model = head.rpartition("/")[2]
    if method == "generateContent":
        return "application/json", json.dumps(reply(body, seq, model)).encode()
    if method == "streamGenerateContent":
        whole = reply(body, seq, model)
        part = whole["candidates"][0]["content"]["parts"][0]
        chunks = []
        if "text" in part:  # the text in two pieces, the finish on the last
            half = len(part["text"]) // 2
            for index, piece in enumerate((part["text"][:half], part["text"][half:])):
                chunk = json.loads(json.dumps(whole))
                chunk["candidates"][0]["content"]["parts"] = [{"text": piece}]
                if index == 0:
                    del chunk["candidates"][0]["finishReason"]
                chunks.append(chunk)
        else:
            chunks.append(whole)
        events = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks)
        return "text/event-stream", events.encode()
    return None


def server() -> LoggingServer:
    return LoggingServer(answer)
