"""The agent tree around the LLM calls: which agent made each call, the tools that ran after it,
and where a run passed from one agent to another (docs/reader.md, "Agents and tools").

Read from the spans around the calls, which the fold never looks at. Pure and bounded: a parent
walk stops after `MAX_DEPTH` spans, and a span whose parents are not among the spans read simply
has no agent (never an error: a partial trace is data, not a fault). None of it is a fact of the
request, and no verdict or receipt depends on it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from af_otel.model.agent_spans import AGENT_OPERATIONS, OPERATION, is_agent_span
from af_otel.reader.records import SpanRecord, StatusCode

__all__ = ["Agent", "AgentStep", "ToolRun", "agent_steps", "enclosing_agent", "is_handoff_span"]

SpanKey = tuple[str, str]  # trace id, span id
CallKey = tuple[str | None, str, str]  # run id, trace id, span id

TOOL_OPERATION: Final = "execute_tool"
# Each fact in the GenAI conventions' key first, then OpenInference's (whose TOOL spans carry the
# id of the model's tool call as `tool.id`).
AGENT_NAME: Final = ("gen_ai.agent.name", "agent.name")
AGENT_ID: Final = "gen_ai.agent.id"
TOOL_NAME: Final = ("gen_ai.tool.name", "tool.name")
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_CALL_IDS: Final = (TOOL_CALL_ID, "tool.id")
OPENINFERENCE_KIND: Final = "openinference.span.kind"
ERROR_TYPE: Final = "error.type"
# A handoff span: OpenInference writes the OpenAI Agents SDK's handoff as a TOOL span named
# `handoff to <agent>` (or `handoff`, when the target is unknown) with no `tool.name` (a function
# tool's span has one), the agent it left in `input.value` and the one it went to in
# `output.value`. genai-openai-agents writes no span for a handoff.
HANDOFF_NAME: Final = "handoff"
HANDOFF_FROM: Final = "input.value"
HANDOFF_TO: Final = "output.value"
# The decision a runtime took before running a tool (allow, deny, require_approval): an event on
# the tool's span, or on its agent's span naming the tool call, or the outcome as an attribute of
# the tool span itself.
DECISION_EVENT: Final = "gen_ai.tool.call.decision"
DECISION_OUTCOME: Final = "gen_ai.tool.call.decision.outcome"
# Agent trees are a few levels deep; a longer chain (or a cycle in damaged ids) ends the walk.
MAX_DEPTH: Final = 256

ToolStatus = Literal["ok", "error", "unset"]


@dataclass(frozen=True, slots=True)
class Agent:
    """The agent span a call ran under: its ``gen_ai.agent.name`` (else the span's name without
    its operation word) and ``gen_ai.agent.id`` where recorded."""

    name: str
    span_id: str
    agent_id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One ``execute_tool`` span, in the order the tools started."""

    name: str | None
    call_id: str | None
    span_id: str
    status: ToolStatus
    error: str | None = None  # the span's ``error.type``
    decision: str | None = None  # the runtime's decision before running it, where recorded


@dataclass(frozen=True, slots=True)
class AgentStep:
    """Where one call sits in the agent tree: its agent (None when no agent span encloses it on
    the record), the tools that ran after it, and the agent of the run's previous call when that
    was another (a handoff)."""

    agent: Agent | None
    tools: tuple[ToolRun, ...] = ()
    handoff_from: Agent | None = None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _first(attributes: Mapping[str, object], keys: tuple[str, ...]) -> str | None:
    return next((found for key in keys if (found := _text(attributes.get(key)))), None)


def enclosing_agent(span: SpanRecord, index: Mapping[SpanKey, SpanRecord]) -> SpanRecord | None:
    """The nearest ancestor of ``span`` that is an agent span, among the spans of ``index``."""
    parent = span.parent_span_id
    for _ in range(MAX_DEPTH):
        if parent is None:
            return None
        found = index.get((span.trace_id, parent))
        if found is None:
            return None
        if is_agent_span(found.attributes, found.name):
            return found
        parent = found.parent_span_id
    return None


def agent_of(span: SpanRecord) -> Agent:
    """The agent an agent span names."""
    name = _first(span.attributes, AGENT_NAME)
    if name is None:
        word, _, rest = span.name.partition(" ")
        name = rest if word in AGENT_OPERATIONS and rest else span.name
    return Agent(name, span.span_id, _text(span.attributes.get(AGENT_ID)))


def is_handoff_span(span: SpanRecord) -> bool:
    """Whether a span records a handoff between agents (OpenInference's, `HANDOFF_NAME`)."""
    return (
        span.attributes.get(OPENINFERENCE_KIND) == "TOOL"
        and span.name.partition(" ")[0] == HANDOFF_NAME
        and _first(span.attributes, TOOL_NAME) is None
    )


def is_tool_span(span: SpanRecord) -> bool:
    operation = span.attributes.get(OPERATION)
    if operation is not None:
        return operation == TOOL_OPERATION
    if span.attributes.get(OPENINFERENCE_KIND) == "TOOL":
        return True
    return span.name.partition(" ")[0] == TOOL_OPERATION


def _decision(tool: SpanRecord, agent: SpanRecord | None, call_id: str | None) -> str | None:
    own = _text(tool.attributes.get(DECISION_OUTCOME))
    if own is not None:
        return own
    for event in tool.events:
        if event.name == DECISION_EVENT:
            return _text(event.attributes.get(DECISION_OUTCOME))
    if agent is not None and call_id is not None:
        for event in agent.events:
            if event.name == DECISION_EVENT and event.attributes.get(TOOL_CALL_ID) == call_id:
                return _text(event.attributes.get(DECISION_OUTCOME))
    return None


def tool_run(tool: SpanRecord, agent: SpanRecord | None) -> ToolRun:
    """What a tool span records of its execution."""
    call_id = _first(tool.attributes, TOOL_CALL_IDS)
    error = _text(tool.attributes.get(ERROR_TYPE))
    status: ToolStatus = (
        "error"
        if tool.status_code is StatusCode.ERROR or error is not None
        else ("ok" if tool.status_code is StatusCode.OK else "unset")
    )
    return ToolRun(
        _first(tool.attributes, TOOL_NAME),
        call_id,
        tool.span_id,
        status,
        error,
        _decision(tool, agent, call_id),
    )


class _Calls:
    """The calls of the record by start, per trace and per agent span, to find the one a tool
    ran after: the latest call under the tool's own agent span that started before it, else the
    latest call of its trace that did."""

    def __init__(self) -> None:
        self._by: dict[tuple[str, str | None], tuple[list[int], list[SpanKey]]] = {}

    def add(self, span: SpanRecord, agent: SpanRecord | None) -> None:
        places: list[tuple[str, str | None]] = [(span.trace_id, None)]
        if agent is not None:
            places.append((span.trace_id, agent.span_id))
        for where in places:
            starts, keys = self._by.setdefault(where, ([], []))
            starts.append(span.start_ns)
            keys.append((span.trace_id, span.span_id))

    def sort(self) -> None:
        for where, (starts, keys) in self._by.items():
            pairs = sorted(zip(starts, keys, strict=True))
            self._by[where] = ([s for s, _ in pairs], [k for _, k in pairs])

    def after(self, span: SpanRecord) -> SpanKey | None:
        """The first call of ``span``'s trace that started after it."""
        listed = self._by.get((span.trace_id, None))
        if listed is None:
            return None
        at = bisect_right(listed[0], span.start_ns)
        return listed[1][at] if at < len(listed[1]) else None

    def before(self, tool: SpanRecord, agent: SpanRecord | None) -> SpanKey | None:
        places: list[tuple[str, str | None]] = (
            [(tool.trace_id, agent.span_id)] if agent is not None else []
        )
        for where in (*places, (tool.trace_id, None)):
            listed = self._by.get(where)
            at = bisect_right(listed[0], tool.start_ns) if listed is not None else 0
            if listed is not None and at:
                return listed[1][at - 1]
        return None


def agent_steps(spans: Iterable[SpanRecord], calls: Sequence[CallKey]) -> dict[SpanKey, AgentStep]:
    """For each call of ``calls`` (run id, trace id, span id, in the order they are shown, a
    run's calls together in its order) that has an agent or tools on record, its `AgentStep`."""
    spans = spans if isinstance(spans, Sequence) else list(spans)
    tools: list[SpanRecord] = []
    handoffs: list[SpanRecord] = []
    agents = False
    for span in spans:
        if is_tool_span(span):
            (handoffs if is_handoff_span(span) else tools).append(span)
        elif not agents and is_agent_span(span.attributes, span.name):
            agents = True
    if not agents and not tools and not handoffs:
        return {}  # the common record of plain SDK calls: no index of its spans is built
    index = {(span.trace_id, span.span_id): span for span in spans}
    found: dict[SpanKey, Agent | None] = {}
    ordered = _Calls()
    for _, trace_id, span_id in calls:
        call = index.get((trace_id, span_id))
        if call is None or (trace_id, span_id) in found:
            continue
        agent = enclosing_agent(call, index) if agents else None
        found[(trace_id, span_id)] = agent_of(agent) if agent is not None else None
        ordered.add(call, agent)
    ordered.sort()
    ran: dict[SpanKey, list[tuple[int, ToolRun]]] = {}
    for tool in tools:
        agent = enclosing_agent(tool, index) if agents else None
        after = ordered.before(tool, agent)
        if after is not None:
            ran.setdefault(after, []).append((tool.start_ns, tool_run(tool, agent)))
    handed: dict[SpanKey, SpanRecord] = {}
    for handoff in sorted(handoffs, key=lambda span: span.start_ns):
        target = ordered.after(handoff)
        if target is not None:
            handed.setdefault(target, handoff)
    return _steps(calls, found, ran, handed)


def _handoff(
    agent: Agent | None, prior: Agent | None, same_place: bool, span: SpanRecord | None
) -> Agent | None:
    """The agent a call was handed from. A handoff span before it names the agent it left: the
    previous call's agent when that is the one, else an agent of that name at the handoff span.
    Without one, the previous call's agent when it is another and the two calls are of one run
    and one trace (a new trace is a new turn, which may well start at another agent)."""
    if span is not None:
        source = _text(span.attributes.get(HANDOFF_FROM))
        if source is None or (agent is not None and source == agent.name):
            return None
        return prior if prior is not None and prior.name == source else Agent(source, span.span_id)
    if same_place and prior is not None and agent is not None and prior.name != agent.name:
        return prior
    return None


def _steps(
    calls: Sequence[CallKey],
    found: Mapping[SpanKey, Agent | None],
    ran: Mapping[SpanKey, list[tuple[int, ToolRun]]],
    handed: Mapping[SpanKey, SpanRecord],
) -> dict[SpanKey, AgentStep]:
    out: dict[SpanKey, AgentStep] = {}
    previous: tuple[str | None, str | None, Agent | None] = (None, None, None)
    for run_id, trace_id, span_id in calls:
        key = (trace_id, span_id)
        agent = found.get(key)
        prior_run, prior_trace, prior = previous
        same_run = run_id is not None and run_id == prior_run
        handoff = _handoff(
            agent,
            prior if same_run else None,
            same_run and trace_id == prior_trace,
            handed.get(key),
        )
        previous = (run_id, trace_id, agent)
        tools = tuple(run for _, run in sorted(ran.get(key, ()), key=lambda item: item[0]))
        if agent is not None or tools or handoff is not None:
            out[key] = AgentStep(agent, tools, handoff)
    return out
