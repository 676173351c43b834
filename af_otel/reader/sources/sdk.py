"""Spans still in process: the OTel SDK's ``ReadableSpan`` objects (``InMemorySpanExporter``).

Read by duck typing on the SDK's public properties, so the reader imports no OpenTelemetry (only
``processor/`` may import the SDK). Values pass through the same rules as an OTLP export, so a
span read here equals the record read from that span's file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from af_otel.reader.records import EventRecord, SpanKind, SpanRecord, StatusCode, freeze_attributes
from af_otel.reader.sources.decoders import Problem, python_value
from af_otel.reader.sources.stream import SpanStream

if TYPE_CHECKING:
    from af_otel.reader.records import AttrValue

__all__ = ["is_readable_span", "sdk_records"]

# The API's SpanKind numbers differ from OTLP's (no UNSPECIFIED); names match.
_KINDS: Final = {kind.name: kind for kind in SpanKind}
_STATUSES: Final = {status.name: status for status in StatusCode}


def is_readable_span(value: object) -> bool:
    """Whether ``value`` quacks like an SDK ``ReadableSpan``."""
    return all(hasattr(value, attr) for attr in ("context", "kind", "attributes", "start_time"))


def sdk_records(spans: Iterable[object], stream: SpanStream) -> Iterator[SpanRecord]:
    """Yield a record per finished span; origins are ``ReadableSpan[i]`` in iteration order."""
    last_resource: tuple[object, Mapping[str, AttrValue]] | None = None
    for index, span in enumerate(spans):
        origin = f"ReadableSpan[{index}]"
        resource = getattr(span, "resource", None)
        # Spans of one provider share one Resource object: decode it once.
        if last_resource is None or last_resource[0] is not resource:
            last_resource = (resource, _attributes(getattr(resource, "attributes", None)))
        try:
            record = _record(span, last_resource[1], origin)
        except (Problem, AttributeError, KeyError, TypeError, ValueError) as exc:
            label = getattr(span, "name", "?")
            stream.problem(f"{origin} {label!r}: {exc}", unit="span")
            continue
        yield record


def _attributes(values: Mapping[str, object] | None) -> Mapping[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    for key, value in (values or {}).items():
        decoded = python_value(value)
        if decoded is not None:
            out[key] = decoded
    return freeze_attributes(out, owned=True)


def _record(span: Any, resource: Mapping[str, AttrValue], origin: str) -> SpanRecord:
    context = span.context
    if context is None or not context.trace_id or not context.span_id:
        raise Problem("the span has no valid span context")
    if span.start_time is None or span.end_time is None:
        raise Problem("the span has not ended")
    parent = span.parent
    scope = span.instrumentation_scope
    status = span.status
    return SpanRecord(
        trace_id=f"{context.trace_id:032x}",
        span_id=f"{context.span_id:016x}",
        parent_span_id=f"{parent.span_id:016x}" if parent is not None and parent.span_id else None,
        name=span.name,
        kind=_KINDS[span.kind.name],
        start_ns=span.start_time,
        end_ns=span.end_time,
        attributes=_attributes(span.attributes),
        events=tuple(
            EventRecord(
                name=event.name,
                time_ns=event.timestamp,
                attributes=_attributes(event.attributes),
                dropped_attributes_count=getattr(event, "dropped_attributes", 0) or 0,
            )
            for event in span.events
        ),
        resource=resource,
        scope=(scope.name or "") if scope is not None else "",
        status_code=_STATUSES[status.status_code.name] if status is not None else StatusCode.UNSET,
        dropped_attributes_count=span.dropped_attributes,
        dropped_events_count=span.dropped_events,
        origin=origin,
        scope_version=(scope.version or "") if scope is not None else "",
    )
