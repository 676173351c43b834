"""OpenAI's Responses API (``client.responses.create``) as each convention records it.

Three things differ from Chat Completions:

* **Server-held history.** A request that names ``previous_response_id`` (or a ``conversation``)
  shows the model the history the server holds before its own input; the record holds only the
  new items. `held_history` says so: the earlier response id where the record has it, else a
  tell-tale the record shows (a tool result whose call is not in the request; a Responses input
  that starts mid-conversation), else nothing.
* **Settings nested in objects.** ``reasoning: {effort, summary}``, ``text: {format}``,
  ``truncation``, ``store``: `params_of` reads them out of a recorded request object (OpenInference's
  ``llm.invocation_parameters``) under the normalized request's names.
* **Fields some instrumentations never record** on this API (the Responses rows of the field
  ledger, docs/instrumentations.md, which each family holds as `Convention.responses`):
  `unrecorded` names them per instrumentation.

Pure functions over plain values; on the emit path they never raise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from af_otel.model.fields import order_fields
from af_otel.model.request import INSTRUCTION_ROLES, RESPONSES_KEYS, STEERING_KEYS, Request
from af_otel.semconv.coerce import parse_json
from af_otel.semconv.convention import named, tables

INVOCATION_PARAMETERS: Final = "llm.invocation_parameters"
# Keys of a Responses request that no Chat Completions request has.
RESPONSES_ONLY: Final = frozenset(
    {"previous_response_id", "conversation", "instructions", "max_output_tokens", "truncation"}
    | {"text", "reasoning", "include", "input"}
)
# The keys that name state the server holds, in the order they are looked for.
HELD_KEYS: Final = ("previous_response_id", "conversation")

# Field names the Responses rows of the ledger use (docs/instrumentations.md).
REASONING_ITEMS: Final = "reasoning.items"  # reasoning items replayed in the input
TOOL_STRICT: Final = "tools.strict"  # a function tool's `strict`
CALL_ID: Final = "tool_call.id"  # a replayed function call's `call_id`
# A replayed function call's `arguments`: OpenInference (openai 0.1.66) leaves out an arguments
# string of "{}" on Responses input items, so a call shown without arguments may have had "{}".
CALL_ARGUMENTS: Final = "tool_call.arguments"
PREVIOUS_RESPONSE: Final = "previous_response_id"
RESPONSES_FIELDS: Final = (
    PREVIOUS_RESPONSE,
    REASONING_ITEMS,
    TOOL_STRICT,
    CALL_ID,
    *(key for key in STEERING_KEYS if key != "thinking"),  # Anthropic's, not OpenAI's
    *RESPONSES_KEYS,
)
# Tell-tales of history the request does not carry.
TELLTALE_ORPHAN_RESULT: Final = "a tool result without its tool call"
TELLTALE_MID_CONVERSATION: Final = "a Responses input that starts mid-conversation"


def decoded(value: object) -> Mapping[str, Any] | None:
    """A JSON object given as a mapping or as its text, else None."""
    if isinstance(value, Mapping):
        return value
    found = parse_json(value) if isinstance(value, str) and value.startswith("{") else None
    return found if isinstance(found, dict) else None


def invocation(attributes: Mapping[str, object]) -> Mapping[str, Any]:
    """OpenInference's recorded request arguments, decoded (empty when absent or unreadable)."""
    return decoded(attributes.get(INVOCATION_PARAMETERS)) or {}


def is_responses(attributes: Mapping[str, object], span_name: str = "") -> bool:
    """Whether a span records a Responses API call: a registered family's tell-tale says so
    (`Convention.responses_call`: each family knows what its spans write)."""
    return any(tell(attributes, span_name) for tell in tables().responses_calls)


def from_one(
    buckets: dict[int, dict[str, object]], attributes: Mapping[str, object]
) -> dict[int, dict[str, object]]:
    """OpenInference's input messages of a Responses call renumbered from 0 when they run from 1:
    it numbers the input items after the place ``instructions`` would take, so a call without
    instructions starts at 1. That is no lost message (a count cut is told by the span's dropped
    attributes), so it is not read as a hole."""
    if not buckets or 0 in buckets or sorted(buckets) != list(range(1, len(buckets) + 1)):
        return buckets
    if not is_responses(attributes):
        return buckets
    return {position - 1: fields for position, fields in buckets.items()}


def params_of(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The Responses settings of a recorded request object, under the normalized names."""
    out: dict[str, Any] = {}
    reasoning = arguments.get("reasoning")
    if isinstance(reasoning, Mapping):
        if isinstance(reasoning.get("effort"), str):
            out["reasoning_effort"] = reasoning["effort"]
        if isinstance(reasoning.get("summary"), str):
            out["reasoning_summary"] = reasoning["summary"]
    text = arguments.get("text")
    if isinstance(text, Mapping) and isinstance(text.get("format"), Mapping):
        out["response_format"] = dict(text["format"])
    for key in ("truncation", "store"):
        if arguments.get(key) is not None:
            out[key] = arguments[key]
    return out


def held_id(attributes: Mapping[str, object]) -> str | None:
    """The earlier response (or conversation) a call continues, where the record has it."""
    arguments = invocation(attributes)
    for key in HELD_KEYS:
        value = arguments.get(key)
        if isinstance(value, Mapping):
            value = value.get("id")
        if isinstance(value, str) and value:
            return value
    return None


@dataclass(frozen=True, slots=True)
class Scan:
    """The tell-tale pass over a request's leading messages, foldable over the messages that
    follow (`scan`): a run's next call scans only its new messages."""

    calls: frozenset[str] = frozenset()  # the ids of the tool calls seen so far
    item_ids: int = 0  # tool calls recorded under an item id (``fc_...``)
    unmatched: int = 0  # tool results whose call came nowhere before them
    first: str | None = None  # the role of the first message that is not system or developer


NO_MESSAGES: Final = Scan()


def scan(messages: Iterable[Mapping[str, Any]], before: Scan = NO_MESSAGES) -> Scan:
    """``before`` (the scan of the messages in front) carried on over ``messages``."""
    added: set[str] = set()
    item_ids, unmatched, first = before.item_ids, before.unmatched, before.first
    for message in messages:
        role = message.get("role")
        if first is None and role not in INSTRUCTION_ROLES:
            first = str(role)
        for part in message.get("parts", ()):
            kind, found = part.get("type"), str(part.get("id"))
            if kind == "tool_call":
                item_ids += found.startswith("fc_")
                if found not in before.calls:
                    added.add(found)
            elif kind == "tool_call_response" and found not in added and found not in before.calls:
                unmatched += 1
    calls = before.calls | added if added else before.calls
    return Scan(calls, item_ids, unmatched, first)


def telltale(request: Request, responses: bool, scanned: Scan | None = None) -> str | None:
    """What in the request shows history it does not carry, or None.

    A tool result whose call is not in the request (calls recorded under an item id, ``fc_...``,
    may be the results' calls: they are counted, not matched), and, on the Responses API, an input
    whose first turn is not the user's. ``scanned``: the request's messages already scanned (the
    processor folds the scan over each call's new messages), else one pass over them."""
    found = scanned if scanned is not None else scan(request.messages)
    if found.unmatched > found.item_ids:
        return TELLTALE_ORPHAN_RESULT
    if responses and found.first is not None and found.first != "user":
        return TELLTALE_MID_CONVERSATION
    return None


def held_history(
    attributes: Mapping[str, object],
    request: Request | None,
    span_name: str = "",
    scanned: Scan | None = None,
) -> str | None:
    """The detail of the `server-held-history` gap for one call, or None (module docstring)."""
    try:
        found = held_id(attributes)
        if found is not None:
            return found
        if request is None:
            return None
        return telltale(request, is_responses(attributes, span_name), scanned)
    except Exception:  # the emit path never raises; an unreadable record shows no tell-tale
        return None


def unrecorded(
    request: Request, convention: str, attributes: Mapping[str, object], span_name: str = ""
) -> tuple[str, ...]:
    """The Responses fields this call's instrumentation does not record (none off this API): what
    its family records of a Responses call beyond system, messages, tools and model
    (`Convention.responses`), and what it leaves off this request besides."""
    if not is_responses(attributes, span_name):
        return ()
    family = named(convention)
    recorded = family.responses if family is not None else frozenset()
    calls = [
        p for m in request.messages for p in m.get("parts", ()) if p.get("type") == "tool_call"
    ]
    out = list(family.responses_missing(request)) if family and family.responses_missing else []
    for field in RESPONSES_FIELDS:
        if field in recorded or field in request.params:
            continue
        if field in (TOOL_STRICT, "tool_choice", "parallel_tool_calls") and not request.tools:
            continue
        if field == CALL_ID and not calls:
            continue
        out.append(field)
    return tuple(out)


def with_responses(
    found: tuple[str, ...],
    request: Request,
    convention: str,
    attributes: Mapping[str, object],
    span_name: str = "",
) -> tuple[str, ...]:
    """The ledger's unrecorded fields ``found`` and the Responses ones, in report order."""
    try:
        extra = unrecorded(request, convention, attributes, span_name)
    except Exception:  # the emit path never raises; the ledger's own answer stands
        return found
    return order_fields((*found, *extra)) if extra else found
