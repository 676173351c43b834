"""The close record `af_otel.run` writes when its block exits (docs/receipt-spec.md, the close
record): a small span of its own, ``af.run.close``, naming per lane the last epoch and its digest.

A span of its own because the run's last LLM span has usually ended (and been exported) before the
block exits. It goes where the run's calls went: each `ReceiptSpanProcessor` whose engine numbered
calls of the run hands its inner processor a close span with its own lane; each `RunTagger` that
tagged spans of the run hands its batch processor an empty one, which `ReceiptSpanExporter` fills
in from its engine when it exports it, after the run's calls (queued before it). When no af_otel
processor took it (the completion hook or `llm_call` alone), the close span is made through the
global tracer provider, with the lanes of the engines that minted the calls. Never raises: the
caller guards.
"""

from __future__ import annotations

import secrets
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from af_otel import names
from af_otel.processor.engine import live_engines
from af_otel.processor.spancopy import copy_span

__all__ = ["Closer", "close_attributes", "close_run", "is_run_close", "merged_close", "register"]

Lane = tuple[str, int, str]  # lane, last epoch, that epoch's digest ("" without one)


class Closer(Protocol):
    """A processor that can deliver a run's close record into its own pipeline."""

    def close_run(self, run_id: str) -> bool:
        """Deliver the close record of ``run_id`` if this pipeline carried calls of it."""
        ...


_closers: weakref.WeakSet[Any] = weakref.WeakSet()


def register(closer: Closer) -> None:
    _closers.add(closer)


def is_run_close(name: str, attributes: Mapping[str, Any]) -> bool:
    """A close record: the span name, a run id, and no epoch (no LLM call is named so)."""
    return name == names.RUN_CLOSE and names.RUN_ID in attributes and names.EPOCH not in attributes


def close_attributes(run_id: str, lanes: Sequence[Lane]) -> dict[str, Any]:
    ordered = sorted(set(lanes))
    return {
        names.RUN_ID: run_id,
        names.RUN_CLOSE_LANES: [lane for lane, _, _ in ordered],
        names.RUN_CLOSE_EPOCHS: [epoch for _, epoch, _ in ordered],
        names.RUN_CLOSE_DIGESTS: [digest for _, _, digest in ordered],
    }


def _lanes_of(attributes: Mapping[str, Any]) -> list[Lane]:
    lanes = attributes.get(names.RUN_CLOSE_LANES) or ()
    epochs = attributes.get(names.RUN_CLOSE_EPOCHS) or ()
    digests = attributes.get(names.RUN_CLOSE_DIGESTS) or ()
    if not len(lanes) == len(epochs) == len(digests):
        return []
    return [(str(a), int(b), str(c)) for a, b, c in zip(lanes, epochs, digests, strict=True)]


def merged_close(span: ReadableSpan, lane: Lane | None) -> ReadableSpan:
    """The close span with ``lane`` (an exporter's own, known only at export) added to those it
    names, replacing an entry of the same lane."""
    if lane is None:
        return span
    attributes = span.attributes or {}
    kept = [entry for entry in _lanes_of(attributes) if entry[0] != lane[0]]
    run_id = str(attributes[names.RUN_ID])
    return copy_span(span, close_attributes(run_id, [*kept, lane]))


def close_span(
    run_id: str,
    lanes: Sequence[Lane],
    resource: Resource | None = None,
    place: tuple[int, int] | None = None,
) -> ReadableSpan:
    """A finished close span beside the run's last call (``place``: its trace id and parent span
    id, 0 for none), else in the trace of the span current at the block's exit, else alone."""
    flags = TraceFlags(TraceFlags.SAMPLED)
    current = trace.get_current_span().get_span_context()
    parent: SpanContext | None = current if current.is_valid else None
    trace_id = current.trace_id if current.is_valid else secrets.randbits(128) or 1
    if place is not None and place[0]:
        trace_id = place[0]
        parent = SpanContext(trace_id, place[1], is_remote=False, trace_flags=flags)
        parent = parent if place[1] else None
    context = SpanContext(
        trace_id,
        secrets.randbits(64) or 1,
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    now = time.time_ns()
    return ReadableSpan(
        name=names.RUN_CLOSE,
        context=context,
        parent=parent,
        resource=resource or Resource.get_empty(),
        attributes=BoundedAttributes(
            maxlen=None, attributes=close_attributes(run_id, lanes), immutable=True
        ),
        kind=SpanKind.INTERNAL,
        start_time=now,
        end_time=now,
        instrumentation_scope=InstrumentationScope("af_otel"),
    )


def global_tracer() -> trace.Tracer:
    """The tracer of the global provider, where hook-only setups export (tests point it)."""
    return trace.get_tracer("af_otel")


def close_run(run_id: str) -> None:
    """Write the run's close record into every pipeline that carried its calls (module doc)."""
    delivered = False
    for closer in list(_closers):
        delivered = closer.close_run(run_id) or delivered
    if delivered:
        return
    # An exporter's engine may not have seen the calls yet; it fills its lane in at export.
    lanes = [found for engine in live_engines() if (found := engine.closing(run_id)) is not None]
    if not lanes:
        return
    place = next(
        (where for engine in live_engines() if (where := engine.last_place(run_id)) is not None),
        None,
    )
    context = None
    if place is not None and place[0]:
        flags = TraceFlags(TraceFlags.SAMPLED)
        if place[1]:
            beside = SpanContext(place[0], place[1], is_remote=False, trace_flags=flags)
            context = trace.set_span_in_context(trace.NonRecordingSpan(beside))
    span = global_tracer().start_span(
        names.RUN_CLOSE, context=context, attributes=close_attributes(run_id, lanes)
    )
    span.end()
