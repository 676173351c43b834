"""`ReceiptSpanExporter`: the same enrichment as the processor, done on the export thread.

Wrap the exporter instead of the processor (``BatchSpanProcessor(ReceiptSpanExporter(otlp))``)
and the minting leaves the application's thread. What the exporter cannot know, it says:

* It sees no ``on_start``, so it numbers each batch's LLM calls by their start time. A call that
  started before one already numbered in an earlier batch (overlapping calls split across
  batches) is numbered after it, and its span carries ``no-run-log``: the epoch order is not the
  start order there.
* It runs on another thread, so it sees no `af_otel.run` context: a run reaches it only through
  an ``af.run.id`` attribute (`llm_call` writes one; the hook writes one on every call it mints),
  otherwise the run is the trace.

A failure enriching one span exports that span unenriched with ``af.receipt.state=error``; the
batch always reaches ``inner`` whole and ``inner``'s result is returned as it is.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from af_otel import names
from af_otel.processor.engine import Engine
from af_otel.processor.guard import guard, report, strict
from af_otel.processor.processor import enrich_span, error_copy, facts_of
from af_otel.processor.settings import resolve_settings
from af_otel.store import Store


class ReceiptSpanExporter(SpanExporter):
    """Enrich each batch exactly as `ReceiptSpanProcessor` enriches each span; thread-safe."""

    def __init__(
        self,
        inner: SpanExporter,
        *,
        store: Store | str | os.PathLike[str] | None = None,
        content: str = "inline",
        strip_instrumentation_content: bool = False,
        inline_limit: int = names.DEFAULT_INLINE_LIMIT,
        key: bytes | str | None = None,
    ) -> None:
        self._inner = inner
        self._settings = resolve_settings(
            store=store,
            content=content,
            strip_instrumentation_content=strip_instrumentation_content,
            inline_limit=inline_limit,
            key=key,
        )
        # Exports arrive after the `af_otel.run` block that made them may have exited: such a
        # block must not free this engine's run state, only idle expiry and root spans do.
        self.engine = Engine(self._settings, deferred=True)
        # SimpleSpanProcessor exports from every application thread at once; one batch at a time
        # keeps a batch's numbering and commit sequence together.
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._settings.disabled:
            return self._inner.export(spans)
        failures: list[Exception] = []
        with self._lock:
            out = self._enrich(spans, failures)
        result = self._inner.export(out)
        if failures:
            if strict():
                raise failures[0]
            report("ReceiptSpanExporter.export", failures[0])
        return result

    def _enrich(
        self, spans: Sequence[ReadableSpan], failures: list[Exception]
    ) -> list[ReadableSpan]:
        calls = []
        with guard("ReceiptSpanExporter.number"):
            for span in spans:
                context = span.context
                attributes = span.attributes or {}
                if (
                    context is not None
                    and names.RECEIPT_STATE not in attributes
                    and self.engine.is_llm_call(span.name, attributes)
                ):
                    calls.append(facts_of(span, (context.trace_id, context.span_id), attributes))
            calls.sort(key=lambda facts: facts.start_time)
            for facts in calls:
                self.engine.number(facts)
        out: list[ReadableSpan] = []
        for span in spans:
            try:
                out.append(enrich_span(self.engine, span))
            except Exception as exc:
                failures.append(exc)
                out.append(error_copy(span))
        return out

    def shutdown(self) -> None:
        self.engine.close()
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self._inner.force_flush(timeout_millis))
