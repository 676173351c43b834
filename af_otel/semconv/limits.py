"""Span limits: the SDK's limits a span was recorded under, and whether they may have cut the
request read from it (then no receipt is minted: `content-cut`, docs/instrumentations.md).

The SDK evicts the oldest attribute past its count limit and cuts a value to exactly its length
limit; the limits are read from the span where it carries them, else from the SDK's environment
variables (`LIMIT_SETTINGS` names the one to raise when a limit cut a record).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from af_otel.semconv.adapted import CUT_COUNT, CUT_LENGTH
from af_otel.semconv.convention import tables


@dataclass(frozen=True, slots=True)
class Limits:
    """The span limits in force where a span was recorded, and what they already dropped."""

    max_attributes: int | None = None
    max_value_length: int | None = None
    dropped_attributes: int = 0


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
    # Keys that hold the response, not the request (`Convention.output`): a cut there does not
    # touch the receipt.
    output = tables().output
    exact, prefixes = output.exact, output.prefixes
    at_limit = any(
        key not in exact and not key.startswith(prefixes) and _at_limit(value, limit)
        for key, value in attributes.items()
    )
    return CUT_LENGTH if at_limit else None


# The SDK's environment variables for span limits, and the setting to raise when one cut a record.
ENV_COUNT_LIMIT: Final = "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"
ENV_LENGTH_LIMIT: Final = "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT"
_ENV_LENGTH_FALLBACK: Final = "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"
LIMIT_SETTINGS: Final = {CUT_COUNT: ENV_COUNT_LIMIT, CUT_LENGTH: ENV_LENGTH_LIMIT}


def _env_int(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw.isdigit() else None


def environment_limits() -> Limits:
    """The limits a span was recorded under when the span does not carry them: the SDK's
    environment variables (a span that carries its limits is read by the processor instead)."""
    length = _env_int(ENV_LENGTH_LIMIT)
    return Limits(
        max_attributes=_env_int(ENV_COUNT_LIMIT),
        max_value_length=length if length is not None else _env_int(_ENV_LENGTH_FALLBACK),
    )
