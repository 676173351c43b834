"""One row of the OpenTelemetry Collector's ClickHouse `otel_traces` table, read back as a span.

The Collector's ClickHouse exporter writes every attribute value as text (pdata's ``AsString``):
an int as its decimal digits, a bool as ``true``/``false``, a double in the shortest form that
reads back, bytes as base64, and an array or a map as JSON. The types are gone from the table, so
they are restored here for the attributes whose type docs/receipt-spec.md fixes (the af_otel
keys: ints, one bool, the string arrays); every other attribute stays the text the table holds,
as no reader rule depends on its type. Events come from the ``Events.*`` arrays, one element an
event; the exporter keeps no dropped-attribute or dropped-event count, so the records carry 0.

Nothing here imports a ClickHouse client: a row is a tuple of plain values in `COLUMNS` order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from af_otel import names
from af_otel.reader.records import AttrValue, EventRecord, SpanKind, SpanRecord, StatusCode
from af_otel.reader.sources.decoders import (
    Problem,
    array_text,
    enum_value,
    id_hex,
    int_value,
    optional_id_hex,
)
from af_otel.reader.sources.jaeger import ARRAY_KEYS

__all__ = [
    "BOOL_KEYS",
    "COLUMNS",
    "INT_KEYS",
    "JSON_COLUMNS",
    "LLM_SPANS",
    "LLM_SPANS_JSON",
    "RUN_KEY",
    "RUN_KEY_JSON",
    "flat_json",
    "span_from_json_row",
    "span_from_row",
    "typed_attributes",
]

# The af_otel attributes that are ints on the span (docs/receipt-spec.md §4 and §10), on the span
# or on its `af.commit` events.
INT_KEYS: Final = frozenset(
    {
        names.EPOCH,
        names.EPOCH_PARENT,
        names.EPOCH_SAME_AS,
        names.RECEIPT_MESSAGES_COUNT,
        names.RECEIPT_MESSAGES_KEPT,
        names.RECEIPT_BYTES,
        names.COMMIT_SEQ,
        names.COMMIT_BYTES,
    }
)
BOOL_KEYS: Final = frozenset({names.GAP_NO_RECEIPT_ON_CHART})
_BOOLS: Final = {"true": True, "false": False}

# What the audit groups by: the run, or for a call that names none the span itself (a call
# without a run is read alone, as the reader reads it: `af_otel.reader.view`).
RUN_KEY: Final = (
    f"if(SpanAttributes['{names.RUN_ID}'] != '', SpanAttributes['{names.RUN_ID}'], "
    "concat('span:', TraceId, ':', SpanId))"
)

# The spans the reader counts as LLM calls (`af_otel.reader.runs.is_enriched_call`, plus the spans
# merged into a call, which carry the run): the first three test keys the exporter's bloom index
# on `mapKeys(SpanAttributes)` covers; the last two keep a span whose state a backend dropped.
LLM_SPANS: Final = (
    f"(mapContains(SpanAttributes, '{names.RECEIPT_STATE}')"
    f" OR mapContains(SpanAttributes, '{names.RUN_ID}')"
    f" OR mapContains(SpanAttributes, '{names.EPOCH}')"
    f" OR has(`Events.Name`, '{names.COMMIT_EVENT}')"
    " OR arrayExists(k -> startsWith(k, 'af.receipt.'), mapKeys(SpanAttributes)))"
)

# The columns `span_from_row` reads, as SELECT expressions over the exporter's table; times as
# integer nanoseconds so that no client's datetime conversion (time zones, microseconds) is
# involved.
COLUMNS: Final = (
    f"{RUN_KEY} AS run_key",
    "toUnixTimestamp64Nano(Timestamp) AS start_ns",
    "Duration",
    "TraceId",
    "SpanId",
    "ParentSpanId",
    "SpanName",
    "SpanKind",
    "ResourceAttributes",
    "ScopeName",
    "SpanAttributes",
    "StatusCode",
    "arrayMap(t -> toUnixTimestamp64Nano(t), `Events.Timestamp`) AS event_ns",
    "`Events.Name`",
    "`Events.Attributes`",
)


# The JSON variant (the exporter's ``json`` option): attribute columns of ClickHouse type
# ``JSON``, whose values keep their types; keys are paths (`flat_json`).
RUN_KEY_JSON: Final = (
    f"if(ifNull(SpanAttributes.`{names.RUN_ID}`::Nullable(String), '') != '',"
    f" SpanAttributes.`{names.RUN_ID}`::String, concat('span:', TraceId, ':', SpanId))"
)
LLM_SPANS_JSON: Final = (
    f"(has(JSONAllPaths(SpanAttributes), '{names.RECEIPT_STATE}')"
    f" OR has(JSONAllPaths(SpanAttributes), '{names.RUN_ID}')"
    f" OR has(JSONAllPaths(SpanAttributes), '{names.EPOCH}')"
    f" OR has(`Events.Name`, '{names.COMMIT_EVENT}')"
    " OR arrayExists(k -> startsWith(k, 'af.receipt.'), JSONAllPaths(SpanAttributes)))"
)
JSON_COLUMNS: Final = (
    f"{RUN_KEY_JSON} AS run_key",
    *COLUMNS[1:8],
    "toJSONString(ResourceAttributes)",
    "ScopeName",
    "toJSONString(SpanAttributes)",
    "StatusCode",
    COLUMNS[12],
    COLUMNS[13],
    "arrayMap(a -> toJSONString(a), `Events.Attributes`)",
)


def typed_attributes(values: Mapping[str, Any], what: str) -> dict[str, AttrValue]:
    """The exporter's text values with the af_otel keys' types restored. A value that does not
    read as its key's type stays text, for the reader to judge as it judges any bad value. A
    value that already has a type (the JSON variant keeps them) is kept, a list as a tuple."""
    out: dict[str, AttrValue] = {}
    for key, text in values.items():
        if isinstance(text, list):
            out[key] = tuple(text)
            continue
        if isinstance(text, bool | int | float):
            out[key] = text
            continue
        if not isinstance(text, str):
            raise Problem(f"{what} {key!r} must be text, got {type(text).__name__}")
        value: AttrValue = text
        if key in INT_KEYS:
            try:
                value = int_value(text, f"{what} {key!r}")
            except Problem:
                value = text
        elif key in BOOL_KEYS:
            value = _BOOLS.get(text, text)
        elif key in ARRAY_KEYS:
            value = array_text(text)
        out[key] = value
    return out


def span_from_row(row: Sequence[Any], origin: str) -> SpanRecord:
    """The span of one row selected with `COLUMNS` (the first, the run key, is not read here).
    Raises `Problem` naming the column that cannot be read."""
    return _span(row, origin, _as_map)


def span_from_json_row(row: Sequence[Any], origin: str) -> SpanRecord:
    """The span of one row selected with `JSON_COLUMNS` from the exporter's JSON variant, whose
    attribute columns are ClickHouse ``JSON`` (read back as text with `toJSONString`)."""
    return _span(row, origin, flat_json)


def _as_map(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise Problem(f"{what} must be a map, got {type(value).__name__}")
    return value


def flat_json(text: Any, what: str) -> dict[str, Any]:
    """A ``JSON`` column's value as flat attribute keys: ClickHouse splits a key at its dots into
    nested objects (``af.epoch`` and ``af.epoch.parent`` become ``{"af": {"epoch": 3, "epoch":
    {"parent": 2}}}``, one name twice), so the text is read pair by pair and the paths joined
    again. A map-valued attribute is flattened with them (af_otel writes none)."""
    if not isinstance(text, str):
        raise Problem(f"{what} must be JSON text, got {type(text).__name__}")
    try:
        pairs = json.loads(text, object_pairs_hook=_Pairs)
    except ValueError as exc:
        raise Problem(f"{what} is not JSON: {exc}") from None
    if not isinstance(pairs, _Pairs):
        raise Problem(f"{what} must be a JSON object")
    out: dict[str, Any] = {}
    _flatten(pairs, "", out)
    return out


class _Pairs(list[tuple[str, Any]]):
    """An object's members in order, repeats kept (`flat_json`)."""


def _flatten(pairs: _Pairs, prefix: str, out: dict[str, Any]) -> None:
    for key, value in pairs:
        path = f"{prefix}{key}"
        if isinstance(value, _Pairs):
            _flatten(value, f"{path}.", out)
        else:
            out[path] = value


def _span(
    row: Sequence[Any], origin: str, read_map: Callable[[Any, str], Mapping[str, Any]]
) -> SpanRecord:
    (
        _run,
        start_ns,
        duration,
        trace_id,
        span_id,
        parent_id,
        name,
        kind,
        resource,
        scope,
        attributes,
        status,
        event_ns,
        event_names,
        event_attributes,
    ) = row
    if not len(event_ns) == len(event_names) == len(event_attributes):
        raise Problem("the Events.* arrays differ in length")
    start = int_value(start_ns, "Timestamp")
    events = tuple(
        EventRecord(
            name=str(event_name),
            time_ns=int_value(time_ns, f"Events.Timestamp[{index}]"),
            attributes=typed_attributes(
                read_map(attrs, f"Events.Attributes[{index}]"), f"Events.Attributes[{index}]"
            ),
        )
        for index, (time_ns, event_name, attrs) in enumerate(
            zip(event_ns, event_names, event_attributes, strict=True)
        )
    )
    return SpanRecord(
        trace_id=id_hex(trace_id, 16, "TraceId"),
        span_id=id_hex(span_id, 8, "SpanId"),
        parent_span_id=optional_id_hex(parent_id, 8, "ParentSpanId"),
        name=str(name),
        kind=enum_value(kind or None, SpanKind, "SpanKind"),
        start_ns=start,
        end_ns=start + int_value(duration, "Duration"),
        attributes=typed_attributes(read_map(attributes, "SpanAttributes"), "SpanAttributes"),
        events=events,
        resource=typed_attributes(read_map(resource, "ResourceAttributes"), "ResourceAttributes"),
        scope=str(scope),
        status_code=enum_value(status or None, StatusCode, "StatusCode"),
        origin=origin,
    )
