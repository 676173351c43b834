"""The processor's side of the wire tap (af_otel/wire/): switch it on for an engine, hand it the
current span, and turn what it saw under a finished call's span into the request that call's
receipt is minted from (docs/processor.md, the wire tap).

A call is taken from the wire when the tap saw exactly one distinct body under its span (retries
that resend the same bytes are one request) and the endpoint's reader could read it (only its
tail, when it extends one of the run's last bodies: `af_otel.wire.tail`). Several
different bodies under one span, or one it cannot read, leave the call to the instrumentation's
record: what is minted must be the one request the model was served.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry import trace

from af_otel.model import Request
from af_otel.model.request import INSTRUCTION_ROLES
from af_otel.processor import commits
from af_otel.processor.export_gaps import PROVIDER_HOSTS
from af_otel.processor.settings import Settings
from af_otel.wire import SENT
from af_otel.wire import install as install_tap
from af_otel.wire import release as release_tap
from af_otel.wire.tail import Layout, read_sent


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
    sealed: bool = False  # a message replays sealed reasoning (the thinking-replay gap)
    # The tuple ``request.messages`` was built to start with (the run's earlier body's messages,
    # `af_otel.wire.tail`), so that prefix needs no comparing again; None when read whole.
    prefix: tuple[Any, ...] | None = None


class Layouts(Protocol):
    """Where a run keeps the layouts of its last bodies (`RunState.layouts`)."""

    layouts: tuple[Layout, ...]


def take(settings: Settings, key: tuple[int, int], run: Layouts | None = None) -> FromWire | None:
    """The request sent under ``key`` (module rule), or None; the tap forgets it either way.
    ``run``: the call's run, whose layouts let a body that extends an earlier one be read from
    its tail (`af_otel.wire.tail`), and which keeps this body's."""
    sent = SENT.take(key)
    if not sent:
        return None
    last = sent[-1]
    if any(attempt.body != last.body or attempt.endpoint != last.endpoint for attempt in sent):
        return None
    found, layouts = read_sent(last.endpoint, last.body, run.layouts if run is not None else ())
    if run is not None:
        run.layouts = layouts
    if found is None:
        return None
    request = found.request
    host = last.host.lower()
    direct = host in PROVIDER_HOSTS.get(request.provider or "", frozenset()) or (
        host in settings.trusted_hosts
    )
    return FromWire(request, found.unread, direct, found.held, found.sealed, found.prefix)


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
