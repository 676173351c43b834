"""The gap rules decided from a request alone, and the order gaps are listed in: the writer applies
them when it exports a span and the reader applies them to the request it rebuilt, so both live here.

* ``provider-defaults``: a receipt exists and a dial the request's provider has is not set and is
  not off the record (`af_otel.model.fields.defaulted`).
* ``thinking-replay``: a message replays reasoning whose content is withheld or sealed
  (`af_otel.model.request.sealed_reasoning`).
* ``forced-tool-schema``: ``tool_choice`` forces a named tool that is not among the request's tools
  (a record without tools at all shows no tool and raises nothing here: ``unrecorded-field`` or
  ``no-conversation-on-record`` says why).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from af_otel import names
from af_otel.model.fields import defaulted
from af_otel.model.request import forced_tool, sealed_reasoning

# Most suspicious first: what makes the whole request unknown or partial before what leaves one
# field unprovable, and that before caveats about what lay beyond the record, so a renderer that
# shows only the first gap shows the one that matters. The writer's ``af.gaps`` and the reader's
# views list their kinds in this one order.
GAP_ORDER: Final = (
    names.GAP_NO_FOLD_BASE,
    names.GAP_NO_RUN_LOG,
    names.GAP_NO_CONVERSATION,
    names.GAP_SPAN_LIMITS,
    names.GAP_NO_RECEIPT,
    names.GAP_UNRECORDED_CALL,
    names.GAP_RUN_CUT_AT_END,
    names.GAP_UNRECORDED,
    names.GAP_WIRE_ATTEMPTS_DIFFER,
    names.GAP_CACHE_TRANSFORM,
    names.GAP_THINKING_REPLAY,
    names.GAP_FORCED_TOOL_SCHEMA,
    names.GAP_PROVIDER_DEFAULTS,
    names.GAP_HELD_HISTORY,
)
GAP_RANK: Final[Mapping[str, int]] = {kind: rank for rank, kind in enumerate(GAP_ORDER)}


def sealed_messages(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any of ``messages`` replays reasoning whose content is withheld or encrypted."""
    return any(sealed_reasoning(message) for message in messages)


def request_gaps(
    params: Mapping[str, Any] | None,
    tools: Sequence[Mapping[str, Any]] | None,
    *,
    provider: str | None,
    model: str | None,
    sealed: bool,
    minted: bool,
    unrecorded: Collection[str] = (),
) -> list[tuple[str, str]]:
    """The request's own gaps as ``(kind, detail)``, in `GAP_ORDER` (module rules).

    ``params``/``tools`` are None when not on record (unknown, not empty); ``sealed`` is whether a
    message replays sealed reasoning (`sealed_messages`, or the caller's incremental scan);
    ``minted``: whether a usable receipt exists; ``unrecorded``: the fields the record cannot show."""
    found: list[tuple[str, str]] = []
    if sealed:
        found.append((names.GAP_THINKING_REPLAY, "reasoning withheld or sealed"))
    choice = forced_tool(params.get("tool_choice")) if params is not None else None
    if (
        choice is not None
        and choice != "required"
        and tools is not None
        and choice not in {tool.get("name") for tool in tools}
    ):
        found.append((names.GAP_FORCED_TOOL_SCHEMA, f"tool {choice!r} is forced"))
    if minted:
        unset = defaulted(
            params if params is not None else {},
            provider,
            tools=tools is None or bool(tools),
            unrecorded_fields=unrecorded,
            model=model,
        )
        if unset:
            found.append((names.GAP_PROVIDER_DEFAULTS, "not set: " + ", ".join(unset)))
    return found
