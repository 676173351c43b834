"""The request fields a record may leave out, which of them each provider has, and when leaving
one out matters for a given request: the one rule the emitter and the reader both ask.

A field is named as the normalized request names it: a ``params`` key (``seed``, ``tool_choice``),
``model``, ``tools``, or a part-level flag (``message.name``, ``tool_result.is_error``,
``reasoning.signature``). What each instrumentation records lives in `af_otel.semconv.ledger`;
here is only what does not depend on the instrumentation.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from af_otel.model.request import PARAM_KEYS, REASONING_TYPES, SAMPLING_KEYS, STEERING_KEYS, Request

MODEL: Final = "model"
TOOLS: Final = "tools"
MESSAGE_NAME: Final = "message.name"
TOOL_ERROR: Final = "tool_result.is_error"
SIGNATURE: Final = "reasoning.signature"

# Every field a record can lack, in the order a report lists them: what the model could use,
# what it was steered by, then the sampling dials (the Responses API's own settings are named per
# instrumentation by af_otel.semconv.responses).
FIELDS: Final = (MODEL, TOOLS, *STEERING_KEYS, TOOL_ERROR, SIGNATURE, MESSAGE_NAME, *SAMPLING_KEYS)
_FIELD_ORDER: Final = {name: rank for rank, name in enumerate(FIELDS)}

# The dials: settings the provider fills with its own default when a request leaves them out.
DIALS: Final = tuple(key for key in FIELDS if key in PARAM_KEYS)

# The fields each provider's API has (Chat Completions for OpenAI, the Messages API for Anthropic).
# A field the provider does not have cannot have been sent, so neither a missing record of it nor
# a default for it says anything. A provider not listed is read as having every field.
_MESSAGES_FIELDS: Final = frozenset(
    {TOOLS, TOOL_ERROR, SIGNATURE, "tool_choice", "thinking"}
    | {"temperature", "max_tokens", "top_p", "top_k", "stop_sequences"}
)
_GEMINI_FIELDS: Final = frozenset(
    {TOOLS, SIGNATURE, *SAMPLING_KEYS, *STEERING_KEYS} - {"parallel_tool_calls", "reasoning_effort"}
)
PROVIDER_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    # Chat Completions: every sampling dial but top_k, every steering setting but thinking.
    "openai": frozenset(
        {TOOLS, MESSAGE_NAME, *SAMPLING_KEYS, *STEERING_KEYS} - {"top_k", "thinking"}
    ),
    "anthropic": _MESSAGES_FIELDS,
    # Gemini's generateContent (Gemini API and Vertex AI): no parallel switch, no reasoning
    # effort (its thinking settings are `thinking`), no tool-result error flag, no message names.
    "gcp.gemini": _GEMINI_FIELDS,
    "gcp.vertex_ai": _GEMINI_FIELDS,
    # Bedrock's Converse: inferenceConfig's dials, top_k and thinking through
    # additionalModelRequestFields, toolChoice, tool results with a status: the Messages API's.
    "aws.bedrock": _MESSAGES_FIELDS,
}
# Settings that only steer tool use: without tools on the request (or on record) they change nothing.
_TOOL_SETTINGS: Final = frozenset({"tool_choice", "parallel_tool_calls"})
REASONING_EFFORT: Final = "reasoning_effort"
# OpenAI model families known to take no ``reasoning_effort`` (the API refuses it for them). The
# list only ever excuses a model it names: any other model, or none on record, may have been sent
# the setting, so a record without it names it as unrecorded. A fine-tuned model (``ft:gpt-4o...``)
# is of its base model's family.
NON_REASONING_MODELS: Final = ("gpt-4", "gpt-3.5", "chatgpt-4o")


def takes_reasoning_effort(model: str | None) -> bool:
    """Whether a request to ``model`` may carry ``reasoning_effort``: unless ``model`` is of a
    known non-reasoning family (`NON_REASONING_MODELS`); an unknown or missing model may."""
    if not model:
        return True
    name = model.strip().lower().removeprefix("ft:")
    return not name.startswith(NON_REASONING_MODELS)


def provider_has(provider: str | None, field: str) -> bool:
    """Whether ``provider``'s API has ``field`` (an unknown provider has every field)."""
    known = PROVIDER_FIELDS.get(provider or "")
    return known is None or field in known


def matters(
    field: str,
    provider: str | None,
    *,
    tools: bool,
    tool_results: bool = True,
    reasoning: bool = True,
    model: str | None = None,
) -> bool:
    """Whether a record that lacks ``field`` could be hiding something from a request.

    The field must exist at the request's ``provider``, and its cause must be present: tool
    settings need ``tools`` (on the request, or themselves off the record), a tool result's error
    flag needs ``tool_results``, a reasoning signature needs a ``reasoning`` part, and
    ``reasoning_effort`` a ``model`` that may take it (`takes_reasoning_effort`; pass the model
    only when it is the recorded request model)."""
    if field == MODEL:  # every provider is sent a model
        return True
    if not provider_has(provider, field):
        return False
    if field in _TOOL_SETTINGS:
        return tools
    if field == TOOL_ERROR:
        return tool_results
    if field == SIGNATURE:
        return reasoning
    if field == REASONING_EFFORT:
        return takes_reasoning_effort(model)
    return True


@dataclass(frozen=True, slots=True)
class Shown:
    """One pass over a request's messages: the part types in them, and the part-level fields
    (``message.name``, ``tool_result.is_error``, ``reasoning.signature``) they show a value for."""

    kinds: frozenset[object]
    fields: frozenset[str]


def shown(request: Request) -> Shown:
    """What the request's messages hold, found in one pass (`Shown`)."""
    kinds: set[object] = set()
    found: set[str] = set()
    for message in request.messages:
        if "name" in message:
            found.add(MESSAGE_NAME)
        for part in message.get("parts", ()):
            kinds.add(part.get("type"))
            if "is_error" in part:
                found.add(TOOL_ERROR)
            if "signature" in part:
                found.add(SIGNATURE)
    return Shown(frozenset(kinds), frozenset(found))


def unrecorded(
    request: Request, recorded: Collection[str], seen: Shown | None = None
) -> tuple[str, ...]:
    """The fields this request may have set that a record keeping only ``recorded`` cannot show
    (``seen``: the request's `shown`, when the caller already has it)."""
    kinds = (seen or shown(request)).kinds
    tools = bool(request.tools) or TOOLS not in recorded
    model = request.model if MODEL in recorded else None  # a response model does not say
    return tuple(
        field
        for field in _FIELD_ORDER
        if field not in recorded
        and matters(
            field,
            request.provider,
            tools=tools,
            tool_results="tool_call_response" in kinds,
            reasoning=bool(kinds & REASONING_TYPES),
            model=model,
        )
    )


def defaulted(
    params: Mapping[str, Any],
    provider: str | None,
    *,
    tools: bool,
    unrecorded_fields: Collection[str] = (),
    model: str | None = None,
) -> tuple[str, ...]:
    """The dials ``provider`` has that the request (as recorded) did not set: the provider chose
    them. Dials the record cannot show at all are named as unrecorded instead; tool settings
    count only when the request has ``tools`` (or its tools are off the record), and
    ``reasoning_effort`` only when ``model`` may take it."""
    tools = tools or TOOLS in unrecorded_fields
    model = None if MODEL in unrecorded_fields else model
    return tuple(
        dial
        for dial in DIALS
        if dial not in params
        and dial not in unrecorded_fields
        and matters(dial, provider, tools=tools, model=model)
    )


def order_fields(found: Iterable[str]) -> tuple[str, ...]:
    """Field names in report order (unknown names last, alphabetically)."""
    known = len(_FIELD_ORDER)
    return tuple(sorted(set(found), key=lambda name: (_FIELD_ORDER.get(name, known), name)))
