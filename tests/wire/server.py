"""A loopback HTTP server speaking just enough of the OpenAI Chat Completions and Anthropic Messages
APIs for a tool-using agent, that logs every request body it receives.

The log is the ground truth of the wire tests: what the model was sent, byte for byte, before any
instrumentation or af_otel saw it. Answers are deterministic (a function of the request alone; only
the response id counts arrivals) and include streaming (SSE) with tool calls, thinking blocks and signatures.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.wire.loopback import SPAN_HEADER, Loopback, reply
from tests.wire.responses_server import Responses


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One request as it arrived: its arrival number, path, the span header and the parsed body."""

    seq: int
    path: str
    span_id: str | None
    body: dict[str, Any]


class WireServer(Loopback):
    """A `Loopback` server that logs each request and answers it as its path's API would."""

    def __init__(self) -> None:
        self.requests: list[WireRequest] = []
        self.responses = Responses()  # the Responses API's held history (responses_server.py)
        self._lock = threading.Lock()
        super().__init__(self._post)

    def _post(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        path = handler.path
        with self._lock:
            seq = len(self.requests) + 1
            self.requests.append(WireRequest(seq, path, handler.headers.get(SPAN_HEADER), body))
        if path.endswith("/chat/completions"):
            events = _openai_events(body, seq) if body.get("stream") else None
            answer: Any = _openai_reply(body, seq)
        elif path.endswith("/messages"):
            events = _anthropic_events(body, seq) if body.get("stream") else None
            answer = _anthropic_reply(body, seq)
        elif path.endswith("/responses"):
            status, answer, events = self.responses.answer(body, seq)
            if status != 200:
                handler.send_error(status, json.dumps(answer))
                return
        else:
            handler.send_error(404)
            return
        if events is None:
            reply(handler, "application/json", json.dumps(answer).encode())
        else:
            reply(handler, "text/event-stream", "".join(events).encode())


# -- OpenAI Chat Completions ---------------------------------------------------------------------


def _tool_names(body: dict[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        inner = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        names.append(str(inner.get("name")))
    return names


def _openai_tool_wanted(body: dict[str, Any]) -> str | None:
    """The tool this answer calls: the forced one, else the first, when the last turn is the
    user's and tools are allowed."""
    names = _tool_names(body)
    choice = body.get("tool_choice")
    if not names or choice == "none" or body["messages"][-1].get("role") != "user":
        return None
    if isinstance(choice, dict):
        return str(choice["function"]["name"])
    return names[-1] if "time" in str(body["messages"][-1].get("content")) else names[0]


def _label(body: dict[str, Any]) -> str:
    """A name for what the answer says, from the conversation it answers: the same request gets
    the same answer in every run, whatever order concurrent requests arrive in."""
    text = json.dumps(body.get("messages"), sort_keys=True).encode()
    return hashlib.sha256(text).hexdigest()[:8]


def _arguments(tool: str, label: str) -> str:
    city = ["Paris", "Oslo", "Lima"][int(label, 16) % 3]
    return json.dumps({"city": city} if "weather" in tool else {})


def _openai_reply(body: dict[str, Any], seq: int) -> dict[str, Any]:
    """The answer; ``seq`` (the arrival number) only names the response, as a provider's id."""
    label = _label(body)
    tool = _openai_tool_wanted(body)
    if tool is not None:
        call = {
            "id": f"call_{label}",
            "type": "function",
            "function": {"name": tool, "arguments": _arguments(tool, label)},
        }
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": f"Answer {label}: it is mild."}
        finish = "stop"
    return {
        "id": f"chatcmpl-w{seq}",
        "object": "chat.completion",
        "created": 1767225600 + seq,
        "model": f"{body.get('model')}-2024-07-18",
        "system_fingerprint": "fp_wire",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 40 + seq, "completion_tokens": 7, "total_tokens": 47 + seq},
    }


def _sse(data: dict[str, Any] | str, event: str | None = None) -> str:
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "") + f"data: {text}\n\n"


def _openai_events(body: dict[str, Any], seq: int) -> Iterator[str]:
    reply = _openai_reply(body, seq)
    message, finish = reply["choices"][0]["message"], reply["choices"][0]["finish_reason"]
    head = {key: reply[key] for key in ("id", "created", "model", "system_fingerprint")}
    head["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        return _sse({**head, "choices": [choice]})

    yield chunk({"role": "assistant", "content": None if message["content"] is None else ""})
    for call in message.get("tool_calls") or []:
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            }
        )
        for piece in (arguments[:half], arguments[half:]):
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    if message["content"]:
        words = message["content"].split(" ")
        for index, word in enumerate(words):
            yield chunk({"content": word if index == 0 else " " + word})
    yield chunk({}, finish)
    if (body.get("stream_options") or {}).get("include_usage"):
        yield _sse({**head, "choices": [], "usage": reply["usage"]})
    yield _sse("[DONE]")


# -- Anthropic Messages ----------------------------------------------------------------------------


def _anthropic_tool_wanted(body: dict[str, Any]) -> str | None:
    names = _tool_names(body)
    choice = body.get("tool_choice") or {}
    last = body["messages"][-1]
    content = last.get("content")
    fresh_question = last.get("role") == "user" and (
        isinstance(content, str)
        or not any(block.get("type") == "tool_result" for block in content or [])
    )
    if not names or choice.get("type") == "none" or not fresh_question:
        return None
    if choice.get("type") == "tool":
        return str(choice["name"])
    return names[-1] if "time" in json.dumps(content) else names[0]


def _anthropic_reply(body: dict[str, Any], seq: int) -> dict[str, Any]:
    label = _label(body)
    blocks: list[dict[str, Any]] = []
    if (body.get("thinking") or {}).get("type") == "enabled":
        blocks.append(
            {"type": "thinking", "thinking": f"Weighing {label}.", "signature": f"sig-{label}=="}
        )
    tool = _anthropic_tool_wanted(body)
    if tool is not None:
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_{label}",
                "name": tool,
                "input": json.loads(_arguments(tool, label)),
            }
        )
        stop = "tool_use"
    else:
        blocks.append({"type": "text", "text": f"Answer {label}: it is mild."})
        stop = "end_turn"
    return {
        "id": f"msg_w{seq}",
        "type": "message",
        "role": "assistant",
        "model": f"{body.get('model')}-20250929",
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 40 + seq, "output_tokens": 7},
    }


def _anthropic_events(body: dict[str, Any], seq: int) -> Iterator[str]:
    reply = _anthropic_reply(body, seq)
    start = {**reply, "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": reply["usage"]["input_tokens"], "output_tokens": 1}
    yield _sse({"type": "message_start", "message": start}, "message_start")
    for index, block in enumerate(reply["content"]):
        kind = block["type"]
        empty: dict[str, Any] = {
            "thinking": {"type": "thinking", "thinking": "", "signature": ""},
            "text": {"type": "text", "text": ""},
            "tool_use": {**block, "input": {}},
        }[kind]
        yield _sse(
            {"type": "content_block_start", "index": index, "content_block": empty},
            "content_block_start",
        )
        if kind == "thinking":
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        elif kind == "text":
            deltas = [{"type": "text_delta", "text": block["text"]}]
        else:
            text = json.dumps(block["input"])
            half = len(text) // 2
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in (text[:half], text[half:])
            ]
        for delta in deltas:
            yield _sse(
                {"type": "content_block_delta", "index": index, "delta": delta},
                "content_block_delta",
            )
        yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
    yield _sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": reply["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": reply["usage"]["output_tokens"]},
        },
        "message_delta",
    )
    yield _sse({"type": "message_stop"}, "message_stop")
