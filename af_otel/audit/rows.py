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

from collections.abc import Mapping, Sequence
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

__all__ = ["BOOL_KEYS", "COLUMNS", "INT_KEYS", "RUN_KEY", "span_from_row", "typed_attributes"]

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


def typed_attributes(values: Mapping[str, str], what: str) -> dict[str, AttrValue]:
    """The exporter's text values with the af_otel keys' types restored. A value that does not
    read as its key's type stays text, for the reader to judge as it judges any bad value."""
    out: dict[str, AttrValue] = {}
    for key, text in values.items():
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
            attributes=typed_attributes(attrs, f"Events.Attributes[{index}]"),
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
        attributes=typed_attributes(attributes, "SpanAttributes"),
        events=events,
        resource=dict(resource),
        scope=str(scope),
        status_code=enum_value(status or None, StatusCode, "StatusCode"),
        origin=origin,
    )
