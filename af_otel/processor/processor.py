"""`ReceiptSpanProcessor`: wraps the user's export processor and forwards an enriched copy of each
LLM-call span (every other span passes through as the same object)."""

from __future__ import annotations

from typing import Any, Unpack

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from af_otel import names
from af_otel.processor import closing
from af_otel.processor.engine import Engine
from af_otel.processor.facts import CallFacts
from af_otel.processor.guard import guard, settle
from af_otel.processor.settings import Options, resolve_settings
from af_otel.processor.spancopy import copy_span, error_copy
from af_otel.semconv import Limits, Recorded, content_keys, environment_limits, record_of


class ForwardingProcessor(SpanProcessor):
    """A processor around ``inner`` that hands it every call as it is; subclasses change some."""

    def __init__(self, inner: SpanProcessor) -> None:
        self._inner = inner

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._inner.on_start(span, parent_context=parent_context)

    def _on_ending(self, span: Span) -> None:
        # The SDK's private hook before a span ends (not on `SpanProcessor` in every version).
        ending = getattr(self._inner, "_on_ending", None)
        if ending is not None:
            ending(span)

    def on_end(self, span: ReadableSpan) -> None:
        self._inner.on_end(span)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self._inner.force_flush(timeout_millis))


class ReceiptSpanProcessor(ForwardingProcessor):
    """Mint receipts at each LLM call's end and hand ``inner`` the enriched copy.

    ``content``: ``"auto"`` (default) follows the instrumentation: a call whose span carries its
    request content gets its commit payloads inline, any other call (completion hook with
    capture off, `llm_call`) gets them in the store, so af_otel never adds prompt text the
    instrumentation kept off the trace; ``"inline"`` puts each payload on its event up to
    ``inline_limit`` bytes and larger ones in the store; ``"store"`` puts every payload in the
    store (the trace holds hashes, sizes and addresses only); ``"none"`` records receipts and
    which keys changed, no content. ``strip_instrumentation_content=True`` drops the
    instrumentation's own content attributes from the exported copy. ``key`` makes receipts keyed
    HMACs. ``trusted_hosts``: gateways that pass requests to the provider unchanged.

    Every option left out comes from its ``AF_OTEL_*`` variable, else its default (the table in
    docs/processor.md); a bad argument raises ``ValueError``. With ``OTEL_SDK_DISABLED=true``
    every span passes through untouched.
    """

    def __init__(self, inner: SpanProcessor, **options: Unpack[Options]) -> None:
        super().__init__(inner)
        self._settings = resolve_settings(**options)
        self.engine = Engine(self._settings)
        # The resource of the spans this processor sees, for the run close records it writes.
        self._resource: Resource | None = None
        closing.register(self)

    def close_run(self, run_id: str) -> bool:
        """Hand ``inner`` the close record of ``run_id`` when this engine finished calls of it."""
        if self._settings.disabled:
            return False
        lane = self.engine.closing(run_id)
        if lane is None:
            return False
        place = self.engine.last_place(run_id)
        self._inner.on_end(closing.close_span(run_id, [lane], self._resource, place))
        return True

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if not self._settings.disabled:
            self._resource = span.resource
            with guard("ReceiptSpanProcessor.on_start"):
                context = span.get_span_context()
                self.engine.on_start(
                    (context.trace_id, context.span_id),
                    span.name,
                    span.attributes or {},
                    span.start_time or 0,
                    scope_name(span),
                    parent_key(span),
                )
        self._inner.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self._settings.disabled:
            self._inner.on_end(span)
            return
        out = span
        failure: Exception | None = None
        try:
            out = enrich_span(self.engine, span)
        except Exception as exc:
            failure = exc
            out = error_copy(span)
        self._inner.on_end(out)
        if failure is not None:
            settle("ReceiptSpanProcessor.on_end", failure)

    def shutdown(self) -> None:
        self.engine.close()
        super().shutdown()


def enrich_span(
    engine: Engine,
    span: ReadableSpan,
    *,
    run_unknown: bool = False,
    recorded: Recorded | None = None,
) -> ReadableSpan:
    """The span to forward: an enriched copy for an LLM call, the span itself otherwise.

    Shared by the processor and the exporter (which numbers a batch's calls before enriching
    them, and hands over the ``recorded`` attributes it read then; it fills in a run's close
    record itself, `ReceiptSpanExporter`). The span's attributes are read once (`record_of`):
    that one record says whether it is an LLM call and gives its request. Raises on internal
    failure; the caller guards."""
    context = span.context
    if context is None:
        return span
    key = (context.trace_id, context.span_id)
    attributes = span.attributes or {}
    strip = engine.settings.strip_instrumentation_content
    # Minted on the live span by the completion hook or `llm_call`: already complete, and read
    # only for what a strip drops.
    minted = names.RECEIPT_STATE in attributes
    if not minted or strip:
        recorded = recorded or record_of(attributes, span.name)
    enrichment = None
    drop: tuple[str, ...] = ()
    if minted:
        drop = content_keys(recorded.attributes) if recorded is not None else ()
    elif recorded is not None and recorded.llm_call:
        facts = facts_of(span, key, recorded, run_unknown=run_unknown)
        enrichment = engine.enrich(facts)
        drop = enrichment.content_keys if strip else ()
    if enrichment is None:
        engine.forget(key)
    parent = span.parent
    if parent is None or parent.is_remote:
        engine.release_trace(context.trace_id)
    if enrichment is not None:
        return copy_span(span, enrichment.attributes, enrichment.events, drop=drop)
    return copy_span(span, drop=drop) if drop else span


def facts_of(
    span: ReadableSpan,
    key: tuple[int, int],
    recorded: Recorded | None = None,
    *,
    run_unknown: bool = False,
) -> CallFacts:
    """The call's facts; its attributes are the ``recorded`` ones when the caller read them."""
    return CallFacts(
        key=key,
        name=span.name,
        start_time=span.start_time or 0,
        end_time=span.end_time or 0,
        attributes=recorded.attributes if recorded is not None else span.attributes or {},
        scope=scope_name(span),
        scope_version=scope_version(span),
        dropped=bool(span.dropped_attributes or span.dropped_events),
        run_unknown=run_unknown,
        limits=limits_of(span),
        parent=parent_key(span),
        recorded=recorded,
        seen_until=max((event.timestamp for event in span.events), default=0),
    )


def scope_name(span: ReadableSpan) -> str | None:
    scope = span.instrumentation_scope
    return scope.name if scope is not None else None


def scope_version(span: Any) -> str | None:
    """The version of the span's instrumentation scope, when it names one (af-2 binds it)."""
    version = getattr(getattr(span, "instrumentation_scope", None), "version", None)
    return version if isinstance(version, str) and version else None


def parent_key(span: ReadableSpan) -> tuple[int, int] | None:
    parent = span.parent
    return (parent.trace_id, parent.span_id) if parent is not None else None


def limits_of(span: Any) -> Limits:
    """The span limits a span's attributes were recorded under, as the span carries them: the
    SDK's span keeps its `SpanLimits`, and its bounded attributes know their own bounds; the
    environment's where the span says neither (a span built elsewhere)."""
    limits = getattr(span, "_limits", None)
    bounded = getattr(span, "_attributes", None)
    if limits is not None and hasattr(limits, "max_span_attribute_length"):
        count, length = limits.max_span_attributes, limits.max_span_attribute_length
    elif bounded is not None and hasattr(bounded, "max_value_len"):
        count, length = getattr(bounded, "maxlen", None), bounded.max_value_len
    else:
        default = environment_limits()
        count, length = default.max_attributes, default.max_value_length
    dropped = getattr(span, "dropped_attributes", 0)
    return Limits(
        max_attributes=count if isinstance(count, int) else None,
        max_value_length=length if isinstance(length, int) else None,
        dropped_attributes=dropped if isinstance(dropped, int) else 0,
    )
