"""The gap rules decided from a request alone: the writer applies them when it exports a span and
the reader applies them to the request it rebuilt, so both live here (the kinds and their order
are the table in `af_otel.model.gap_kinds`).

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
from typing import Any

from af_otel import names
from af_otel.model.fields import defaulted
from af_otel.model.request import forced_tool, sealed_reasoning


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
    """The request's own gaps as ``(kind, detail)``, in the table's order (module rules).

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
    if minted and params is not None:  # settings not on record are not "not set"
        unset = defaulted(
            params,
            provider,
            tools=tools is None or bool(tools),
            unrecorded_fields=unrecorded,
            model=model,
        )
        if unset:
            found.append((names.GAP_PROVIDER_DEFAULTS, "not set: " + ", ".join(unset)))
    return found
