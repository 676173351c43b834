"""One pass over an ended span's attributes (`Recorded`), and the span's request as the family
that claims it recorded it (`adapt`), or the reason there is none.

The family is the first registered one that claims the span (`af_otel.semconv.conventions`
holds the order), the OTel GenAI conventions otherwise. Every entry point is on the emit path:
none raises.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace

from af_otel import names
from af_otel.semconv.adapted import NOTE_ADAPTER_ERROR, Adapted, content_keys
from af_otel.semconv.coerce import text
from af_otel.semconv.convention import Convention, tables
from af_otel.semconv.limits import Limits, cut_by

_log = logging.getLogger(__name__)


def _snapshot(attributes: Mapping[str, object]) -> dict[str, object]:
    """One pass over the caller's mapping into a plain dict with exact ``str`` keys."""
    out: dict[str, object] = {}
    pairs = dict.items(attributes) if isinstance(attributes, dict) else attributes.items()
    for key, value in pairs:
        name = text(key)
        if name is not None:
            out[name] = value
    return out


def _reader(attributes: Mapping[str, object], span_name: str) -> Convention:
    """The first registered family that claims the span (the last one asked claims any)."""
    claimers = tables().claimers
    return next((c for c in claimers if c.claims and c.claims(attributes, span_name)), claimers[-1])


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
        convention = "genai"
        try:
            if not self.readable:
                raise ValueError("the span's attributes could not be read")
            reader = _reader(attrs, self.span_name)
            convention = reader.name
            if reader.adapt is None:
                raise ValueError(f"{reader.name} claims spans but reads none")
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
    try:
        attrs = _snapshot(attributes)
    except Exception:
        _log.debug("af_otel: reading a span's attributes failed", exc_info=True)
        return Recorded({}, text(span_name) or "", False, readable=False)
    name = text(span_name) or ""  # `text` never raises
    try:
        found = tables()
        llm_call = any(tell(attrs, name) for tell in found.llm_calls) and not any(
            veto(attrs, name) for veto in found.vetoes
        )
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
