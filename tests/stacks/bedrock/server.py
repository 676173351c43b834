"""Just enough of Bedrock Runtime's ``Converse``, ``ConverseStream`` and ``InvokeModel`` (an
Anthropic Messages body)
for a two-tool agent, as botocore reaches it: a user turn with tools gets a
``toolUse`` (``get_time`` when the question asks the time, else ``get_weather``, or the tool
``toolChoice`` names), anything else a text answer. Answers are a function of the request."""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from typing import Any

from tests.stacks.gb_server import LoggingServer


def _label(messages: Any) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:8]


def _wanted(names: list[str], texts: list[str], forced: str | None) -> str | None:
    if not names or not texts:
        return None
    if forced:
        return forced
    return "get_time" if "time" in " ".join(texts) and "get_time" in names else names[0]


def converse(body: dict[str, Any], seq: int) -> dict[str, Any]:
    label = _label(body.get("messages"))
    config = body.get("toolConfig") or {}
    names = [t["toolSpec"]["name"] for t in config.get("tools") or [] if "toolSpec" in t]
    last = (body.get("messages") or [{}])[-1]
    texts = [b["text"] for b in last.get("content") or [] if "text" in b]
    forced = ((config.get("toolChoice") or {}).get("tool") or {}).get("name")
    tool = _wanted(names, texts, forced)
    if tool is not None:
        city = ["Paris", "Oslo", "Lima"][int(label, 16) % 3]
        use = {"toolUseId": f"tooluse_{label}", "name": tool, "input": {"city": city}}
        content: list[dict[str, Any]] = [{"toolUse": use}]
        stop = "tool_use"
    else:
        content, stop = [{"text": f"Answer {label}: it is mild."}], "end_turn"
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {"inputTokens": 40 + seq, "outputTokens": 7, "totalTokens": 47 + seq},
        "metrics": {"latencyMs": 5},
    }


def invoke(body: dict[str, Any], seq: int) -> dict[str, Any]:
    label = _label(body.get("messages"))
    names = [t["name"] for t in body.get("tools") or []]
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    texts = [b["text"] for b in blocks if b.get("type") == "text"]
    tool = _wanted(names, texts, None)
    if tool is not None:
        reply: list[dict[str, Any]] = [
            {"type": "tool_use", "id": f"toolu_{label}", "name": tool, "input": {"city": "Oslo"}}
        ]
        stop = "tool_use"
    else:
        reply, stop = [{"type": "text", "text": f"Answer {label}: it is mild."}], "end_turn"
    return {
        "id": f"msg_w{seq}",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": reply,
        "stop_reason": stop,
        "usage": {"input_tokens": 40 + seq, "output_tokens": 7},
    }


def _frame(event: str, payload: dict[str, Any]) -> bytes:
    """One message of AWS's event-stream encoding (length-prefixed headers and payload, each part
    guarded by a CRC32), as ConverseStream answers."""
    headers = b""
    for name, value in (
        (":event-type", event),
        (":content-type", "application/json"),
        (":message-type", "event"),
    ):
        headers += bytes([len(name)]) + name.encode() + b"\x07"
        headers += struct.pack(">H", len(value)) + value.encode()
    data = json.dumps(payload).encode()
    total = 12 + len(headers) + len(data) + 4
    prelude = struct.pack(">II", total, len(headers))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + data
    return head + struct.pack(">I", zlib.crc32(head))


def converse_stream(body: dict[str, Any], seq: int) -> bytes:
    """The Converse answer as ConverseStream events: a tool use's input in two pieces, a text in
    two deltas."""
    whole = converse(body, seq)
    block = whole["output"]["message"]["content"][0]
    frames = [_frame("messageStart", {"role": "assistant"})]
    if "toolUse" in block:
        use = block["toolUse"]
        start = {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}
        frames.append(_frame("contentBlockStart", {"contentBlockIndex": 0, "start": start}))
        text = json.dumps(use["input"])
        pieces = [{"toolUse": {"input": part}} for part in (text[:5], text[5:])]
    else:
        text = block["text"]
        pieces = [{"text": part} for part in (text[:5], text[5:])]
    frames += [_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": d}) for d in pieces]
    frames.append(_frame("contentBlockStop", {"contentBlockIndex": 0}))
    frames.append(_frame("messageStop", {"stopReason": whole["stopReason"]}))
    frames.append(_frame("metadata", {"usage": whole["usage"], "metrics": whole["metrics"]}))
    return b"".join(frames)


def answer(path: str, body: dict[str, Any], seq: int) -> tuple[str, bytes] | None:
    route = path.split("?", 1)[0]
    if route.endswith("/converse-stream"):
        return "application/vnd.amazon.eventstream", converse_stream(body, seq)
    if route.endswith("/converse"):
        return "application/json", json.dumps(converse(body, seq)).encode()
    if route.endswith("/invoke"):
        return "application/json", json.dumps(invoke(body, seq)).encode()
    return None


def server() -> LoggingServer:
    return LoggingServer(answer)
