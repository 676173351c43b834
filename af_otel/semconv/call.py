"""One LLM call as semconv reads it (`read_call`): the request its record holds, read once, and
everything the record says about it that a receipt needs, so the processor asks semconv once.

On the emit path: never raises (`Call.absent_reason` says why there is no request).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from af_otel import names
from af_otel.model import FrozenDict, Request
from af_otel.model.fields import Shown
from af_otel.semconv import incremental, ledger, responses
from af_otel.semconv.convention import model_named
from af_otel.semconv.incremental import Remembered, parse_request
from af_otel.semconv.limits import Limits, environment_limits
from af_otel.semconv.record import Recorded, record_of


@dataclass(frozen=True, slots=True)
class Call:
    """One LLM call's request as its record holds it (None: ``absent_reason`` says why), and what
    the record shows about it."""

    request: Request | None
    absent_reason: str | None
    # The family that read the record; None when the request was handed over whole (the
    # explicit API), so no field of it is unrecorded.
    convention: str | None = None
    content_keys: tuple[str, ...] = ()  # the record's content attributes (what a strip drops)
    unrecorded: tuple[str, ...] = ()  # fields its instrumentation does not record (the ledger)
    held: str | None = None  # the server-held history it continues (`responses.held_history`)
    provider: object = None  # the provider the record names, even when the request did not parse
    # With ``content-cut``: the limit that may have cut the record, and the limits in force.
    cut: str | None = None
    limits: Limits | None = None
    # What the run remembers of this call for reading only the next call's new end, and the
    # passes over the messages already made (None: not made).
    seen: Remembered | None = None
    shown: Shown | None = None
    sealed: bool | None = None
    scan: responses.Scan | None = None
    prefix: tuple[FrozenDict, ...] | None = None
    named_model: str | None = None  # the model the record's attributes name (`model_named`)
    # False: read with ``held=False``, the server-held history not looked for yet, nor the
    # ledger's fields (`with_held`), which then needs the record's scope and adapter notes.
    held_read: bool = True
    scope: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def model(self) -> str | None:
        """The call's model: the request's, else the one its record names."""
        if self.request is not None and self.request.model:
            return self.request.model
        return self.named_model


def read_call(
    span: Recorded | Mapping[str, object],
    span_name: str = "",
    *,
    scope: str | None = None,
    limits: Limits | None = None,
    seen: Remembered | None = None,
    remember: bool = True,
    held: bool = True,
) -> Call:
    """The call a span's record holds: ``span`` read once (`record_of`, or the caller's record),
    the family that claims it, the request it adapts to, cut by ``limits`` (the environment's when
    None), reading only what follows ``seen`` (the run's last call) when that is proven safe
    (`af_otel.semconv.incremental`), and what its instrumentation (``scope``) does not record.
    ``remember=False``: no memory for a next call is made (`Call.seen` is None). ``held=False``:
    the caller mints from the body the wire sent when there is one, so what only a record-minted
    call uses is not made: the server-held history is not looked for (the body's reader tells
    it) and the fields the record leaves off are not listed (`ledger.unrecorded` and
    `responses.unrecorded`: a body holds every field); `with_held` makes both when the call falls back to its record."""
    recorded = span if isinstance(span, Recorded) else record_of(span, span_name)
    limits = limits if limits is not None else environment_limits()
    if remember:
        read = incremental.read(recorded, limits, seen)
    else:
        read = incremental.full(recorded, limits, remember=False)
    adapted = read.adapted
    request, reason = read.request, adapted.absent_reason
    if request is None and adapted.request is not None:
        request = parse_request(adapted.request)
        reason = None if request is not None else names.REASON_UNREADABLE
    unrecorded: tuple[str, ...] = ()
    if request is not None and held:  # else a body holds every field: `with_held` on fallback
        unrecorded = ledger.unrecorded(
            request, scope, adapted.convention, adapted.notes, read.shown
        )
        unrecorded = responses.with_responses(
            unrecorded, request, adapted.convention, recorded.attributes, recorded.span_name
        )
    return Call(
        request,
        reason,
        adapted.convention,
        adapted.content_keys,
        unrecorded,
        responses.held_history(recorded.attributes, request, recorded.span_name, read.scan)
        if held
        else None,
        adapted.request.get("provider") if adapted.request else None,
        adapted.cut,
        limits,
        read.seen,
        read.shown,
        read.sealed,
        read.scan,
        read.prefix,
        model_named(recorded.attributes),
        held,
        scope,
        tuple(adapted.notes),
    )


def with_held(call: Call, span: Recorded | Mapping[str, object], span_name: str = "") -> Call:
    """A call read with ``held=False`` (`read_call`), with the server-held history its record
    ``span`` shows (`responses.held_history`, over the scan made while reading it) and the
    fields its record leaves off (the ledger's, `ledger.unrecorded`, and the Responses ones,
    `responses.with_responses`): it is minted from its record after all."""
    recorded = span if isinstance(span, Recorded) else record_of(span, span_name)
    found = responses.held_history(recorded.attributes, call.request, recorded.span_name, call.scan)
    unrecorded = call.unrecorded
    if call.request is not None and call.convention is not None:
        unrecorded = ledger.unrecorded(
            call.request, call.scope, call.convention, call.notes, call.shown
        )
        unrecorded = responses.with_responses(
            unrecorded, call.request, call.convention, recorded.attributes, recorded.span_name
        )
    return replace(call, held=found, held_read=True, unrecorded=unrecorded)


def handed_call(
    request: Mapping[str, Any] | Request | None,
    attributes: Mapping[str, object],
    span_name: str = "",
    *,
    sealed: bool | None = None,
    scan: responses.Scan | None = None,
    prefix: tuple[FrozenDict, ...] | None = None,
) -> Call:
    """A call whose request was handed over whole (the explicit API): every field it holds is on
    record; its span's ``attributes`` still say which server-held history it continues.
    ``sealed``, ``scan`` and ``prefix``: the passes the caller already made over its messages
    (the explicit API's memo reads only the new ones), None where not made."""
    parsed = parse_request(request)
    reason = names.REASON_UNREADABLE if request is not None and parsed is None else None
    held = responses.held_history(attributes, parsed, span_name, scan)
    return Call(
        parsed,
        reason,
        held=held,
        sealed=sealed,
        scan=scan,
        prefix=prefix,
        named_model=model_named(attributes),
    )
