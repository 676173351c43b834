"""Adapters: an ended span's attributes -> the normalized request, whatever family wrote them.

Each instrumentation family is one `Convention` in `af_otel.semconv.conventions`, asked in the
registry's order; this module is semconv's public face, and the processor imports nothing else
of it. Every entry point is on the emit path: none raises. docs/instrumentations.md says what
each instrumentation records and what can and cannot be recovered from it.
"""

from __future__ import annotations

from typing import Final

from af_otel.semconv.adapted import (
    NOTE_ADAPTER_ERROR,
    NOTE_MODEL_FROM_RESPONSE,
    NOTE_MODEL_NOT_CAPTURED,
    NOTE_OUTPUT_TYPE,
    NOTE_PARAMS_UNREADABLE,
    Adapted,
    content_keys,
)
from af_otel.semconv.call import Call, handed_call, read_call, with_held
from af_otel.semconv.convention import (
    Convention,
    Entry,
    Keys,
    Projection,
    model_named,
    projection,
    register,
    registered,
    sdk_scopes,
    tables,
)
from af_otel.semconv.conventions.completion_hook import completion_attributes
from af_otel.semconv.conventions.llm_call import DIAL_KEYS, SLOTS
from af_otel.semconv.ledger import CUT_COUNT, CUT_LENGTH
from af_otel.semconv.limits import LIMIT_SETTINGS, Limits, environment_limits
from af_otel.semconv.record import Recorded, adapt, is_llm_call, record_of

__all__ = [
    "CUT_COUNT",
    "CUT_LENGTH",
    "DIAL_KEYS",
    "LIMIT_SETTINGS",
    "NOTE_ADAPTER_ERROR",
    "NOTE_MODEL_FROM_RESPONSE",
    "NOTE_MODEL_NOT_CAPTURED",
    "NOTE_OUTPUT_TYPE",
    "NOTE_PARAMS_UNREADABLE",
    "SDK_SCOPES",
    "SLOTS",
    "Adapted",
    "Call",
    "Convention",
    "Entry",
    "Keys",
    "Limits",
    "Projection",
    "Recorded",
    "adapt",
    "completion_attributes",
    "content_keys",
    "environment_limits",
    "handed_call",
    "is_llm_call",
    "model_named",
    "projection",
    "read_call",
    "record_of",
    "register",
    "registered",
    "sdk_scopes",
    "with_held",
]

SDK_SCOPES: Final = tables().sdk_scopes
"""The built-in families' scopes that wrap the provider SDK's own call (`Convention.sdk_scopes`);
`sdk_scopes` also has those of families registered later."""
