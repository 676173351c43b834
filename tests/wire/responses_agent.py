"""A tool-using agent on OpenAI's Responses API (``client.responses.create``): the ``responses``
profile of agent.py, imported from beside it (it imports nothing from the tests).

Sixteen calls in two conversations, then one that fails. The first is stateless (``store=False``): each request
carries the whole history as input items, reasoning items replayed with their encrypted content.
The second keeps its history on the server: each request names ``previous_response_id`` and
carries only the new items. Between them: ``instructions`` and none, function tools with
``strict``, every kind of ``tool_choice`` for function tools (``auto``, ``none``, ``required``,
a named function, ``allowed_tools`` in both modes), ``reasoning`` (effort, summary), a
``json_schema`` text format, ``max_output_tokens`` low enough for an ``incomplete`` answer (one
plain, one streamed), ``truncation``, ``parallel_tool_calls`` and streaming.
"""

from __future__ import annotations

import copy
from typing import Any

CALLS_RESPONSES = 17

TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
        "strict": True,
    },
    {
        "type": "function",
        "name": "get_time",
        "description": "The local time now.",
        "parameters": {"type": "object", "properties": {}},
        "strict": False,
    },
]
ANSWER_FORMAT = {
    "format": {
        "type": "json_schema",
        "name": "answer",
        "schema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        },
        "strict": True,
    }
}
INSTRUCTIONS = "You are a weather agent. Use the tools; answer in one sentence."


def _item(item: Any) -> dict[str, Any]:
    """An output item as the next request's input item."""
    data: dict[str, Any] = item.model_dump(exclude_none=True)
    if data["type"] == "reasoning":
        data.pop("status", None)
    return data


def _tool_output(call: dict[str, Any], turn: int) -> dict[str, Any]:
    text = f"{9 + turn}:00 local time" if call["name"] == "get_time" else f"{12 + turn}C, dry"
    return {"type": "function_call_output", "call_id": call["call_id"], "output": text}


def _streamed(events: Any) -> list[dict[str, Any]]:
    """The output items of a streamed response, from its final event."""
    final = None
    for event in events:
        if event.type in ("response.completed", "response.incomplete", "response.failed"):
            final = event.response
    assert final is not None, "the stream ended without a final response"
    return [_item(item) for item in final.output]


class ResponsesAgent:
    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls = 0

    def call(self, stream: bool = False, **kwargs: Any) -> tuple[str, list[dict[str, Any]]]:
        """One call: (response id, output items as input items)."""
        self.calls += 1
        kwargs = {"model": "gpt-5-mini", "tools": TOOLS, **copy.deepcopy(kwargs)}
        if stream:
            reply = self.client.responses.create(stream=True, **kwargs)
            items = _streamed(reply)
            return "", items
        reply = self.client.responses.create(**kwargs)
        return str(reply.id), [_item(item) for item in reply.output]


def responses_agent(client: Any) -> int:
    agent = ResponsesAgent(client)
    sealed = {"reasoning": {"effort": "low"}, "include": ["reasoning.encrypted_content"]}
    # -- stateless: the whole history in every request --------------------------------------------
    history: list[dict[str, Any]] = [{"role": "user", "content": "What is the weather in Paris?"}]

    def stateless(stream: bool = False, **kwargs: Any) -> list[dict[str, Any]]:
        _, out = agent.call(stream, input=history, store=False, **kwargs)
        history.extend(out)
        history.extend(_tool_output(i, agent.calls) for i in out if i["type"] == "function_call")
        return out

    stateless(instructions=INSTRUCTIONS, tool_choice="auto", **sealed)  # 1: reasoning + call
    stateless(instructions=INSTRUCTIONS, tool_choice="none", **sealed)  # 2: replays reasoning
    history.append({"role": "user", "content": "And what time is it there?"})
    stateless(  # 3
        instructions=INSTRUCTIONS,
        tool_choice={"type": "function", "name": "get_time"},
        parallel_tool_calls=False,
    )
    stateless(instructions=INSTRUCTIONS, text=ANSWER_FORMAT, stream=True)  # 4: structured
    history.append({"role": "user", "content": "Weather in Oslo, please."})
    stateless(tool_choice="required", max_output_tokens=400)  # 5: no instructions
    stateless(  # 6
        instructions=INSTRUCTIONS,
        tool_choice={
            "type": "allowed_tools",
            "mode": "auto",
            "tools": [{"type": "function", "name": "get_weather"}],
        },
        truncation="auto",
        reasoning={"effort": "medium", "summary": "auto"},
    )
    history.append({"role": "user", "content": "Summarize all of that."})
    stateless(instructions=INSTRUCTIONS, tool_choice="none", max_output_tokens=16)  # 7: incomplete
    # 8: the conversation goes on after the cut answer, which it carries
    history.append({"role": "user", "content": "Go on."})
    stateless(instructions=INSTRUCTIONS, tool_choice="none")
    # -- server-held: only the new items, previous_response_id names the rest ----------------------
    first, out = agent.call(input="Weather in Lima?", instructions=INSTRUCTIONS)  # 9
    previous = first
    calls = [i for i in out if i["type"] == "function_call"]
    turn = 0

    def held(new: list[dict[str, Any]], stream: bool = False, **kwargs: Any) -> None:
        nonlocal previous, calls, turn
        turn += 1
        if stream:
            # a stream's id is in its events; the agent reads it from the final one
            self_id, out = _held_stream(agent, previous, new, **kwargs)
        else:
            self_id, out = agent.call(previous_response_id=previous, input=new, **kwargs)
        previous = self_id
        calls = [i for i in out if i["type"] == "function_call"]

    held([_tool_output(c, 9) for c in calls], instructions=INSTRUCTIONS)  # 10: a bare tool result
    held([{"role": "user", "content": "What time is it in Lima?"}], tool_choice="required")  # 11
    held([_tool_output(c, 11) for c in calls], stream=True, tool_choice="none")  # 12
    held(  # 13
        [{"role": "user", "content": "Is it raining in Oslo?"}],
        instructions=INSTRUCTIONS,
        reasoning={"effort": "high"},
        tool_choice={
            "type": "allowed_tools",
            "mode": "required",
            "tools": [{"type": "function", "name": "get_weather"}],
        },
    )
    held([_tool_output(c, 13) for c in calls], text=ANSWER_FORMAT)  # 14
    held(  # 15
        [{"role": "user", "content": "Current time in Paris?"}],
        tool_choice={"type": "function", "name": "get_time"},
        parallel_tool_calls=True,
    )
    # 16: incomplete, streamed (the stream ends with response.incomplete)
    held(
        [_tool_output(c, 15) for c in calls], stream=True, tool_choice="none", max_output_tokens=20
    )
    try:  # 17: a response the server no longer holds: the request fails (HTTP 400)
        agent.call(previous_response_id="resp_gone", input="And tomorrow?")
    except Exception as exc:
        if getattr(exc, "status_code", None) != 400:
            raise
    return agent.calls


def _held_stream(
    agent: ResponsesAgent, previous: str, new: list[dict[str, Any]], **kwargs: Any
) -> tuple[str, list[dict[str, Any]]]:
    agent.calls += 1
    body = {"model": "gpt-5-mini", "tools": TOOLS, **copy.deepcopy(kwargs)}
    stream = agent.client.responses.create(
        stream=True, previous_response_id=previous, input=new, **body
    )
    final = None
    for event in stream:
        if event.type in ("response.completed", "response.incomplete", "response.failed"):
            final = event.response
    assert final is not None, "the stream ended without a final response"
    return str(final.id), [_item(item) for item in final.output]
