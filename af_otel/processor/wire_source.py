"""The processor's side of the wire tap (af_otel/wire/): switch it on for an engine, hand it the
current span, and turn what it saw under a finished call's span into the request that call's
receipt is minted from (docs/processor.md, the wire tap).

A call is taken from the wire when the tap saw exactly one distinct body under its span (retries
that resend the same bytes are one request) and the endpoint's reader could read it. Several
different bodies under one span, or one it cannot read, leave the call to the instrumentation's
record: what is minted must be the one request the model was served.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from opentelemetry import trace

from af_otel import names
from af_otel.model import Request
from af_otel.processor import commits
from af_otel.processor.export_gaps import PROVIDER_HOSTS
from af_otel.processor.settings import Settings
from af_otel.wire import SENT, read_body
from af_otel.wire import install as install_tap
from af_otel.wire import release as release_tap

SOURCE_WIRE: Final = names.SOURCE_WIRE
SOURCE_INSTRUMENTATION: Final = names.SOURCE_INSTRUMENTATION


def current_key() -> tuple[int, int] | None:
    """The sampled span current in this context, as (trace id, span id): the one a request sent
    now belongs to (instrumentations of provider SDKs make their LLM span current)."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid or not context.trace_flags.sampled:
        return None
    return (context.trace_id, context.span_id)


def activate(settings: Settings) -> bool:
    """Switch the tap on for one engine when its settings want it; whether they did."""
    if not settings.wire or settings.disabled:
        return False
    install_tap(current_key)
    return True


def deactivate() -> None:
    release_tap()


@dataclass(frozen=True, slots=True)
class FromWire:
    """A finished call's request as its client sent it."""

    request: Request
    unread: tuple[str, ...]  # body keys the reader could not place (af.receipt.unrecorded)
    direct: bool  # sent to the provider's own host (or a trusted one): no cache-transform
    held: str | None = None  # the server-held state the body continues (af.held_history)


def take(settings: Settings, key: tuple[int, int]) -> FromWire | None:
    """The request sent under ``key`` (module rule), or None; the tap forgets it either way."""
    sent = SENT.take(key)
    if not sent or not settings.wire:
        return None
    last = sent[-1]
    if any(attempt.body != last.body or attempt.endpoint != last.endpoint for attempt in sent):
        return None
    found = read_body(last.endpoint, last.body)
    if found is None:
        return None
    try:
        request = Request.from_dict(found.request)
    except Exception:  # a body the normalizer refuses is not read from the wire
        return None
    host = last.host.lower()
    direct = host in PROVIDER_HOSTS.get(request.provider or "", frozenset()) or (
        host in settings.trusted_hosts
    )
    return FromWire(request, found.unread, direct, found.held)


def inline_only_recorded(recorded: Request | None) -> Callable[[commits.Change], bool]:
    """Whether a commit of a wire request may go on the span: only when the instrumentation's
    own record holds that very value, so the tap adds to the trace nothing the instrumentation
    kept off it (anything else goes to the store). Costs the commit's own size."""
    state = recorded.set_fields() if recorded is not None else {}

    def inline(change: commits.Change) -> bool:
        if change.verb == "delete":
            return True
        held = state.get(change.key)
        if held is None:
            return False
        if change.verb == "append":
            payload = change.payload
            return len(payload) <= len(held) and tuple(held[len(held) - len(payload) :]) == tuple(
                payload
            )
        value = change.payload
        if isinstance(value, list | tuple) and isinstance(held, list | tuple):
            return tuple(value) == tuple(held)
        return bool(value == held)

    return inline
