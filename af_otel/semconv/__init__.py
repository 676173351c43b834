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
from af_otel.semconv import (
    genai,
    google_genai,
    litellm,
    llama_index,
    openai_agents,
    openinference,
    openllmetry,
    pydantic_ai,
)
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
    "Recorded",
    "adapt",
    "content_keys",
    "is_llm_call",
    "record_of",
]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Reader:
    name: Convention
    claims: Callable[[Mapping[str, object], str], bool]
    adapt: Callable[[Mapping[str, object]], Adapted]


# Order matters. OpenInference first: with OPENINFERENCE_ENABLE_GENAI_SEMCONV its spans carry the
# gen_ai.* keys too, and its own keys are the record it always writes. OpenLLMetry <=0.54 before
# >=0.55 (which shares the GenAI content keys), and both before the GenAI default. LlamaIndex's
# OpenInference spans, those built from a response's echo and LiteLLM's, before OpenInference's; LiteLLM's callback before OpenLLMetry, whose
# `llm.request.type` and `llm.request.functions.*` it also writes.
_READERS: Final = (
    _Reader("openinference", llama_index.claims, llama_index.adapt),
    _Reader("openinference", openai_agents.claims, openai_agents.adapt),
    _Reader("openinference", litellm.claims_openinference, litellm.adapt_openinference),
    _Reader("openinference", openinference.claims, openinference.adapt),
    _Reader("litellm", litellm.claims, litellm.adapt),
    _Reader(
        "openllmetry-legacy",
        lambda attrs, _: openllmetry.is_legacy(attrs),
        openllmetry.adapt_legacy,
    ),
    _Reader("openllmetry", openllmetry.claims, openllmetry.adapt),
    _Reader("google-genai", google_genai.claims, google_genai.adapt),
    _Reader("genai", pydantic_ai.claims, pydantic_ai.adapt),
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
    return next((r for r in _READERS if r.claims(attributes, span_name)), _READERS[-1])


@dataclass(frozen=True, slots=True)
class Recorded:
    """One pass over an ended span's attributes: them as a plain dict with exact ``str`` keys, and
    whether the span records an LLM call. `adapt` reads the request from it, so a caller that
    decides on ``llm_call`` first reads the attributes once."""

    attributes: dict[str, object]
    span_name: str
    llm_call: bool
    readable: bool = True  # False: the caller's mapping could not be read (nor its request)

    def with_content(self, key: str, value: object) -> Recorded:
        """The record with the value of its content attribute ``key`` replaced. Whether the span
        is an LLM call reads no content value (only the identity keys' values), so it stands."""
        if key not in self.attributes or not content_keys((key,)):
            raise ValueError(f"{key!r} is not a content attribute of this record")
        attributes = dict(self.attributes)
        attributes[key] = value
        return Recorded(attributes, self.span_name, self.llm_call, self.readable)

    def adapt(self, *, limits: Limits | None = None) -> Adapted:
        """See `adapt`."""
        attrs = self.attributes
        convention: Convention = "genai"
        try:
            if not self.readable:
                raise ValueError("the span's attributes could not be read")
            reader = _reader(attrs, self.span_name)
            convention = reader.name
            adapted = reader.adapt(attrs)
            # A value cut at the length limit often no longer parses: say it was cut, not
            # unreadable.
            readable = (
                adapted.request is not None or adapted.absent_reason == names.REASON_UNREADABLE
            )
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


def record_of(attributes: Mapping[str, object], span_name: str = "") -> Recorded:
    """The span's attributes read once (`Recorded`). Never raises."""
    name = ""
    try:
        name = text(span_name) or ""
        attrs = _snapshot(attributes)
    except Exception:
        _log.debug("af_otel: reading a span's attributes failed", exc_info=True)
        return Recorded({}, name, False, readable=False)
    try:
        llm_call = (
            genai.is_llm_call(attrs, name)
            or openinference.is_llm_call(attrs)
            or openllmetry.is_llm_call(attrs)
        ) and not llama_index.prepares_only(attrs, name)
    except Exception:
        _log.debug("af_otel: is_llm_call failed on a span's attributes", exc_info=True)
        llm_call = False
    return Recorded(attrs, name, llm_call)


def is_llm_call(attributes: Mapping[str, object], span_name: str = "") -> bool:
    """True for a span that records one LLM call (chat, completion, generate-content) in any
    convention; embeddings, tool, agent and workflow spans are not LLM calls. Never raises."""
    return record_of(attributes, span_name).llm_call


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
    return record_of(attributes, span_name).adapt(limits=limits)
