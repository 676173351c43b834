"""af_otel's explicit API (`af_otel.llm_call`): handed the request itself, it records every field
the caller passes. Its span is a GenAI one (``chat {model}``, scope ``af_otel``), minted before it
ends, so no span of it is read back; its ledger row says so should one be.
"""

from __future__ import annotations

from typing import Final

from af_otel.model import fields
from af_otel.semconv.convention import Convention, Entry
from af_otel.semconv.conventions.genai import DIAL_KEYS, SLOTS

__all__ = ["DIAL_KEYS", "EXPLICIT_API", "LLM_CALL", "SLOTS"]

EXPLICIT_API: Final = Entry("af_otel.llm_call", ("af_otel",), ("genai",), frozenset(fields.FIELDS))

LLM_CALL: Final = Convention("llm_call", ledger=(EXPLICIT_API,))
