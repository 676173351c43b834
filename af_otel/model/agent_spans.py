"""Which spans are an agent's: the one rule the emit side (a call's run, `run_discovery`) and the
read side (a call's agent, `af_otel.reader.agents`) both apply. Pure: attributes and a name in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

OPERATION: Final = "gen_ai.operation.name"
# The operations of a span that encloses an agent's calls: the GenAI conventions' agent and
# workflow spans, the newer conventions' runner entry point and internal invocation span. Matched
# on gen_ai.operation.name, else on the span name's first word (spans named by the convention,
# `invoke_agent travel-assistant`, whose attributes say nothing).
AGENT_OPERATIONS: Final = frozenset(
    {
        "invoke_agent",
        "invoke_workflow",
        "handle_conversation_turn",
        "invocation.internal",
        "gen_ai.invocation.internal",
    }
)
# Framework conventions' agent spans: attribute -> the values that mark one.
FRAMEWORK_AGENT_KINDS: Final[Mapping[str, frozenset[str]]] = {
    "openinference.span.kind": frozenset({"AGENT"}),
    "traceloop.span.kind": frozenset({"agent", "workflow"}),
}


def is_agent_span(attributes: Mapping[str, Any], name: str) -> bool:
    """Whether a span encloses an agent's calls."""
    operation = attributes.get(OPERATION)
    if operation is not None:
        return operation in AGENT_OPERATIONS
    for key, kinds in FRAMEWORK_AGENT_KINDS.items():
        if attributes.get(key) in kinds:
            return True
    return name.partition(" ")[0] in AGENT_OPERATIONS
