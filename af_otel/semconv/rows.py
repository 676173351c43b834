"""The two table mechanics every adapter shares: read rows of (target, source keys, coercer), and
rebuild indexed keys such as ``llm.input_messages.3.message.role`` by bucketing them in one pass;
and the one coercer of each dial, whichever convention names its source keys."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from af_otel.semconv.coerce import (
    boolean,
    choice_count,
    integer,
    number,
    string_list,
    structured,
    text,
)

# An index longer than this is not a list position any instrumentation writes; reading it as one
# would let a hostile key like `x.99999999999999999999.y` make a huge int and a holed list.
_MAX_INDEX_DIGITS: Final = 6


@dataclass(frozen=True, slots=True)
class Row:
    """One field of the normalized request: the first source key whose value coerces wins."""

    target: str
    sources: tuple[str, ...]
    coerce: Callable[[object], object | None]


def read_rows(attributes: Mapping[str, object], rows: Iterable[Row]) -> dict[str, object]:
    """The targets whose sources are present and coerce; absent and unreadable dials are left out."""
    out: dict[str, object] = {}
    for row in rows:
        for source in row.sources:
            if source not in attributes:
                continue
            value = row.coerce(attributes[source])
            if value is not None:
                out[row.target] = value
                break
    return out


Coercer = Callable[[object], object | None]
# How each dial of the normalized request's params is read, whatever its source key: first the
# sampling dials, which the GenAI conventions record as `gen_ai.request.<dial>`, then the rest.
SAMPLING_TYPES: Final[Mapping[str, Coercer]] = {
    "temperature": number,
    "max_tokens": integer,
    "top_p": number,
    "top_k": number,
    "stop_sequences": string_list,
    "seed": integer,
    "frequency_penalty": number,
    "presence_penalty": number,
}
DIAL_TYPES: Final[Mapping[str, Coercer]] = {
    **SAMPLING_TYPES,
    "choice_count": choice_count,
    "tool_choice": structured,
    "parallel_tool_calls": boolean,
    "response_format": structured,
    "reasoning_effort": text,
    "thinking": structured,
}


def dial_rows(*sources: Mapping[str, tuple[str, ...]]) -> tuple[Row, ...]:
    """Rows reading each dial ``sources`` name from its source keys (those of every mapping, in
    order), with the dial's coercer from `DIAL_TYPES`."""
    keys: dict[str, tuple[str, ...]] = {}
    for table in sources:
        for dial, names in table.items():
            keys[dial] = (*keys.get(dial, ()), *names)
    return tuple(Row(dial, names, DIAL_TYPES[dial]) for dial, names in keys.items())


def _index(segment: str) -> int | None:
    if 0 < len(segment) <= _MAX_INDEX_DIGITS and segment.isascii() and segment.isdigit():
        return int(segment)
    return None


def bucket(items: Iterable[tuple[str, object]], prefix: str) -> dict[int, dict[str, object]]:
    """Group ``{prefix}{i}.{rest}`` keys as ``{i: {rest: value}}`` in one pass over ``items``.

    Keys whose index is not a small decimal number, or that have no ``rest``, are skipped.
    """
    buckets: dict[int, dict[str, object]] = {}
    for key, value in items:
        if not key.startswith(prefix):
            continue
        head, dot, rest = key[len(prefix) :].partition(".")
        position = _index(head)
        if position is None or not dot or not rest:
            continue
        buckets.setdefault(position, {})[rest] = value
    return buckets


def dense(buckets: Mapping[int, dict[str, object]]) -> list[dict[str, object]] | None:
    """The buckets as a list in index order, or ``None`` when an index is missing.

    A hole means part of the record was lost (an evicted attribute, a cut export), and a request
    rebuilt without it would be a different request.
    """
    if sorted(buckets) != list(range(len(buckets))):
        return None
    return [buckets[position] for position in range(len(buckets))]
