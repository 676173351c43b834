"""The processor's side of the wire tap (af_otel/wire/): switch it on for an engine, hand it the
current span, and turn what it saw under a finished call's span into the request that call's
receipt is minted from (docs/processor.md, the wire tap).

A call is taken from the wire when the tap saw a body under its span that the endpoint's reader
could read (only its tail, when it extends one of the run's last bodies: `af_otel.wire.tail`).
Retries that resend the same bytes are one request; retries under the current span whose bodies
differ are minted from the last attempt (the one the client's answer came from) and named
`wire-attempts-differ`, since the model may have been served an earlier one. A body that cannot
be read, or different bodies paired by where the span started (whose is which is then unknown),
leave the call to the instrumentation's record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry import trace

from af_otel.model import Request
from af_otel.model.request import INSTRUCTION_ROLES
from af_otel.processor import commits
from af_otel.processor.export_gaps import PROVIDER_HOSTS
from af_otel.processor.settings import Settings
from af_otel.semconv import is_llm_call
from af_otel.wire import SENT
from af_otel.wire import install as install_tap
from af_otel.wire import release as release_tap
from af_otel.wire.hosts import provider_host
from af_otel.wire.tail import Layout, read_sent
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
    sealed: bool = False  # a message replays sealed reasoning (the thinking-replay gap)
    # The tuple ``request.messages`` was built to start with (the run's earlier body's messages,
    # `af_otel.wire.tail`), so that prefix needs no comparing again; None when read whole.
    prefix: tuple[Any, ...] | None = None


class Layouts(Protocol):
    """Where a run keeps the layouts of its last bodies (`RunState.layouts`)."""

    layouts: tuple[Layout, ...]


def take(
    settings: Settings,
    key: tuple[int, int],
    window: tuple[int, int] | None = None,
    model: str | None = None,
    run: Layouts | None = None,
) -> FromWire | None:
    """The request sent under ``key`` (module rule), or None; the tap forgets it either way.

    A body filed under the call because its span was the one started last where it was sent
    (not current) counts only when sent within the span's ``window`` (start, end), and only
    when the ``model`` the instrumentation recorded, where it did, is the body's (`same_model`).
    ``run``: the call's run, whose layouts let a body that extends an earlier one be read from
    its tail (`af_otel.wire.tail`), and which keeps this body's."""
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
    kept = run.layouts if run is not None else ()
    found, layouts = read_sent(last.endpoint, last.body, kept, last.path)
    if found is None:
        return None
    request = found.request
    host = last.host.lower()
    direct = host in PROVIDER_HOSTS.get(request.provider or "", frozenset()) or (
        host in settings.trusted_hosts or provider_host(request.provider, host)
    )
    if not paired and model is not None and not same_model(model, request.model):
        return None  # another call's body: its span was not the one that sent it
    if run is not None:
        run.layouts = layouts
    return FromWire(
        request, found.unread, direct, found.held, len(sent), differ, found.sealed, found.prefix
    )


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


@dataclass(frozen=True, slots=True)
class Compared:
    """A run's last record and body as `record_differs` compared them: their message tuples,
    each split into the instruction parts its messages hold and its other turns, and whether the
    turns agreed (then a call whose messages extend both compares only the new ones)."""

    recorded: tuple[Any, ...]
    sent: tuple[Any, ...]
    mine: tuple[tuple[Any, ...], tuple[Any, ...]]
    theirs: tuple[tuple[Any, ...], tuple[Any, ...]]
    within: bool


class Compares(Protocol):
    """Where a run keeps its last `Compared` (`RunState.compared`)."""

    compared: Compared | None


def record_differs(
    recorded: Request | None,
    sent: Request,
    run: Compares | None = None,
    prefixes: tuple[tuple[Any, ...] | None, tuple[Any, ...] | None] = (None, None),
) -> tuple[str, ...]:
    """The fields on which the instrumentation's record of a call (when it made one) says
    otherwise than the body the client sent: ``model``, ``instructions`` (system and developer
    text wherever it stands), ``messages`` (the other turns), ``tools``, and each
    ``params.<dial>`` the record holds. Saying otherwise is a value the body does not hold (a cut
    text, a tool echoed from the response, a dropped part or message); leaving a key out (a
    tool's ``strict``, a result's error flag) is not, the ledger names those as unrecorded.

    ``run`` and ``prefixes`` (the tuples the record's and the body's messages were built to start
    with): where both extend the run's last compared pair, only the new messages are split and
    compared (`Compared`)."""
    if recorded is None:
        return ()
    found: list[str] = []
    if recorded.model is not None and recorded.model != sent.model:
        found.append("model")
    before = run.compared if run is not None else None
    known = before is not None and prefixes[0] is before.recorded and prefixes[1] is before.sent
    mine = _split_on(recorded, before.mine if known and before else None, len(prefixes[0] or ()))
    theirs = _split_on(sent, before.theirs if known and before else None, len(prefixes[1] or ()))
    if known and before is not None and before.within:
        old = len(before.mine[1])
        within = len(mine[1]) == len(theirs[1]) and all(
            map(_message_within, mine[1][old:], theirs[1][old:])
        )
    else:
        within = _all_within(mine[1], theirs[1], _message_within)
    if run is not None:
        run.compared = Compared(recorded.messages, sent.messages, mine, theirs, within)
    if (recorded.system or mine[0]) and not _all_within(
        (*recorded.system, *mine[0]), (*sent.system, *theirs[0])
    ):
        found.append("instructions")
    if recorded.messages and not within:
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


def _split_on(
    request: Request, before: tuple[tuple[Any, ...], tuple[Any, ...]] | None, count: int
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The instruction parts of the request's system and developer messages (in order) and its
    other messages: where a convention places the instructions is not a difference. ``before``:
    the split of the first ``count`` messages (the ones the request's were built to start with),
    carried on over the rest."""
    instructions: list[Any] = []
    turns = []
    for message in request.messages[count:] if before is not None else request.messages:
        if message.get("role") in INSTRUCTION_ROLES:
            instructions += message.get("parts", ())
        else:
            turns.append(message)
    if before is None:
        return tuple(instructions), tuple(turns)
    return before[0] + tuple(instructions), before[1] + tuple(turns)
