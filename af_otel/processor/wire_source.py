"""The processor's side of the wire tap (af_otel/wire/): switch it on for an engine, hand it the
current span, and turn what it saw under a finished call's span into the request that call's
receipt is minted from (docs/processor.md, the wire tap).

A call is taken from the wire when the tap saw a body under its span that the endpoint's reader
could read. Retries that resend the same bytes are one request; retries under the current span
whose bodies differ are minted from the last attempt (the one the client's answer came from) and
named `wire-attempts-differ`, since the model may have been served an earlier one. A body that
cannot be read, or different bodies paired by where the span started (whose is which is then
unknown), leave the call to the instrumentation's record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

from af_otel.model import Request
from af_otel.model.request import INSTRUCTION_ROLES
from af_otel.processor import commits
from af_otel.processor.export_gaps import PROVIDER_HOSTS
from af_otel.processor.settings import Settings
from af_otel.semconv import is_llm_call
from af_otel.wire import SENT, read_body
from af_otel.wire import install as install_tap
from af_otel.wire import release as release_tap
from af_otel.wire.hosts import provider_host
from af_otel.wire.tap import VIA_CURRENT, VIA_STARTED, Owner

# The span started last in this context (thread, task), set by the engine at every span start:
# a callback-based instrumentation starts its LLM span in the context that then sends the request,
# but never makes it current. Set, never reset: a later start in the same context overrides it,
# and a span that already ended takes nothing (`take` holds a body to its span's window).
_started: ContextVar[tuple[int, int] | None] = ContextVar("af_otel_started", default=None)


def started(key: tuple[int, int]) -> None:
    """Note ``key`` as the span started last in this context."""
    _started.set(key)


def owner() -> tuple[int, int] | Owner | None:
    """The span a request sent now belongs to (docs/processor.md, Pairing): the current span
    when it is an LLM call or was the last started here (instrumentations of provider SDKs make
    their LLM span current); else the span started last in this context, when it is of the same
    trace as the current span or none is current (a callback-based framework's LLM span)."""
    span = trace.get_current_span()
    context = span.get_span_context()
    current = None
    if context.is_valid and context.trace_flags.sampled:
        current = (context.trace_id, context.span_id)
    hint = _started.get()
    if hint is None or hint == current:
        return current
    if current is not None and (hint[0] != current[0] or _is_llm(span)):
        return current
    return Owner(hint, VIA_STARTED)


def _is_llm(span: Any) -> bool:
    attributes = getattr(span, "attributes", None)
    # A span known only by its context (a remote parent attached by a worker) has neither.
    name = getattr(span, "name", "")
    return is_llm_call(attributes if isinstance(attributes, Mapping) else {}, str(name))


def activate(settings: Settings) -> bool:
    """Switch the tap on for one engine when its settings want it; whether they did."""
    if not settings.wire or settings.disabled:
        return False
    install_tap(owner)
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
    attempts: int = 1  # HTTP attempts sent under the call (retries)
    differ: bool = False  # their bodies differ: the request is the last's (wire-attempts-differ)


def take(
    settings: Settings,
    key: tuple[int, int],
    window: tuple[int, int] | None = None,
    model: str | None = None,
) -> FromWire | None:
    """The request sent under ``key`` (module rule), or None; the tap forgets it either way.

    A body filed under the call because its span was the one started last where it was sent
    (not current) counts only when sent within the span's ``window`` (start, end), and only
    when the ``model`` the instrumentation recorded, where it did, is the body's (`same_model`)."""
    sent = SENT.take(key)
    if window is not None:
        start, end = window
        sent = tuple(s for s in sent if s.via == VIA_CURRENT or start <= s.at <= end)
    if not sent:
        return None
    last = sent[-1]
    paired = all(attempt.via == VIA_CURRENT for attempt in sent)
    differ = any(a.body != last.body or a.endpoint != last.endpoint for a in sent)
    if differ and not paired:
        return None  # two bodies sent where the call's span started: whose is which is unknown
    found = read_body(last.endpoint, last.body, last.path)
    if found is None:
        return None
    try:
        request = Request.from_dict(found.request)
    except Exception:  # a body the normalizer refuses is not read from the wire
        return None
    if not paired and model is not None and not same_model(model, request.model):
        return None  # another call's body: its span was not the one that sent it
    host = last.host.lower()
    direct = host in PROVIDER_HOSTS.get(request.provider or "", frozenset()) or (
        host in settings.trusted_hosts or provider_host(request.provider, host)
    )
    return FromWire(request, found.unread, direct, found.held, len(sent), differ)


def same_model(recorded: str, sent: str | None) -> bool:
    """Whether a recorded model names the model a body asks for: the same name, or a dated
    snapshot of it (``gpt-4o-mini-2024-07-18`` for ``gpt-4o-mini``), which some instrumentations
    record from the response."""
    if recorded == sent:
        return True
    if sent is None:
        return False
    rest = recorded.removeprefix(sent + "-")
    return rest != recorded and rest[:1].isdigit()


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


def record_differs(recorded: Request | None, sent: Request) -> tuple[str, ...]:
    """The fields on which the instrumentation's record of a call (when it made one) says
    otherwise than the body the client sent: ``model``, ``instructions`` (system and developer
    text wherever it stands), ``messages`` (the other turns), ``tools``, and each
    ``params.<dial>`` the record holds. Saying otherwise is a value the body does not hold (a cut
    text, a tool echoed from the response, a dropped part or message); leaving a key out (a
    tool's ``strict``, a result's error flag) is not, the ledger names those as unrecorded."""
    if recorded is None:
        return ()
    found: list[str] = []
    if recorded.model is not None and recorded.model != sent.model:
        found.append("model")
    mine, theirs = _split(recorded), _split(sent)
    if mine[0] and not _all_within(mine[0], theirs[0]):
        found.append("instructions")
    if recorded.messages and not _all_within(mine[1], theirs[1], _message_within):
        found.append("messages")
    if recorded.tools and not _all_within(recorded.tools, sent.tools):
        found.append("tools")
    found += [
        f"params.{key}"
        for key, value in recorded.params.items()
        if key not in sent.params or sent.params[key] != value
    ]
    return tuple(found)


def _within(record: Mapping[str, Any], sent: Mapping[str, Any]) -> bool:
    """Every key the record holds, the body holds with the same value."""
    return all(key in sent and sent[key] == value for key, value in record.items())


def _message_within(record: Mapping[str, Any], sent: Mapping[str, Any]) -> bool:
    return (
        record.get("role") == sent.get("role")
        and ("name" not in record or record["name"] == sent.get("name"))
        and _all_within(record.get("parts", ()), sent.get("parts", ()))
    )


def _all_within(
    record: Sequence[Any],
    sent: Sequence[Any],
    within: Callable[[Mapping[str, Any], Mapping[str, Any]], bool] = _within,
) -> bool:
    return len(record) == len(sent) and all(map(within, record, sent))


def _split(request: Request) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The instruction parts (system, then system and developer messages in order) and the other
    messages: where a convention places the instructions is not a difference."""
    instructions = list(request.system)
    turns = []
    for message in request.messages:
        if message.get("role") in INSTRUCTION_ROLES:
            instructions += message.get("parts", ())
        else:
            turns.append(message)
    return tuple(instructions), tuple(turns)
