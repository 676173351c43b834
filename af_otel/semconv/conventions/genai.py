"""The OTel GenAI semantic conventions (``gen_ai.*``), as util-genai based instrumentations write
them: content as JSON strings (or structured values), refs as ``*_ref``. Also the fallback: a span
no other family claims is read as GenAI.

The code tells the GenAI instrumentations apart by scope only (`GENAI`'s ledger rows): the
util-genai based genai-openai and genai-anthropic (1.x) and the older openai-v2 (2.x) write one
shape and differ in what they record; ``gen_ai.system`` is the provider's name before semconv 1.37.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from af_otel import names
from af_otel.model import fields
from af_otel.model.request import STEERING_KEYS
from af_otel.semconv import responses
from af_otel.semconv.adapted import (
    NOTE_MODEL_FROM_RESPONSE,
    NOTE_MODEL_NOT_CAPTURED,
    NOTE_OUTPUT_TYPE,
    Adapted,
    conclude,
)
from af_otel.semconv.builders import Absent, content_value, unreadable
from af_otel.semconv.coerce import provider, text
from af_otel.semconv.convention import Convention, Entry, Keys
from af_otel.semconv.rows import SAMPLING_TYPES, Row, dial_rows, read_rows

OPERATION: Final = "gen_ai.operation.name"
LLM_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content"})

DIAL_KEYS: Final = {
    **{dial: (f"gen_ai.request.{dial}",) for dial in SAMPLING_TYPES},
    "choice_count": ("gen_ai.request.choice.count",),
}
PARAMS: Final = dial_rows(DIAL_KEYS)
MODEL: Final = (Row("model", ("gen_ai.request.model",), text),)
RESPONSE_MODEL: Final = (Row("model", ("gen_ai.response.model",), text),)
# `gen_ai.system` is the name before semconv 1.37; OpenLLMetry <=0.54 still writes it.
PROVIDER: Final = (Row("provider", ("gen_ai.provider.name", "gen_ai.system"), provider),)
OUTPUT_TYPE: Final = "gen_ai.output.type"


@dataclass(frozen=True, slots=True)
class Slot:
    """One content attribute and the request field it fills."""

    target: str
    key: str


MESSAGES: Final = Slot("messages", "gen_ai.input.messages")
SLOTS: Final = (
    MESSAGES,
    Slot("system", "gen_ai.system_instructions"),
    Slot("tools", "gen_ai.tool.definitions"),
)


def is_llm_call(attributes: Mapping[str, object], span_name: str) -> bool:
    """A chat, text-completion or generate-content span; a span that lost its operation name
    still counts when it is named like one (``chat gpt-4o``) and names a request model."""
    operation = text(attributes.get(OPERATION))
    if operation is not None:
        return operation in LLM_OPERATIONS
    verb = span_name.partition(" ")[0]
    return verb in LLM_OPERATIONS and text(attributes.get("gen_ai.request.model")) is not None


def model_and_provider(attributes: Mapping[str, object]) -> tuple[dict[str, object], list[str]]:
    """``model`` (the request model; the response model only as a noted fallback) and ``provider``."""
    found = read_rows(attributes, MODEL)
    notes: list[str] = []
    if "model" not in found:
        found = read_rows(attributes, RESPONSE_MODEL)
        notes.append(NOTE_MODEL_FROM_RESPONSE if found else NOTE_MODEL_NOT_CAPTURED)
    return {**found, **read_rows(attributes, PROVIDER)}, notes


def build_request(
    attributes: Mapping[str, object], params: tuple[Row, ...] = PARAMS
) -> tuple[dict[str, object], list[str]]:
    """The request from ``gen_ai.*`` content attributes, as recorded (the GenAI shape, which
    `conclude` checks); raises :class:`Absent` when there is none."""
    request: dict[str, object] = {"system": [], "messages": [], "tools": []}
    for slot in SLOTS:
        if slot.key in attributes:
            request[slot.target] = content_value(attributes[slot.key])
            if request[slot.target] is None:  # JSON null records no list, not an empty one
                raise unreadable()
        elif slot.key + "_ref" in attributes:  # util-genai's upload hook's reference
            raise Absent(names.REASON_EXTERNAL)
        elif slot is MESSAGES:
            raise Absent(names.REASON_NOT_CAPTURED)
    basis, notes = model_and_provider(attributes)
    request.update(basis)
    request["params"] = read_rows(attributes, params)
    if text(attributes.get(OUTPUT_TYPE)) is not None:
        notes.append(NOTE_OUTPUT_TYPE)
    return request, notes


def adapt(attributes: Mapping[str, object], convention: str = "genai") -> Adapted:
    """Adapt a span of the OTel GenAI conventions (also the fallback for unknown spans)."""
    return conclude(convention, attributes, lambda: build_request(attributes))


# OpenAI's sampling dials: the settings it has, less those that steer tools and output.
_OPENAI_DIALS: Final = (fields.PROVIDER_FIELDS["openai"] & frozenset(fields.DIALS)) - frozenset(
    STEERING_KEYS
)
# The field ledger's rows of the GenAI instrumentations (first match wins).
LEDGER: Final = (
    Entry(
        "genai-openai",
        ("opentelemetry.instrumentation.genai.openai",),
        ("genai",),
        frozenset({fields.MODEL, fields.TOOLS, fields.MESSAGE_NAME, *_OPENAI_DIALS}),
        "1.x (util-genai; checked 1.3b0)",
        marked=(("response_format", NOTE_OUTPUT_TYPE),),
    ),
    Entry(
        "genai-anthropic",
        ("opentelemetry.instrumentation.genai.anthropic",),
        ("genai",),
        frozenset(
            {fields.MODEL, fields.TOOLS, "temperature", "max_tokens", "top_p", "top_k"}
            | {"stop_sequences"}
        ),
        "1.x (util-genai)",
    ),
    Entry(
        "openai-v2",
        ("opentelemetry.instrumentation.openai_v2",),
        ("genai",),
        frozenset(
            {fields.MODEL, "temperature", "max_tokens", "top_p", "stop_sequences"}
            | {"frequency_penalty", "presence_penalty"}
        ),
        "2.x",
    ),
)
# The content attributes, and the older semconv's single-value prompt and completion; of them
# the response.
CONTENT: Final = Keys(
    frozenset({slot.key for slot in SLOTS} | {"gen_ai.output.messages", "gen_ai.prompt"})
    | {"gen_ai.completion", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}
)
OUTPUT: Final = Keys(frozenset({"gen_ai.output.messages", "gen_ai.completion"}))
SDK_SCOPES: Final = frozenset(
    {
        "opentelemetry.instrumentation.genai.openai",
        "opentelemetry.instrumentation.genai.anthropic",
        "opentelemetry.instrumentation.openai_v2",
    }
)
# genai-openai on the Responses API: messages and function tools (without `strict`); of a
# reasoning item only its summary (never its encrypted content; an item without one not at all).
RESPONSES_RECORDED: Final = frozenset({responses.CALL_ID})

# The agent stacks' instrumentations that write the GenAI keys (docs/instrumentations.md,
# "Agent stacks").
STACKS: Final = (
    Entry(
        "genai-bedrock",
        ("opentelemetry.instrumentation.genai.bedrock",),
        ("genai",),
        frozenset({fields.MODEL, fields.TOOLS, "temperature", "max_tokens", "top_p", "top_k"})
        | {"stop_sequences"},
        "1.3b0",
    ),
    Entry(
        "botocore-bedrock",
        ("opentelemetry.instrumentation.botocore",),
        ("genai",),
        frozenset({fields.MODEL, "temperature", "max_tokens", "top_p", "stop_sequences"}),
        "0.66b2",
    ),
)

# genai-openai's marker of a Responses API call.
API_TYPE: Final = "openai.api.type"

GENAI: Final = Convention(
    "genai",
    claims=lambda attributes, span_name: True,
    is_llm_call=is_llm_call,
    adapt=adapt,
    content=CONTENT,
    output=OUTPUT,
    ledger=LEDGER,
    stacks=STACKS,
    sdk_scopes=SDK_SCOPES,
    model_keys=("gen_ai.request.model",),
    response_id_keys=("gen_ai.response.id",),
    responses=RESPONSES_RECORDED,
    responses_call=lambda attributes, span_name: attributes.get(API_TYPE) == "responses",
    incremental=MESSAGES.key,
)
