"""Adapters: an ended span's attributes -> the normalized request, whatever convention wrote them.

The convention is picked by a table (the first that claims the span, the OTel GenAI conventions
otherwise), then adapted by that convention's own table. Both entry points are on the emit path:
they never raise. docs/instrumentations.md says what each instrumentation records and what can
and cannot be recovered from it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Final

from af_otel import names
from af_otel.semconv import genai, openinference, openllmetry
from af_otel.semconv.adapted import (
    NOTE_ADAPTER_ERROR,
    NOTE_MODEL_FROM_RESPONSE,
    NOTE_MODEL_NOT_CAPTURED,
    NOTE_OUTPUT_TYPE,
    NOTE_PARAMS_UNREADABLE,
    Adapted,
    Convention,
    content_keys,
)
from af_otel.semconv.coerce import text
from af_otel.semconv.ledger import Limits, cut_by

__all__ = [
    "NOTE_ADAPTER_ERROR",
    "NOTE_MODEL_FROM_RESPONSE",
    "NOTE_MODEL_NOT_CAPTURED",
    "NOTE_OUTPUT_TYPE",
    "NOTE_PARAMS_UNREADABLE",
    "Adapted",
    "Convention",
    "Limits",
    "adapt",
    "is_llm_call",
]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Reader:
    name: Convention
    claims: Callable[[Mapping[str, object], str], bool]
    adapt: Callable[[Mapping[str, object]], Adapted]


# Order matters. OpenInference first: with OPENINFERENCE_ENABLE_GENAI_SEMCONV its spans carry the
# gen_ai.* keys too, and its own keys are the record it always writes. OpenLLMetry <=0.54 before
# >=0.55 (which shares the GenAI content keys), and both before the GenAI default.
_READERS: Final = (
    _Reader("openinference", openinference.claims, openinference.adapt),
    _Reader(
        "openllmetry-legacy",
        lambda attrs, _: openllmetry.is_legacy(attrs),
        openllmetry.adapt_legacy,
    ),
    _Reader("openllmetry", openllmetry.claims, openllmetry.adapt),
    _Reader("genai", lambda attrs, _: True, genai.adapt),
)


def _snapshot(attributes: Mapping[str, object]) -> dict[str, object]:
    """One pass over the caller's mapping into a plain dict with exact ``str`` keys."""
    out: dict[str, object] = {}
    pairs = dict.items(attributes) if isinstance(attributes, dict) else attributes.items()
    for key, value in pairs:
        name = text(key)
        if name is not None:
            out[name] = value
    return out


def _reader(attributes: Mapping[str, object], span_name: str) -> _Reader:
    for reader in _READERS:
        if reader.claims(attributes, span_name):
            return reader
    return _READERS[-1]


def is_llm_call(attributes: Mapping[str, object], span_name: str = "") -> bool:
    """True for a span that records one LLM call (chat, completion, generate-content) in any
    convention; embeddings, tool, agent and workflow spans are not LLM calls. Never raises."""
    try:
        attrs = _snapshot(attributes)
        name = text(span_name) or ""
        return (
            genai.is_llm_call(attrs, name)
            or openinference.is_llm_call(attrs)
            or openllmetry.is_llm_call(attrs)
        )
    except Exception:
        _log.debug("af_otel: is_llm_call failed on a span's attributes", exc_info=True)
        return False


def adapt(
    attributes: Mapping[str, object], span_name: str = "", *, limits: Limits | None = None
) -> Adapted:
    """The span's request as its convention recorded it, or the reason there is none.

    ``limits`` are the span limits the attributes were recorded under: when they may have evicted
    or cut an attribute the request is read from, there is no request (``content-cut``) and
    ``cut`` names the limit. Never raises: an input no coercer foresaw yields
    ``content-unreadable`` with the note ``adapter-error`` (the fuzz tests prove no such input is
    known).
    """
    attrs: dict[str, object] = {}
    convention: Convention = "genai"
    try:
        attrs = _snapshot(attributes)
        reader = _reader(attrs, text(span_name) or "")
        convention = reader.name
        adapted = reader.adapt(attrs)
        # A value cut at the length limit often no longer parses: say it was cut, not unreadable.
        readable = adapted.request is not None or adapted.absent_reason == names.REASON_UNREADABLE
        cut = cut_by(attrs, limits) if limits is not None and readable else None
        if cut is not None:
            return replace(adapted, request=None, absent_reason=names.REASON_CUT, cut=cut)
        return adapted
    except Exception:
        _log.debug("af_otel: adapting a span's attributes failed", exc_info=True)
        try:
            keys = content_keys(attrs)
        except Exception:
            keys = ()
        return Adapted(convention, None, names.REASON_UNREADABLE, keys, (NOTE_ADAPTER_ERROR,))
