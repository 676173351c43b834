"""Build the enriched copy of an ended span from its public fields; the SDK's span is never touched.

The SDK freezes a span before any processor sees it, and the `ReadableSpan` handed to ``on_end``
shares its attribute and event containers with every other processor and with spans already queued
for export, so af_otel writes a new `ReadableSpan` instead (logfire's pattern). The copy keeps the
original's dropped-attribute, dropped-event and dropped-link counts, so the reader still sees that
the SDK cut something. It is not bounded again: af_otel's attributes never evict the
instrumentation's own (the SDK evicts the oldest first, which are the ``gen_ai.*`` identity keys).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Link

from af_otel.processor.facts import error_enrichment

# The fields the copy takes from the span as they are (`ReadableSpan` keyword names).
_KEPT: Final = (
    "name",
    "context",
    "parent",
    "resource",
    "kind",
    "status",
    "start_time",
    "end_time",
    "instrumentation_scope",
)


def copy_span(
    span: ReadableSpan,
    attributes: Mapping[str, Any] | None = None,
    events: Iterable[tuple[str, Mapping[str, Any]]] = (),
    *,
    drop: Collection[str] = (),
) -> ReadableSpan:
    """``span`` with ``attributes`` added (replacing equal keys), ``events`` appended at the span's
    end time and the keys in ``drop`` left out."""
    merged: dict[str, Any] = dict(span.attributes or {})
    for key in drop:
        merged.pop(key, None)
    if attributes:
        # Only af_otel's own values are cleaned as the SDK cleans a span's (lists to tuples):
        # the span's were cleaned when they were set, and a span's content attributes are large.
        merged.update(BoundedAttributes(maxlen=None, attributes=attributes))
    kept_attributes: Mapping[str, Any] = merged  # `ReadableSpan.attributes` is read-only
    if span.dropped_attributes:  # only a `BoundedAttributes` carries the SDK's dropped count
        bounded = BoundedAttributes(maxlen=None, attributes=merged, immutable=True)
        bounded.dropped = span.dropped_attributes
        kept_attributes = bounded
    at = span.end_time
    new_events = [
        Event(name, BoundedAttributes(maxlen=None, attributes=dict(attrs), immutable=True), at)
        for name, attrs in events
    ]
    event_list: BoundedList[Event] = BoundedList(None)
    event_list.extend([*span.events, *new_events])
    event_list.dropped = span.dropped_events
    link_list: BoundedList[Link] = BoundedList(None)
    link_list.extend(span.links)
    link_list.dropped = span.dropped_links
    kept = {name: getattr(span, name) for name in _KEPT}
    return ReadableSpan(**kept, attributes=kept_attributes, events=event_list, links=link_list)


def error_copy(span: ReadableSpan) -> ReadableSpan:
    """The span marked ``af.receipt.state=error``; the span itself if even that fails."""
    try:
        return copy_span(span, error_enrichment().attributes)
    except Exception:
        return span
