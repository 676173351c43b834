"""OpenAI's Responses API (``POST /v1/responses``) for the loopback wire server: deterministic
answers, streaming, an ``incomplete`` status, and the history the server holds per response id.

A request that names ``previous_response_id`` shows the model more than its body: the context of
that earlier response (its input items, held history included, then its output items) before the
new input, as the real API does; ``instructions`` are not carried over. The server logs that
context per request (`Responses.seen`) next to the body, so the wire tests compare the served view
with what the model saw, not only with what was sent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

# A max_output_tokens below this ends the answer early: status "incomplete".
INCOMPLETE_BELOW: Final = 32


@dataclass(frozen=True, slots=True)
class Seen:
    """The context the model saw for one request: its instructions and every input item, the
    held history first."""

    instructions: str | None
    items: tuple[dict[str, Any], ...]


def input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    if raw is None:
        return []
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    return [item if "type" in item else {"type": "message", **item} for item in raw]


class Responses:
    """The held state of one server: each stored response's context, and what each request saw."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, list[dict[str, Any]]] = {}  # response id -> context + output
        self.seen: dict[int, Seen] = {}

    def answer(self, body: dict[str, Any], seq: int) -> tuple[int, Any, Iterator[str] | None]:
        """(HTTP status, JSON reply, SSE events or None) for one request."""
        previous = body.get("previous_response_id")
        with self._lock:
            held = self._held.get(previous) if previous else []
        if held is None:
            # The model sees nothing; what is logged as seen is the request's own context.
            with self._lock:
                self.seen[seq] = Seen(body.get("instructions"), tuple(input_items(body)))
            error = {"message": f"Previous response {previous} not found.", "type": "invalid"}
            return 400, {"error": error}, None
        context = [*held, *input_items(body)]
        response = _response(body, seq, context)
        with self._lock:
            self.seen[seq] = Seen(body.get("instructions"), tuple(context))
            if body.get("store", True) is not False:
                self._held[response["id"]] = [*context, *response["output"]]
        events = _events(response) if body.get("stream") else None
        return 200, response, events


# -- answers ---------------------------------------------------------------------------------------


def _text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(block.get("text", "")) for block in content or ())


def _tool_wanted(body: dict[str, Any], context: list[dict[str, Any]]) -> str | None:
    """The function this answer calls: the forced one, else one by the question's words, when
    the last item is the user's and tools are allowed."""
    names = [str(t["name"]) for t in body.get("tools") or () if t.get("type") == "function"]
    choice = body.get("tool_choice")
    last = context[-1] if context else {}
    if not names or choice == "none" or last.get("role") != "user":
        return None
    if isinstance(choice, dict) and choice.get("type") == "function":
        return str(choice["name"])
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        allowed = [str(t["name"]) for t in choice.get("tools") or ()]
        names = [n for n in names if n in allowed] or names
    return names[-1] if "time" in _text_of(last).lower() else names[0]


def _arguments(tool: str, seq: int) -> str:
    if tool == "get_time":
        return "{}"
    return json.dumps({"city": ("Paris", "Oslo", "Lima")[seq % 3]})


def _response(body: dict[str, Any], seq: int, context: list[dict[str, Any]]) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    reasoning = body.get("reasoning") or {}
    if reasoning.get("effort"):
        item: dict[str, Any] = {"type": "reasoning", "id": f"rs_w{seq}", "summary": []}
        if reasoning.get("summary"):
            item["summary"] = [{"type": "summary_text", "text": f"Thought {seq} over."}]
        if "reasoning.encrypted_content" in (body.get("include") or ()):
            item["encrypted_content"] = f"gAAAAenc{seq:04d}sealed"
        output.append(item)
    tool = _tool_wanted(body, context)
    status, incomplete = "completed", None
    if tool is not None:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_w{seq}",
                "call_id": f"call_w{seq}",
                "name": tool,
                "arguments": _arguments(tool, seq),
                "status": "completed",
            }
        )
    else:
        text = f"Answer {seq}: it is mild and dry."
        fmt = ((body.get("text") or {}).get("format") or {}).get("type")
        if fmt == "json_schema":
            text = json.dumps({"text": text})
        limit = body.get("max_output_tokens")
        if isinstance(limit, int) and limit < INCOMPLETE_BELOW:
            status, incomplete = "incomplete", {"reason": "max_output_tokens"}
            text = text[:limit]
        output.append(
            {
                "type": "message",
                "id": f"msg_w{seq}",
                "role": "assistant",
                "status": status,
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    words = sum(len(json.dumps(item)) for item in context) // 4
    return {
        "id": f"resp_w{seq}",
        "object": "response",
        "created_at": 1_700_000_000 + seq,
        "status": status,
        "incomplete_details": incomplete,
        "error": None,
        "model": body.get("model"),
        "instructions": body.get("instructions"),
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": reasoning or None,
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "top_p": body.get("top_p", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "truncation": body.get("truncation", "disabled"),
        "max_output_tokens": body.get("max_output_tokens"),
        "metadata": {},
        "usage": {
            "input_tokens": words,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 12,
            "output_tokens_details": {"reasoning_tokens": 4 if reasoning else 0},
            "total_tokens": words + 12,
        },
    }


def _events(response: dict[str, Any]) -> Iterator[str]:
    """The SSE stream of one response: created, each output item (text in deltas), then
    ``response.completed`` or ``response.incomplete``."""
    seq = 0

    def event(kind: str, **data: Any) -> str:
        nonlocal seq
        seq += 1
        return (
            f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': seq, **data})}\n\n"
        )

    started = {**response, "status": "in_progress", "output": [], "incomplete_details": None}
    yield event("response.created", response=started)
    yield event("response.in_progress", response=started)
    for index, item in enumerate(response["output"]):
        if item["type"] == "message":
            empty = {**item, "status": "in_progress", "content": []}
            yield event("response.output_item.added", output_index=index, item=empty)
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
            for start in range(0, len(text), 8):
                yield event(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=text[start : start + 8],
                    logprobs=[],
                )
            yield event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
            yield event(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part={**part, "text": text},
            )
        elif item["type"] == "function_call":
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            yield event(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=index,
                delta=item["arguments"],
            )
            yield event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            )
        else:
            yield event("response.output_item.added", output_index=index, item=item)
        yield event("response.output_item.done", output_index=index, item=item)
    final = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    yield event(final, response=response)
