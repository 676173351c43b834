"""OTLP JSON ``ResourceSpans`` to span records: the body of OTLP files, Tempo and Jaeger v3.

One tolerant decoder serves every OTLP-shaped body, because they differ only in encodings that
``decoders`` already accepts (hex or base64 ids, enum numbers or names, int64 as numbers or strings,
lowerCamelCase or proto field names, null for absent) and in Tempo 1.x's
``instrumentationLibrarySpans`` for today's ``scopeSpans``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from af_otel.reader.records import EventRecord, SpanKind, SpanRecord, StatusCode, freeze_attributes
from af_otel.reader.sources.decoders import (
    Problem,
    array_text,
    attributes,
    enum_value,
    id_hex,
    int_value,
    message_field,
    optional_id_hex,
    proto_name,
)
from af_otel.reader.sources.stream import SpanStream

if TYPE_CHECKING:
    from af_otel.reader.records import AttrValue

__all__ = ["resource_spans_records", "span_record", "spans_list"]


class _SpanKeys(NamedTuple):
    trace_id: str
    span_id: str
    parent_span_id: str
    start: str
    end: str
    dropped_attributes: str
    dropped_events: str


_CAMEL: Final = _SpanKeys(
    "traceId",
    "spanId",
    "parentSpanId",
    "startTimeUnixNano",
    "endTimeUnixNano",
    "droppedAttributesCount",
    "droppedEventsCount",
)
_PROTO: Final = _SpanKeys(*(proto_name(name) for name in _CAMEL))


def resource_spans_records(
    batches: object,
    origin: str,
    stream: SpanStream,
    path: str = "resourceSpans",
    *,
    text_arrays: frozenset[str] = frozenset(),
) -> Iterator[SpanRecord]:
    """Yield a record per span of a ``ResourceSpans`` list; ``path`` names the list in messages.

    Spans are numbered across the whole list (``span 3``) and located by JSON path, so that a
    message points at the span whatever its nesting. Attributes named in ``text_arrays`` that
    arrive as JSON text are turned back into arrays (a store that keeps arrays as text).
    """
    index = 0
    for r, batch in enumerate(stream.member(batches, list, f"{origin}: {path}") or ()):
        where = f"{path}[{r}]"
        if not isinstance(batch, dict):
            stream.problem(f"{origin}: {where} must be an object", unit="span")
            continue
        blocks, blocks_key = _scope_blocks(batch)
        try:
            resource_attributes = message_field(
                _mapping(message_field(batch, "resource"), "resource"), "attributes"
            )
            resource = freeze_attributes(attributes(resource_attributes, "resource"), owned=True)
        except Problem as exc:
            count = sum(len(spans_list(b)) for b in blocks if isinstance(b, dict))
            stream.problem(f"{origin}: {where}: {exc}", unit="span", count=max(count, 1))
            index += count
            continue
        for s, block in enumerate(blocks):
            scope, version = _scope(block)
            for j, span in enumerate(spans_list(block)):
                try:
                    yield span_record(span, resource, scope, origin, text_arrays, version)
                except Problem as exc:
                    stream.problem(
                        f"{origin}: span {index} ({where}.{blocks_key}[{s}].spans[{j}]): {exc}",
                        unit="span",
                    )
                index += 1


def _mapping(value: object, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Problem(f"{what} must be an object")
    return value


def _scope_blocks(batch: Mapping[str, Any]) -> tuple[list[Any], str]:
    for key in ("scopeSpans", "instrumentationLibrarySpans"):
        blocks = message_field(batch, key)
        if isinstance(blocks, list):
            return blocks, key
    return [], "scopeSpans"


def spans_list(block: object) -> list[Any]:
    """The ``spans`` list of a scope block; anything else reads as no spans."""
    spans = block.get("spans") if isinstance(block, dict) else None
    return spans if isinstance(spans, list) else []


def _scope(block: object) -> tuple[str, str]:
    """The scope block's instrumentation name and version ("" where not given)."""
    if not isinstance(block, dict):
        return "", ""
    scope = message_field(block, "scope") or message_field(block, "instrumentationLibrary")
    name = scope.get("name") if isinstance(scope, dict) else None
    version = scope.get("version") if isinstance(scope, dict) else None
    return (name if isinstance(name, str) else ""), (version if isinstance(version, str) else "")


def span_record(
    span: object,
    resource: Mapping[str, AttrValue],
    scope: str,
    origin: str,
    text_arrays: frozenset[str] = frozenset(),
    scope_version: str = "",
) -> SpanRecord:
    """One OTLP JSON span as a record; a field that cannot be decoded raises ``Problem``."""
    if not isinstance(span, dict):
        raise Problem(f"a span must be an object, got {type(span).__name__}")
    name = span.get("name") or ""
    if not isinstance(name, str):
        raise Problem("name must be a string")
    status = _mapping(span.get("status"), "status")
    events = span.get("events")
    if events is not None and not isinstance(events, list):
        raise Problem("events must be a list")
    # One spelling per span, chosen once: a writer uses lowerCamelCase or proto names throughout.
    key = _CAMEL if "traceId" in span else _PROTO
    return SpanRecord(
        trace_id=id_hex(span.get(key.trace_id), 16, "traceId"),
        span_id=id_hex(span.get(key.span_id), 8, "spanId"),
        parent_span_id=optional_id_hex(span.get(key.parent_span_id), 8, "parentSpanId"),
        name=name,
        kind=enum_value(span.get("kind"), SpanKind, "kind"),
        start_ns=int_value(span.get(key.start), "startTimeUnixNano", 0),
        end_ns=int_value(span.get(key.end), "endTimeUnixNano", 0),
        attributes=_attributes(span.get("attributes"), "attributes", text_arrays),
        events=tuple(_event(e, f"events[{k}]", text_arrays) for k, e in enumerate(events or ())),
        resource=resource,
        scope=scope,
        status_code=enum_value(status.get("code"), StatusCode, "status.code"),
        dropped_attributes_count=int_value(
            span.get(key.dropped_attributes), "droppedAttributesCount", 0
        ),
        dropped_events_count=int_value(span.get(key.dropped_events), "droppedEventsCount", 0),
        origin=origin,
        scope_version=scope_version,
    )


def _attributes(items: object, what: str, text_arrays: frozenset[str]) -> Mapping[str, AttrValue]:
    decoded = attributes(items, what)
    for key in text_arrays.intersection(decoded) if text_arrays else ():
        value = decoded[key]
        if isinstance(value, str):
            decoded[key] = array_text(value)
    return freeze_attributes(decoded, owned=True)


def _event(event: object, what: str, text_arrays: frozenset[str] = frozenset()) -> EventRecord:
    if not isinstance(event, dict):
        raise Problem(f"{what} must be an object")
    name = event.get("name") or ""
    if not isinstance(name, str):
        raise Problem(f"{what}.name must be a string")
    return EventRecord(
        name=name,
        time_ns=int_value(message_field(event, "timeUnixNano"), f"{what}.timeUnixNano", 0),
        attributes=_attributes(event.get("attributes"), f"{what}.attributes", text_arrays),
        dropped_attributes_count=int_value(
            message_field(event, "droppedAttributesCount"), f"{what}.droppedAttributesCount", 0
        ),
    )
