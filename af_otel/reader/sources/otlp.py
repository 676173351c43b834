"""OTLP JSON ``ResourceSpans`` to span records: the body of OTLP files, Tempo and Jaeger v3.

One tolerant decoder serves every OTLP-shaped body, because they differ only in encodings that
``_values`` already accepts (hex or base64 ids, enum numbers or names, int64 as numbers or strings)
and in Tempo 1.x's ``instrumentationLibrarySpans`` for today's ``scopeSpans``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from af_otel.reader.records import (
    AttrValue,
    EventRecord,
    SpanKind,
    SpanRecord,
    StatusCode,
    freeze_attributes,
)
from af_otel.reader.sources._values import (
    Problem,
    attributes,
    enum_value,
    id_hex,
    int_value,
    optional_id_hex,
)
from af_otel.reader.sources.stream import SpanStream

__all__ = ["resource_spans_records"]


def resource_spans_records(
    batches: object, origin: str, stream: SpanStream, path: str = "resourceSpans"
) -> Iterator[SpanRecord]:
    """Yield a record per span of a ``ResourceSpans`` list; ``path`` names the list in messages.

    Spans are numbered across the whole list (``span 3``) and located by JSON path, so that a
    message points at the span whatever its nesting.
    """
    if batches is None:
        return
    if not isinstance(batches, list):
        stream.problem(f"{origin}: {path} must be a list", unit="line")
        return
    index = 0
    for r, batch in enumerate(batches):
        where = f"{path}[{r}]"
        if not isinstance(batch, dict):
            stream.problem(f"{origin}: {where} must be an object", unit="span")
            continue
        blocks, blocks_key = _scope_blocks(batch)
        try:
            resource_attributes = _mapping(batch.get("resource"), "resource").get("attributes")
            resource = freeze_attributes(attributes(resource_attributes, "resource"), owned=True)
        except Problem as exc:
            count = sum(len(_spans(b)) for b in blocks if isinstance(b, dict))
            stream.problem(f"{origin}: {where}: {exc}", unit="span", count=max(count, 1))
            index += count
            continue
        for s, block in enumerate(blocks):
            scope = _scope_name(block)
            for j, span in enumerate(_spans(block)):
                try:
                    record = _span(span, resource, scope, origin)
                except Problem as exc:
                    stream.problem(
                        f"{origin}: span {index} ({where}.{blocks_key}[{s}].spans[{j}]): {exc}",
                        unit="span",
                    )
                    record = None
                index += 1
                if record is not None:
                    yield record


def _mapping(value: object, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Problem(f"{what} must be an object")
    return value


def _scope_blocks(batch: Mapping[str, Any]) -> tuple[list[Any], str]:
    for key in ("scopeSpans", "instrumentationLibrarySpans"):
        blocks = batch.get(key)
        if isinstance(blocks, list):
            return blocks, key
    return [], "scopeSpans"


def _spans(block: object) -> list[Any]:
    spans = block.get("spans") if isinstance(block, dict) else None
    return spans if isinstance(spans, list) else []


def _scope_name(block: object) -> str:
    if not isinstance(block, dict):
        return ""
    scope = block.get("scope") or block.get("instrumentationLibrary")
    name = scope.get("name") if isinstance(scope, dict) else None
    return name if isinstance(name, str) else ""


def _span(span: object, resource: Mapping[str, AttrValue], scope: str, origin: str) -> SpanRecord:
    if not isinstance(span, dict):
        raise Problem(f"a span must be an object, got {type(span).__name__}")
    name = span.get("name", "")
    if not isinstance(name, str):
        raise Problem("name must be a string")
    status = _mapping(span.get("status"), "status")
    events = span.get("events")
    if events is not None and not isinstance(events, list):
        raise Problem("events must be a list")
    return SpanRecord(
        trace_id=id_hex(span.get("traceId"), 16, "traceId"),
        span_id=id_hex(span.get("spanId"), 8, "spanId"),
        parent_span_id=optional_id_hex(span.get("parentSpanId"), 8, "parentSpanId"),
        name=name,
        kind=enum_value(span.get("kind"), SpanKind, "kind"),
        start_ns=int_value(span.get("startTimeUnixNano"), "startTimeUnixNano", 0),
        end_ns=int_value(span.get("endTimeUnixNano"), "endTimeUnixNano", 0),
        attributes=freeze_attributes(attributes(span.get("attributes"), "attributes"), owned=True),
        events=tuple(_event(e, f"events[{k}]") for k, e in enumerate(events or ())),
        resource=resource,
        scope=scope,
        status_code=enum_value(status.get("code"), StatusCode, "status.code"),
        dropped_attributes_count=int_value(
            span.get("droppedAttributesCount"), "droppedAttributesCount", 0
        ),
        dropped_events_count=int_value(span.get("droppedEventsCount"), "droppedEventsCount", 0),
        origin=origin,
    )


def _event(event: object, what: str) -> EventRecord:
    if not isinstance(event, dict):
        raise Problem(f"{what} must be an object")
    name = event.get("name", "")
    if not isinstance(name, str):
        raise Problem(f"{what}.name must be a string")
    return EventRecord(
        name=name,
        time_ns=int_value(event.get("timeUnixNano"), f"{what}.timeUnixNano", 0),
        attributes=freeze_attributes(
            attributes(event.get("attributes"), f"{what}.attributes"), owned=True
        ),
        dropped_attributes_count=int_value(
            event.get("droppedAttributesCount"), f"{what}.droppedAttributesCount", 0
        ),
    )
