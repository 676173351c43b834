"""OpenLLMetry (Traceloop's ``opentelemetry-instrumentation-*``) from 0.55: the GenAI content keys
(its own JSON spacing, no message ``name``), told from util-genai's by keys only it writes. Its
releases up to 0.54 are a family of their own (`openllmetry_legacy`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from af_otel.model import FrozenDict, fields
from af_otel.semconv.adapted import Adapted, conclude
from af_otel.semconv.coerce import text
from af_otel.semconv.convention import Convention, Entry
from af_otel.semconv.conventions import genai
from af_otel.semconv.rows import dial_rows

REQUEST_TYPE: Final = "llm.request.type"
LLM_REQUEST_TYPES: Final = frozenset({"chat", "completion"})
PROMPTS: Final = "gen_ai.prompt."
FUNCTIONS: Final = "llm.request.functions."

# Keys only OpenLLMetry writes; they tell its >=0.55 spans from util-genai's, which share the
# content keys. The adaptation is the same either way; the label says whose span it was.
MARKERS: Final = frozenset(
    {
        "gen_ai.is_streaming",
        "llm.is_streaming",
        "gen_ai.openai.api_base",
        "gen_ai.headers",
        "llm.headers",
        "gen_ai.usage.total_tokens",
        "llm.usage.total_tokens",
    }
)

# Both eras: the GenAI names, then the `llm.*` names its semconv-ai package kept for the dials
# the GenAI conventions named later.
PARAMS: Final = dial_rows(
    genai.DIAL_KEYS,
    {
        "top_k": ("llm.top_k",),
        "stop_sequences": ("llm.chat.stop_sequences",),
        "frequency_penalty": ("llm.frequency_penalty",),
        "presence_penalty": ("llm.presence_penalty",),
        "reasoning_effort": ("gen_ai.request.reasoning_effort",),
    },
)


def claims(attributes: Mapping[str, object], span_name: str) -> bool:
    """A span OpenLLMetry wrote (either era)."""
    return any(
        key in MARKERS or key == REQUEST_TYPE or key.startswith(("traceloop.", PROMPTS))
        for key in attributes
    )


def is_llm_call(attributes: Mapping[str, object]) -> bool:
    return text(attributes.get(REQUEST_TYPE)) in LLM_REQUEST_TYPES


def adapt(attributes: Mapping[str, object]) -> Adapted:
    """Adapt an OpenLLMetry >=0.55 span: the GenAI keys, OpenLLMetry's dials."""
    return conclude("openllmetry", attributes, lambda: genai.build_request(attributes, PARAMS))


# What OpenLLMetry records, the same in both eras.
RECORDED: Final = frozenset(
    {fields.MODEL, fields.TOOLS, "temperature", "max_tokens", "top_p", "top_k"}
    | {"frequency_penalty", "presence_penalty"}
)
# Its scopes (both eras): the 1.x OpenAI SDK's, the older one's and Anthropic's wrap the
# provider SDK's own call, so only its serializer stands after them.
SDK_SCOPES: Final = frozenset(
    {
        "opentelemetry.instrumentation.anthropic",
        "opentelemetry.instrumentation.openai",
        "opentelemetry.instrumentation.openai.v1",
    }
)

# It names the span of a Responses API call so (it records no API type).
RESPONSES_SPAN: Final = "openai.response"
# The wire endpoint of the Responses API (`af_otel.wire.openai_responses.NAME`: semconv imports
# nothing of the wire; a test holds the names equal).
RESPONSES_ENDPOINT: Final = "openai.responses"


def responses_kept(message: FrozenDict) -> FrozenDict | None:
    """What OpenLLMetry's record of a Responses call keeps of one message of the body, as its
    wrapper writes ``gen_ai.input.messages`` from ``input`` (read in its 0.62 releases, and
    measured on the wire tests): a ``reasoning`` item, which it has no case for, not at all; a
    function call under the item's own ``id`` where the item has one, else under its
    ``call_id``, which is the only one the normalized request holds (the item id is
    bookkeeping), so no tool call's id is kept. The result of a call keeps its ``call_id``, and
    every other value stays, to be equal. Other item kinds it leaves out too (web searches,
    computer calls, ...) are not projected: such a call keeps its record."""
    parts = message.get("parts", ())
    kept = tuple(_kept_part(part) for part in parts if part.get("type") != "reasoning")
    if not kept and parts:
        return None
    if all(a is b for a, b in zip(kept, parts, strict=False)) and len(kept) == len(parts):
        return message
    return FrozenDict(message, parts=kept)


def _kept_part(part: FrozenDict) -> FrozenDict:
    if part.get("type") != "tool_call" or "id" not in part:
        return part
    return FrozenDict({key: value for key, value in part.items() if key != "id"})


OPENLLMETRY: Final = Convention(
    "openllmetry",
    claims=claims,
    is_llm_call=lambda attributes, span_name: is_llm_call(attributes),
    adapt=adapt,
    content=genai.CONTENT,
    output=genai.OUTPUT,
    ledger=(
        Entry(
            "openllmetry", ("opentelemetry.instrumentation",), ("openllmetry",), RECORDED, ">=0.55"
        ),
    ),
    sdk_scopes=SDK_SCOPES,
    # On the Responses API: its reasoning effort; replayed calls under their item id, reasoning
    # dropped.
    responses=frozenset({"reasoning_effort"}),
    responses_call=lambda attributes, span_name: span_name == RESPONSES_SPAN,
    incremental=genai.MESSAGES.key,
    projections=((RESPONSES_ENDPOINT, responses_kept),),
)
