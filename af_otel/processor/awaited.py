"""What the exporter form knows of the calls still to come (docs/processor.md, The exporter: what
differs): the LLM calls its `RunTagger` saw start that its exporter has not exported yet, and
the ended ones that hold the late bodies of their trace until their batch comes.

The processor form enriches a call at its end, so a body filed under a call still open waits for
it (`Engine`'s open calls) and a late body waits only until the span written after its call
ends. The exporter form sees a call a batch later: without this table a body filed under a call
of a later batch could be claimed late by another call, and a late body could be dropped for a
newer one before its span came. Bounded like the engine's open calls (a span never exported falls
out oldest first, and one a full queue dropped is gone with its span object); one short lock made by `af_otel.forksafe`, and a
forked child starts empty (the parent's calls are not its own).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Any, Final

from af_otel import forksafe
from af_otel.processor.facts import SpanKey
from af_otel.semconv import is_llm_call
from af_otel.wire.tap import LOOSE

MAX_AWAITED: Final = 65_536


class Awaited:
    """Spans started and not yet exported, for one exporter: each by a weak reference, so the
    table keeps no span alive, and one whose span object is gone (a full queue dropped it) can
    no longer come. Whether one is an LLM call is asked only when a late claim meets a body
    filed under it, on the export thread: a span start costs a weak reference and a put."""

    def __init__(self) -> None:
        self._lock = forksafe.lock(self)
        self._spans: OrderedDict[SpanKey, weakref.ref[Any]] = OrderedDict()
        self._holding: OrderedDict[SpanKey, None] = OrderedDict()  # ended spans holding bodies
        self._closed = False
        forksafe.on_fork(self, Awaited._clear)

    def started(self, key: SpanKey, span: Any) -> None:
        """Span ``key`` started (``span``: the SDK's span object, the one it exports)."""
        if self._closed:
            return
        held = weakref.ref(span)
        with self._lock:
            self._spans[key] = held
            if len(self._spans) > MAX_AWAITED:
                self._spans.popitem(last=False)

    def ended(self, span: Any) -> None:
        """An LLM span ended and waits for its batch: it holds the late bodies of its trace (and
        of none, for a root span) sent within its window (`wire_source.window_of`)."""
        context = span.context
        if context is None or self._closed:
            return
        trace_id = context.trace_id
        traces = (trace_id, 0) if span.parent is None else (trace_id,)
        if not LOOSE.keeps(traces):  # the common case: nothing waits by these traces
            return
        if not is_llm_call(span.attributes or {}, span.name):
            return
        start, end = _window(span)
        key = (trace_id, context.span_id)
        if LOOSE.hold(key, traces, start, end):
            with self._lock:
                self._holding[key] = None
                if len(self._holding) > MAX_AWAITED:
                    self._holding.popitem(last=False)

    def exported(self, keys: list[SpanKey]) -> None:
        """The spans ``keys`` reached the exporter: nothing waits for them any more."""
        with self._lock:
            if self._spans:
                for key in keys:
                    self._spans.pop(key, None)
            released = [key for key in keys if key in self._holding] if self._holding else []
            for key in released:
                del self._holding[key]
        if released:
            LOOSE.release(released)

    def close(self) -> None:
        """The exporter shut down (its batch processor exported what it had first): no span of
        it comes any more, so none waits or holds; a span ending later holds nothing."""
        with self._lock:
            self._closed = True
            released = list(self._holding)
            self._clear()
        LOOSE.release(released)

    def takes(self, key: SpanKey, at: int) -> bool:
        """Whether ``key`` is an LLM call still to come that will take a body sent at ``at``
        and filed under it: its span is open, or ended with ``at`` in its window
        (`wire_source.window_of`); then the body waits for it, as in the processor form (an
        open call there keeps it, and one that ended has taken it already)."""
        held = self._spans.get(key)
        span = held() if held is not None else None
        if span is None or not is_llm_call(span.attributes or {}, span.name):
            return False
        if span.end_time is None:
            return True
        start, end = _window(span)
        return start <= at <= end

    def _clear(self) -> None:
        self._spans = OrderedDict()
        self._holding = OrderedDict()


def _window(span: Any) -> tuple[int, int]:
    """An ended span's window as `wire_source.window_of` reads it from the call's facts: its
    start to its end, or to its last event when that comes later."""
    last = max((event.timestamp for event in span.events), default=0)
    return span.start_time or 0, max(span.end_time or 0, last)
