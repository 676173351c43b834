"""The field ledger: which request fields each instrumentation records, and which a span lost.

A receipt can only fingerprint what the record holds. When an instrumentation never records a
field (tool definitions, ``tool_choice``), an empty value on its span is not proof the request had
none, so the field is named as unrecorded and the reader cannot say ``verified``. When the SDK's
span limits may have evicted or cut an attribute the adapter reads, no receipt is minted at all.
Some fields an instrumentation records only by a marker: genai-openai writes
``gen_ai.output.type`` whenever a request sets ``response_format``, so a span without it shows the
request had none, while a span with it holds no schema (the field is then unrecorded).
docs/instrumentations.md restates the ledger as a table; a test keeps the two equal. (The span
limits' rule, which mints no receipt at all, is `af_otel.semconv.limits`.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from af_otel.model import fields
from af_otel.model.request import PARAM_KEYS, Request
from af_otel.semconv.adapted import (
    CUT_COUNT,
    CUT_LENGTH,
    NOTE_MODEL_FROM_RESPONSE,
    NOTE_MODEL_NOT_CAPTURED,
    NOTE_UNPLACED,
)
from af_otel.semconv.convention import Entry, tables
from af_otel.semconv.conventions import BUILT_IN
from af_otel.semconv.conventions.google_genai import TOOL_CALL_ID, TOOL_RESULT_NAME
from af_otel.semconv.conventions.llm_call import EXPLICIT_API
from af_otel.semconv.limits import Limits, cut_by

__all__ = [
    "CUT_COUNT",
    "CUT_LENGTH",
    "EXPLICIT_API",
    "LEDGER",
    "STACKS",
    "TOOL_CALL_ID",
    "TOOL_RESULT_NAME",
    "Entry",
    "Limits",
    "cut_by",
    "entry_for",
    "unrecorded",
    "written",
]

# The rows of the families that read spans, in registry order (docs/instrumentations.md has the
# same rows as a table), and the explicit API's; each family holds its own (`Convention.ledger`).
LEDGER: Final = tuple(row for c in BUILT_IN if c.claims is not None for row in c.ledger)
# The agent stacks' instrumentations (docs/instrumentations.md, "Agent stacks": a row each).
STACKS: Final = tuple(row for c in BUILT_IN for row in c.stacks)


def entry_for(scope: str | None, convention: str) -> Entry | None:
    """The ledger entry of the instrumentation that wrote a span, or None when it is unknown."""
    return next((e for e in tables().rows if e.claims(scope, convention)), None)


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
    convention: str,
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
