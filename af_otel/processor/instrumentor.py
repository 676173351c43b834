"""af_otel as an OpenTelemetry instrumentor (entry point ``af_otel`` in the
``opentelemetry_instrumentor`` group), for applications started under ``opentelemetry-instrument``:
it puts a `ReceiptSpanProcessor` in front of the span processors the configurator installed, and
with it the wire tap (docs/processor.md, Under opentelemetry-instrument).

The SDK has no public way to wrap the processors a provider already holds, so the provider's one
processor slot is replaced by an enriching processor around what was there; processors added
later go inside it, so they see the enriched spans too. A provider of another shape (not the
SDK's) is left as it is with a warning: the instrumentor never raises into the application.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from af_otel.processor.processor import ReceiptSpanProcessor

_log = logging.getLogger(__name__)
_SLOT = "_active_span_processor"  # the SDK TracerProvider's processor (a multi-processor)


class _Enriching(ReceiptSpanProcessor):
    """The processor in the provider's slot: enriches, then hands every span to what the slot
    held before; ``add_span_processor`` adds behind it (so later processors see enriched spans)."""

    def __init__(self, inner: Any, **options: Any) -> None:
        super().__init__(inner, **options)
        self.held = inner

    def add_span_processor(self, processor: SpanProcessor) -> None:
        self.held.add_span_processor(processor)


class AfOtelInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Install af_otel's processor (and the wire tap) on the global SDK tracer provider, or on
    the ``tracer_provider`` passed to `instrument`; other options are `ReceiptSpanProcessor`'s
    (``store=``, ``wire=``, ...; the ``AF_OTEL_*`` variables otherwise)."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()  # it instruments the SDK's own pipeline and whichever HTTP library is present

    def _instrument(self, **kwargs: Any) -> None:
        provider = kwargs.pop("tracer_provider", None) or trace.get_tracer_provider()
        options = kwargs
        held = getattr(provider, _SLOT, None)
        if not isinstance(provider, TracerProvider) or held is None:
            _log.warning(
                "af_otel: the tracer provider %s is not the OpenTelemetry SDK's; no receipts are "
                "added (add af_otel.ReceiptSpanProcessor to it yourself)",
                type(provider).__name__,
            )
            return
        if isinstance(held, _Enriching):
            return  # already installed
        try:
            setattr(provider, _SLOT, _Enriching(held, **options))
        except Exception:  # never into the application: without it, spans pass as they were
            _log.exception("af_otel: could not install the receipt processor")

    def _uninstrument(self, **kwargs: Any) -> None:
        provider = kwargs.get("tracer_provider") or trace.get_tracer_provider()
        found = getattr(provider, _SLOT, None)
        if isinstance(found, _Enriching):
            setattr(provider, _SLOT, found.held)
            found.engine.close()
