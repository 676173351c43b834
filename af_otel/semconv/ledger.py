"""The field ledger: which request fields each instrumentation records, and which a span lost.

A receipt can only fingerprint what the record holds. When an instrumentation never records a
field (tool definitions, ``tool_choice``), an empty value on its span is not proof the request had
none, so the field is named as unrecorded and the reader cannot say ``verified``. When the SDK's
span limits may have evicted or cut an attribute the adapter reads, no receipt is minted at all.
Some fields an instrumentation records only by a marker: genai-openai writes
``gen_ai.output.type`` whenever a request sets ``response_format``, so a span without it shows the
request had none, while a span with it holds no schema (the field is then unrecorded).
docs/instrumentations.md restates the ledger as a table; a test keeps the two equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from af_otel.model import fields
from af_otel.model.request import PARAM_KEYS, SAMPLING_KEYS, STEERING_KEYS, Request
from af_otel.semconv.adapted import (
    CUT_COUNT,
    CUT_LENGTH,
    NOTE_MODEL_FROM_RESPONSE,
    NOTE_MODEL_NOT_CAPTURED,
    NOTE_OUTPUT_TYPE,
    NOTE_TOOLS_ECHOED,
    NOTE_UNPLACED,
    Convention,
)

_ALL: Final = frozenset(fields.FIELDS)
# Fields beyond `fields.FIELDS` an entry may lack (`Entry.lacks`).
TOOL_CALL_ID: Final = "tool_call.id"
TOOL_RESULT_NAME: Final = "tool_result.name"
# OpenAI's sampling dials: the settings it has, less those that steer tools and output.
_OPENAI_DIALS: Final = (fields.PROVIDER_FIELDS["openai"] & frozenset(fields.DIALS)) - frozenset(
    STEERING_KEYS
)


@dataclass(frozen=True, slots=True)
class Entry:
    """One instrumentation: the scopes and convention it writes, and the fields it records."""

    label: str
    scopes: tuple[str, ...]  # instrumentation scope names; a name also matches its dotted children
    conventions: tuple[Convention, ...]
    recorded: frozenset[str]
    versions: str = ""  # the releases this entry was checked against (docs only)
    # Fields recorded only when the request left them out: (field, the adapter note that says the
    # request set it). Without the note the span shows the field absent; with it, unrecorded.
    marked: tuple[tuple[str, str], ...] = ()
    # Fields beyond `fields.FIELDS` this instrumentation never records: (field, the part type
    # that makes it matter). google-genai invents tool-call ids and drops a function response's
    # name, so on a call with such parts those are unrecorded.
    lacks: tuple[tuple[str, str], ...] = ()

    def recorded_by(self, notes: Iterable[str]) -> frozenset[str]:
        """The fields this entry records on a span whose adapter wrote ``notes``."""
        noted = frozenset(notes)
        return self.recorded | {field for field, note in self.marked if note not in noted}

    def claims(self, scope: str | None, convention: Convention) -> bool:
        if convention not in self.conventions or not scope:
            return False
        return any(scope == s or scope.startswith(s + ".") for s in self.scopes)


# What OpenLLMetry records, the same in both eras.
_OPENLLMETRY: Final = frozenset(
    {fields.MODEL, fields.TOOLS, "temperature", "max_tokens", "top_p", "top_k"}
    | {"frequency_penalty", "presence_penalty"}
)
# First match wins; `docs/instrumentations.md` has the same rows as a table.
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
    Entry(
        "pydantic-ai",
        ("pydantic-ai",),
        ("genai",),
        # The settings it writes as gen_ai.request.* (af_otel.semconv.pydantic_ai reads the rest).
        frozenset({fields.MODEL, fields.TOOLS, "max_tokens", "top_p", "seed", "temperature"})
        | {"presence_penalty", "frequency_penalty"},
        "2.68.0 (native, data format 5)",
    ),
    Entry(
        "openinference-llama-index",
        ("openinference.instrumentation.llama_index",),
        ("openinference",),
        # Its parameters are the LLM's metadata, not the request's (af_otel.semconv.llama_index).
        frozenset({fields.MODEL, fields.TOOLS}),
        "4.6.1 (llama-index-core 0.14.25, llama-index-llms-openai 0.8.3)",
    ),
    Entry(
        "openinference-openai-agents",
        ("openinference.instrumentation.openai_agents",),
        ("openinference",),
        # Settings, tools and model are the response's echo (af_otel.semconv.openai_agents).
        frozenset(),
        "2.6.0 (openai-agents 0.24.0)",
    ),
    Entry(
        "openinference",
        ("openinference.instrumentation",),
        ("openinference",),
        # anthropic 3.1 writes a thinking block's signature; older releases may not, so a
        # signature counts as recorded only where the span shows one.
        _ALL - {fields.TOOL_ERROR, fields.SIGNATURE, fields.TOOLS},
        "openai 0.1.66, anthropic 3.1",
        # On a Responses call its tools are the response's echo, which the adapter leaves out.
        marked=((fields.TOOLS, NOTE_TOOLS_ECHOED),),
    ),
    Entry(
        "litellm",
        ("litellm",),
        ("litellm",),
        # temperature and top_p are written only when truthy: recorded where the span shows them.
        frozenset({fields.MODEL, fields.TOOLS, "max_tokens"}),
        "1.110.2 (its OpenTelemetry callback)",
    ),
    Entry(
        "openllmetry",
        ("opentelemetry.instrumentation",),
        ("openllmetry",),
        _OPENLLMETRY,
        ">=0.55",
    ),
    Entry(
        "openllmetry-legacy",
        ("opentelemetry.instrumentation",),
        ("openllmetry-legacy",),
        _OPENLLMETRY,
        "<=0.54",
    ),
)
# The dials util-genai's instrumentations of the Google and Bedrock clients record.
_GOOGLE_DIALS: Final = frozenset(SAMPLING_KEYS)
# The agent stacks' instrumentations (docs/instrumentations.md, "Agent stacks": a row each).
STACKS: Final = (
    Entry(
        "google-genai",
        ("opentelemetry.instrumentation.google_genai",),
        ("google-genai",),
        frozenset({fields.MODEL, fields.TOOLS, *_GOOGLE_DIALS}),
        "1.3b0 on google-genai 2.34.0 (and 3.6.1 with skip_dep_check)",
        marked=(("response_format", NOTE_OUTPUT_TYPE),),
        lacks=((TOOL_CALL_ID, "tool_call"), (TOOL_RESULT_NAME, "tool_call_response")),
    ),
    Entry(
        "google-adk",
        ("gcp.vertex.agent",),
        ("google-genai",),
        # Its generate_content span (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental):
        # the GenAI content keys, the ids google-genai's instrumentation would invent, no dials.
        frozenset({fields.MODEL, fields.TOOLS}),
        "2.13.0",
        lacks=((TOOL_CALL_ID, "tool_call"), (TOOL_RESULT_NAME, "tool_call_response")),
    ),
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
# af_otel's explicit API is handed the request itself: every field the caller passes is recorded.
EXPLICIT_API: Final = Entry("af_otel.llm_call", ("af_otel",), ("genai",), _ALL)


def entry_for(scope: str | None, convention: Convention) -> Entry | None:
    """The ledger entry of the instrumentation that wrote a span, or None when it is unknown."""
    return next((e for e in (*LEDGER, *STACKS, EXPLICIT_API) if e.claims(scope, convention)), None)


def written(request: Request, seen: fields.Shown | None = None) -> frozenset[str]:
    """The fields a request, as an unknown instrumentation wrote it, shows a value for: all an
    unknown instrumentation is taken to record (``seen``: the request's `fields.shown`)."""
    found: set[str] = {key for key in request.params if key in PARAM_KEYS}
    if request.tools:
        found.add(fields.TOOLS)
    return frozenset(found) | (seen or fields.shown(request)).fields


# Adapter notes that say the request model is not on the span (the model shown, if any, is the
# one the response named, which is not what was asked for).
_MODEL_NOT_RECORDED: Final = frozenset({NOTE_MODEL_FROM_RESPONSE, NOTE_MODEL_NOT_CAPTURED})


def unrecorded(
    request: Request,
    scope: str | None,
    convention: Convention,
    notes: Iterable[str] = (),
    shown: fields.Shown | None = None,
) -> tuple[str, ...]:
    """The fields of ``request`` its instrumentation could not show (module docstring);
    ``notes`` are the adapter's, which say when this span lacks the request model and when it
    marks a field the entry records only when absent (`Entry.marked`); ``shown`` is the
    request's `fields.shown` when the caller already has it."""
    entry = entry_for(scope, convention)
    notes = tuple(notes)
    seen = shown or fields.shown(request)  # one pass over the messages serves both questions
    # What the span shows is on record whatever the ledger says (a newer release may record more).
    recorded = written(request, seen) | (entry.recorded_by(notes) if entry else frozenset())
    # Every instrumentation writes the request model when it has one; the notes say when not.
    recorded |= {fields.MODEL}
    if not _MODEL_NOT_RECORDED.isdisjoint(notes):
        recorded -= {fields.MODEL}
    found = fields.unrecorded(request, recorded, seen)
    lacking = tuple(field for field, kind in entry.lacks if kind in seen.kinds) if entry else ()
    # Arguments on the span the adapter could not place: unrecorded, as the wire readers name
    # the body keys they cannot place.
    unplaced = [n.removeprefix(NOTE_UNPLACED) for n in notes if n.startswith(NOTE_UNPLACED)]
    named = (*found, *(key for key in lacking if key not in found))
    return (*named, *(key for key in unplaced if key not in named))


# -- span limits ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Limits:
    """The span limits in force where a span was recorded, and what they already dropped."""

    max_attributes: int | None = None
    max_value_length: int | None = None
    dropped_attributes: int = 0


# Keys that hold the response, not the request: a cut there does not touch the receipt.
_OUTPUT_EXACT: Final = frozenset({"gen_ai.output.messages", "gen_ai.completion", "output.value"})
_OUTPUT_PREFIXES: Final = ("gen_ai.completion.", "llm.output_messages.", "llm.choices.")


def _reads(key: str) -> bool:
    return key not in _OUTPUT_EXACT and not key.startswith(_OUTPUT_PREFIXES)


def _at_limit(value: object, limit: int) -> bool:
    if isinstance(value, str):
        return len(value) >= limit
    if isinstance(value, list | tuple):
        return any(isinstance(item, str) and len(item) >= limit for item in value)
    return False


def cut_by(attributes: Mapping[str, object], limits: Limits) -> str | None:
    """Which limit may have cut the request read from ``attributes``: `CUT_COUNT` when the span
    dropped attributes (the SDK evicts the oldest, so any key the adapter reads may be gone),
    `CUT_LENGTH` when a value other than the response stops at the value-length limit (the SDK
    cuts a longer one to exactly that length, so one that long may have been longer); else None."""
    if limits.dropped_attributes > 0:
        return CUT_COUNT
    limit = limits.max_value_length
    if limit is None or limit <= 0:
        return None
    at_limit = any(_reads(key) and _at_limit(value, limit) for key, value in attributes.items())
    return CUT_LENGTH if at_limit else None
