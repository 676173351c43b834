"""The util-genai completion hook: receipts on OTel genai-* spans with content capture off.

util-genai calls a `CompletionHook` just before ``span.end()`` with the structured request (even
when no content goes on the span) while the span is still writable. The hook serializes that
request exactly as util-genai would write it on the span with content capture on, reads it through
the same adapter the processor uses (so both paths mint the same receipt for the same request), and
writes the evidence onto the live span. A processor or exporter that sees ``af.receipt.state``
already present passes the span through; the engine the hook uses is the one that numbered the
span at its start, so both agree on epochs and the commit sequence.

Privacy: the request the hook reads is content the instrumentation was told to keep off the span
(capture off). With the default ``content=auto`` the hook's commits then go to the store and the
span gets hashes, sizes and addresses only; inline only when the span already carries the same
content (capture on). Its settings are those of the engine it uses (the processor's or exporter's,
else the environment's: docs/processor.md lists them).

util-genai loads one hook, by the one name in ``OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK``. So
af_otel's calls another after minting, with the same arguments: the one ``AF_OTEL_CHAIN_HOOK``
names (any name of the ``opentelemetry_genai_completion_hook`` entry-point group; ``none`` for
none), else util-genai's ``upload`` hook whenever its ``OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH``
is set, as that variable asks for uploads.

Setup without code: ``OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=af_otel``; or in code,
``OpenAIInstrumentor().instrument(completion_hook=af_otel.completion_hook)``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from importlib.metadata import entry_points
from typing import Any, Final

from af_otel import forksafe, names
from af_otel.model.gap_kinds import in_order
from af_otel.processor import export_gaps
from af_otel.processor.engine import engine_for
from af_otel.processor.facts import CallFacts, Enrichment, Supplied, error_enrichment
from af_otel.processor.guard import guard, settle
from af_otel.processor.processor import scope_version
from af_otel.processor.settings import ENV_CHAIN_HOOK, sdk_disabled
from af_otel.semconv import Limits, completion_attributes, read_call, record_of

GROUP: Final = "opentelemetry_genai_completion_hook"
ENTRY_POINT: Final = "af_otel"
# util-genai's upload hook: its entry point, and the variable that says where it uploads.
UPLOAD_HOOK: Final = "upload"
ENV_UPLOAD_BASE: Final = "OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH"
NO_CHAIN: Final = "none"

_logger = logging.getLogger("af_otel")


class ReceiptCompletionHook:
    """A util-genai ``CompletionHook`` that mints the call's receipt on its live span."""

    def __init__(self, chain: Any | None = None, *, chain_from_env: bool = True) -> None:
        self._chain = chain
        self._chain_from_env = chain_from_env and chain is None
        self._chain_lock = forksafe.lock(self)

    def on_completion(
        self,
        *,
        inputs: Sequence[Any],
        outputs: Sequence[Any],
        system_instruction: Sequence[Any],
        tool_definitions: Sequence[Any] | None = None,
        span: Any | None = None,
        log_record: Any | None = None,
    ) -> None:
        if span is not None and not sdk_disabled():
            try:
                mint_on_span(span, inputs, system_instruction, tool_definitions)
            except Exception as exc:
                # The span says af_otel failed on it, as the processor's copy would.
                with guard("completion_hook.error"):
                    write_on_span(span, error_enrichment())
                settle("completion_hook", exc)
        chain = self._chained()
        if chain is not None:
            with guard("completion_hook.chain"):
                chain.on_completion(
                    inputs=inputs,
                    outputs=outputs,
                    system_instruction=system_instruction,
                    tool_definitions=tool_definitions,
                    span=span,
                    log_record=log_record,
                )

    def _chained(self) -> Any | None:
        if self._chain_from_env:
            with self._chain_lock:
                if self._chain_from_env:
                    self._chain = _load_chain(chain_name(os.environ))
                    self._chain_from_env = False
        return self._chain

    def shutdown(self, *, timeout_sec: float = 10.0) -> None:
        """Shut the chained hook down (the upload hook then finishes its queued uploads, up to
        ``timeout_sec``); af_otel's own part holds nothing to flush. Never raises."""
        chain = self._chain
        shutdown = getattr(chain, "shutdown", None)
        if callable(shutdown):
            with guard("completion_hook.shutdown"):
                shutdown(timeout_sec=timeout_sec)


def chain_name(environ: Mapping[str, str]) -> str | None:
    """The hook to call after af_otel's: the one ``AF_OTEL_CHAIN_HOOK`` names (``none``: none),
    else util-genai's upload hook when its base path is set, else none."""
    named = environ.get(ENV_CHAIN_HOOK, "").strip()
    if named:
        return None if named in (NO_CHAIN, ENTRY_POINT) else named
    return UPLOAD_HOOK if environ.get(ENV_UPLOAD_BASE, "").strip() else None


def load_completion_hook() -> ReceiptCompletionHook:
    """The entry point util-genai's loader calls (``OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=af_otel``)."""
    return ReceiptCompletionHook()


completion_hook: Final = ReceiptCompletionHook()
"""The hook to pass as ``instrument(completion_hook=af_otel.completion_hook)``."""


def _load_chain(name: str | None) -> Any | None:
    if name is None:
        return None
    for entry in entry_points(group=GROUP, name=name):
        try:
            return entry.load()()
        except Exception as exc:
            _logger.warning(
                "af_otel: completion hook %r failed to load (%s); not chained", name, exc
            )
            return None
    _logger.warning("af_otel: %s names no completion hook (%s); not chained", name, ENV_CHAIN_HOOK)
    return None


def mint_on_span(
    span: Any,
    inputs: Sequence[Any],
    system_instruction: Sequence[Any],
    tool_definitions: Sequence[Any] | None,
) -> None:
    """Mint the receipt of the call util-genai is completing and write it onto its live span."""
    if not span.is_recording():
        return
    attributes: Mapping[str, Any] = dict(getattr(span, "attributes", None) or {})
    if names.RECEIPT_STATE in attributes:
        return
    scope = getattr(getattr(span, "instrumentation_scope", None), "name", None)
    facts = live_facts(span, attributes, scope, dropped=_dropped(span) > 0)
    engine = engine_for(facts.key)
    content = completion_attributes(inputs, system_instruction, tool_definitions)
    recorded = record_of({**attributes, **content}, facts.name)  # content never decides a call
    if not recorded.llm_call:
        return
    # The content was handed over as objects: no span limit cut it (`Limits()` holds none).
    call = read_call(recorded, scope=scope, limits=Limits(), remember=False)
    supplied = Supplied(
        direct=export_gaps.captured_at_sdk(
            scope, attributes, call.provider, engine.settings.trusted_hosts
        ),
        # Capture on: util-genai wrote these same attributes before calling the hook.
        on_span=bool(content) and all(key in attributes for key in content),
        call=replace(call, content_keys=()),
    )
    write_on_span(span, engine.enrich_handed(facts, supplied))


def live_facts(
    span: Any, attributes: Mapping[str, Any], scope: str | None, *, dropped: bool = False
) -> CallFacts:
    """The facts of a live span whose call ends now: the hook and `llm_call` mint before the
    span ends, so its end time is not set yet."""
    context = span.get_span_context()
    return CallFacts(
        key=(context.trace_id, context.span_id),
        name=str(getattr(span, "name", "")),
        start_time=int(getattr(span, "start_time", None) or 0),
        end_time=time.time_ns(),
        attributes=attributes,
        scope=scope,
        scope_version=scope_version(span),
        dropped=dropped,
    )


def _dropped(span: Any) -> int:
    return int(getattr(span, "dropped_attributes", 0) or 0) + int(
        getattr(span, "dropped_events", 0) or 0
    )


def write_on_span(span: Any, enrichment: Enrichment) -> None:
    """Write an enrichment onto a live span.

    The gap attributes go first so that, on a span at its attribute limit, the SDK evicts the
    instrumentation's oldest keys rather than af_otel's; if writing evicted anything, ``af.gaps``
    is rewritten with ``span-limits`` (rewriting a key evicts nothing), except under an af-2
    receipt, whose digest binds ``af.gaps`` as sealed."""
    before = _dropped(span)
    attributes = enrichment.attributes
    found = list(attributes.get(names.GAPS, ()))
    span.set_attribute(names.GAPS, found)
    span.set_attribute(names.GAP_NO_RECEIPT_ON_CHART, attributes[names.GAP_NO_RECEIPT_ON_CHART])
    span.set_attributes(
        {
            key: value
            for key, value in attributes.items()
            if key not in (names.GAPS, names.GAP_NO_RECEIPT_ON_CHART)
        }
    )
    for event_name, event_attributes in enrichment.events:
        span.add_event(event_name, event_attributes)
    # An af-2 digest binds af.gaps as sealed: rewriting them would make the call read damaged.
    # There the reader names the cut from the span's own dropped count (docs/reader.md).
    sealed = attributes.get(names.RECEIPT_SCHEME) in (names.SCHEME_2, names.SCHEME_2_HMAC)
    if _dropped(span) > before and names.GAP_SPAN_LIMITS not in found and not sealed:
        found = in_order({*found, names.GAP_SPAN_LIMITS})
        span.set_attribute(names.GAPS, found)
