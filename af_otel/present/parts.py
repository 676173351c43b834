"""Content parts and values as a person reads them, the same on a page and at the terminal: a
value as JSON text, a part labelled and folded, an earlier call the server held, in words."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from af_otel.reader.agents import Agent, AgentStep, ToolRun
from af_otel.reader.view import HeldCall

__all__ = [
    "FOLD_CHARS",
    "ShownPart",
    "agent_lines",
    "held_shown",
    "json_text",
    "show_part",
]

# Parts longer than this are shown folded, on the page and by the command line (but with
# --full): both stay readable with tool results of megabytes.
FOLD_CHARS: Final = 600


def json_text(value: Any, *, indent: bool = False) -> str:
    """A value as a person reads it, on the page (``indent``) or at the terminal (one line): JSON
    with sorted keys, or its repr when JSON cannot hold it (a fold marker such as ``UNKNOWN``)."""
    option = orjson.OPT_SORT_KEYS | (orjson.OPT_INDENT_2 if indent else 0)
    try:
        return orjson.dumps(value, option=option).decode()
    except TypeError:
        return repr(value)


@dataclass(frozen=True, slots=True)
class ShownPart:
    """One content part as a person is shown it: a label ("" for text), its whole text, what
    shows before the fold, and how many characters the fold leaves out."""

    label: str
    text: str
    head: str

    @property
    def cut(self) -> int:
        return len(self.text) - len(self.head)


def show_part(
    part: Mapping[str, Any], fold: int | None = FOLD_CHARS, *, indent: bool = False
) -> ShownPart:
    """The one rendering of a content part, for the page and the command line alike: text as it
    is, a tool call or result labelled with its name and id, anything else labelled by its type;
    a value that is not a string is written as `json_text`."""
    kind = part.get("type")
    content: object
    if kind == "text" and isinstance(part.get("content"), str):
        label, content = "", part["content"]
    elif kind == "tool_call":
        label, content = f"tool call {part.get('name')}({part.get('id')})", part.get("arguments")
    elif kind == "tool_call_response":
        label, content = f"tool result for {part.get('id')}", part.get("response")
    else:
        label, content = str(kind), part
    text = content if isinstance(content, str) else json_text(content, indent=indent)
    head = text if fold is None else text[:fold]
    return ShownPart(label, text, head)


def held_shown(call: HeldCall) -> str:
    """One earlier call the server held, in words: its request as served at its epoch and its
    answer, which no receipt covers; or the response the record of the history ends at."""
    if call.epoch is None:
        return f"{call.response_id}: not in this run's record"
    if call.messages is None:
        request = "messages not on record"
    else:
        request = f"{call.messages} message{'' if call.messages == 1 else 's'}, as served there"
    facts = "" if call.minted else "; it carries no receipt"
    if call.gaps:
        facts += f"; its gaps: {', '.join(call.gaps)}"
    return (
        f"epoch {call.epoch}'s request ({request}) and its answer {call.response_id} "
        f"(answer not receipted){facts}"
    )


_TOOL_STATUS: Final = {"ok": "ok", "error": "failed", "unset": "no status recorded"}


def _agent_named(agent: Agent) -> str:
    return f"{agent.name} (span {agent.span_id}" + (
        f", id {agent.agent_id})" if agent.agent_id else ")"
    )


def _tool_shown(run: ToolRun) -> str:
    text = f"tool run: {run.name or 'unnamed'}"
    if run.call_id:
        text += f" · call {run.call_id}"
    text += " · " + _TOOL_STATUS[run.status] + (f" ({run.error})" if run.error else "")
    if run.decision:
        text += f" · decision {run.decision}"
    return f"{text} · span {run.span_id}"


def agent_lines(step: AgentStep | None) -> list[str]:
    """The call's place in the agent tree, one line a fact: its agent, a handoff to it, each tool
    run after it; none when the record shows no agent and no tool."""
    if step is None:
        return []
    lines = []
    if step.handoff_from is not None and step.agent is not None:
        lines.append(f"handoff: {step.handoff_from.name} -> {step.agent.name}")
    if step.agent is not None:
        lines.append(f"agent {_agent_named(step.agent)}")
    lines.extend(_tool_shown(run) for run in step.tools)
    return lines
