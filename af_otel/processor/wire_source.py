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
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol, runtime_checkable

from opentelemetry import trace

from af_otel.model import Request
from af_otel.model.request import INSTRUCTION_ROLES
from af_otel.processor import commits
from af_otel.processor.export_gaps import PROVIDER_HOSTS
from af_otel.processor.settings import Settings
from af_otel.semconv import Call, Projection, is_llm_call, projection
from af_otel.wire import SENT
from af_otel.wire import install as install_tap
from af_otel.wire import release as release_tap
from af_otel.wire.gemini import names_model
from af_otel.wire.hosts import provider_host
from af_otel.wire.loose import Kept
from af_otel.wire.sent import VIA_CURRENT, VIA_STARTED
from af_otel.wire.spelling import Spelling
from af_otel.wire.tail import Layout, read_sent
from af_otel.wire.tap import LOOSE, Owner

# The span started last in this context (thread, task), set by the engine at every span start:
# a callback-based instrumentation starts its LLM span in the context that then sends the request,
# but never makes it current. Set, never reset: a later start in the same context overrides it,
# and a span that already ended takes nothing (`take` holds a body to its span's window).
_started: ContextVar[tuple[int, int] | None] = ContextVar("af_otel_started", default=None)
# The LLM call started last in this context, as its engine told it at the start: a body sent
# while it is current is its own without looking at its attributes again (0.06 ms a send, in
# place). A span that is not one at its start may become one (attributes set later): looked at.
_started_llm: ContextVar[tuple[int, int] | None] = ContextVar("af_otel_started_llm", default=None)


def started(key: tuple[int, int], llm: bool = False) -> None:
    """Note ``key`` as the span started last in this context (``llm``: an LLM call by its
    attributes at its start)."""
    _started.set(key)
    if llm:
        _started_llm.set(key)


def owner() -> tuple[int, int] | Owner | None:
    """The span a request sent now belongs to (docs/processor.md, Pairing): the current span
    when it is an LLM call or was the last started here (instrumentations of provider SDKs make
    their LLM span current); else the span started last in this context, when it is of the same
    trace as the current span or none is current (a callback-based framework's LLM span). A body
    no current LLM span owns is kept by its trace too (0: sent in none), for a span that ends
    later (Late pairing); a body sent in an unsampled trace is no span's we will see."""
    span = trace.get_current_span()
    context = span.get_span_context()
    hint = _started.get()
    if context.is_valid and not context.trace_flags.sampled:
        return Owner(hint, VIA_STARTED) if hint is not None else None
    current = (context.trace_id, context.span_id) if context.is_valid else None
    if current is not None and (current == _started_llm.get() or _is_llm(span)):
        return current
    loose = current[0] if current is not None else 0
    if hint is None or hint == current or (current is not None and hint[0] != current[0]):
        return Owner(current, VIA_CURRENT, loose)
    return Owner(hint, VIA_STARTED, loose)


def _is_llm(span: Any) -> bool:
    attributes = getattr(span, "attributes", None)
    # A span known only by its context (a remote parent attached by a worker) has neither.
    name = getattr(span, "name", "")
    return is_llm_call(attributes if isinstance(attributes, Mapping) else {}, str(name))


def wanted(settings: Settings) -> bool:
    """Whether an engine of these settings switches the tap on."""
    return settings.wire and not settings.disabled


def activate(settings: Settings) -> bool:
    """Switch the tap on for one engine when its settings want it; whether they did."""
    if not wanted(settings):
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
    spelling: Spelling | None = None  # how the body spelled it (af_otel.wire.spelling)
    # Where the record was already held against the body (`late`): what `record_differs` said.
    differs: tuple[str, ...] | None = None


class Layouts(Protocol):
    """Where a run keeps the layouts of its last bodies (`RunState.layouts`)."""

    layouts: tuple[Layout, ...]


class Finished(Protocol):
    """What `take` reads of a finished call's span (`CallFacts`)."""

    @property
    def key(self) -> tuple[int, int]: ...
    @property
    def start_time(self) -> int: ...
    @property
    def end_time(self) -> int: ...
    @property
    def seen_until(self) -> int: ...
    @property
    def parent(self) -> tuple[int, int] | None: ...


def window_of(facts: Finished) -> tuple[int, int]:
    """The times a span says its call was live: its start to its end, or to its last event when
    that comes later (OpenInference's LlamaIndex span records a streamed call's end when the
    stream is handed out, before its request is sent, and its first token as an event)."""
    return facts.start_time, max(facts.end_time, facts.seen_until)


def take(
    settings: Settings,
    facts: Finished,
    model: str | None = None,
    run: Layouts | None = None,
    recorded: Call | None = None,
    calling: Callable[[tuple[int, int], int], bool] | None = None,
) -> FromWire | None:
    """The request sent under the call's span (module rule), or None; the tap forgets it.

    A body filed under the call because its span was the one started last where it was sent
    (not current) counts only when sent within the span's window (`window_of`), and only
    when the ``model`` the instrumentation recorded, where it did, is the body's (`same_model`).
    A call with no body under its span may claim one kept by its trace (`late`; ``calling``
    says whether a body filed under a span, sent at a time, waits for that span's call). ``run``: the
    call's run, whose layouts let a body that extends an earlier one be read from its tail
    (`af_otel.wire.tail`), and which keeps this body's."""
    start, end = window_of(facts)
    sent = tuple(s for s in SENT.take(facts.key) if s.via == VIA_CURRENT or start <= s.at <= end)
    if not sent:
        return late(settings, facts, model, run, recorded, calling)
    last = sent[-1]
    paired = all(attempt.via == VIA_CURRENT for attempt in sent)
    differ = any(a.body != last.body or a.endpoint != last.endpoint for a in sent)
    if differ and not paired:
        return None  # two bodies sent where the call's span started: whose is which is unknown
    kept = run.layouts if run is not None else ()
    found, layouts = read_sent(last.endpoint, last.body, kept, last.path)
    if found is None:
        return None
    if not paired and model is not None and not same_model(model, found.request.model):
        return None  # another call's body: its span was not the one that sent it
    if run is not None:
        run.layouts = layouts
    if any(s.loose for s in sent):
        LOOSE.drop(last.trace, sent)
    return _made(settings, found, last.host, len(sent), differ)


def evicted(facts: Finished) -> bool:
    """Whether the tap dropped a body sent under the call's span before the call took it (its
    bounds: docs/processor.md, the wire tap); asked once, of a call that got no body, which is
    then minted from its record and says why (`wire-body-evicted`)."""
    return SENT.evicted(facts.key)


# What the record must not say otherwise than a body for the body to be claimed late.
_VOUCHED: Final = frozenset({"instructions", "messages"})


def late(
    settings: Settings,
    facts: Finished,
    model: str | None,
    run: Layouts | None = None,
    call: Call | None = None,
    calling: Callable[[tuple[int, int], int], bool] | None = None,
) -> FromWire | None:
    """A body kept by its trace (`af_otel.wire.loose`) claimed by a call that got none under
    its span (docs/processor.md, Late pairing): sent in the call's trace (or, for a root span,
    in none), within the call's window, asking for the model the record names, and saying
    what the record's instructions and messages say (the record must hold some), as the
    record's convention keeps them (`vouches`). Exactly one
    such body (retries of the same bytes are one request), else none: two fit, whose is which
    is unknown, and the record stands. A body filed under an LLM call still to take it
    (``calling(key, sent at)``: the span started last where it was sent) waits for that call."""
    recorded = call.request if call is not None else None
    if model is None or recorded is None or not recorded.messages:
        return None
    start, end = window_of(facts)
    traces = (facts.key[0], 0) if facts.parent is None else (facts.key[0],)
    groups: dict[tuple[str, bytes], list[tuple[int, Kept]]] = {}
    for trace_id in traces:
        for kept in LOOSE.waiting(trace_id):
            mine = kept.key is None or calling is None or not calling(kept.key, kept.sent.at)
            if mine and start <= kept.sent.at <= end:
                groups.setdefault((kept.sent.endpoint, kept.sent.body), []).append((trace_id, kept))
    before = run.layouts if run is not None else ()
    fits = []
    for group in groups.values():
        last = group[-1][1].sent
        found, layouts = read_sent(last.endpoint, last.body, before, last.path)
        if found is not None and same_model(model, found.request.model):
            fits.append((group, found, layouts))
    # One fit is held against the record with the run's memos (the engine then keeps them).
    compares = run if len(fits) == 1 and isinstance(run, Compares) else None
    projects = run if len(fits) == 1 and isinstance(run, Projects) else None
    convention = call.convention if call is not None else None
    vouched = []
    for group, found, layouts in fits:
        prefixes = (call.prefix if call is not None else None, found.prefix)
        differs = record_differs(recorded, found.request, compares, prefixes)
        seen = projection(convention, group[-1][1].sent.endpoint)
        if vouches(recorded, found.request, differs, seen, projects, prefixes):
            vouched.append((group, found, layouts, differs))
    if len(vouched) != 1:
        return None
    group, found, layouts, differs = vouched[0]
    for trace_id in traces:
        taken = tuple(kept for t, kept in group if t == trace_id)
        if taken and not LOOSE.claim(trace_id, taken):
            return None  # another call claimed it first
    for _, kept in group:
        if kept.key is not None:
            SENT.discard(kept.key, kept.sent)
    if run is not None:
        run.layouts = layouts
    return _made(settings, found, group[-1][1].sent.host, len(group), False, differs)


def vouches(
    recorded: Request,
    sent: Request,
    differs: tuple[str, ...],
    seen: Projection | None,
    run: Projects | None = None,
    prefixes: tuple[tuple[Any, ...] | None, tuple[Any, ...] | None] = (None, None),
) -> bool:
    """Whether a record vouches for a body (`late`): it says otherwise than the body (``differs``,
    `record_differs`) on neither the instructions nor the messages, or on neither once its
    messages and the body's are each seen as the record's convention keeps them (``seen``,
    `Convention.projections`); everything the projection keeps must still be equal.

    ``run`` and ``prefixes`` (as `record_differs` takes them): where the record and the body
    extend the run's last projected pair (`Projected`), only their new messages are projected
    and compared."""
    if not _VOUCHED.intersection(differs):
        return True
    if seen is None:
        return False
    before = run.projected if run is not None else None
    if before is not None and before.seen is not seen:
        before = None
    lasts = (before.record, before.sent) if before is not None else (None, None)
    mine, my_prefix = _seen_as(recorded.messages, seen, lasts[0], prefixes[0])
    theirs, their_prefix = _seen_as(sent.messages, seen, lasts[1], prefixes[1])
    compared = before.compared if before is not None else None
    memo = Projected(seen, (recorded.messages, mine), (sent.messages, theirs), compared)
    kept = record_differs(
        replace(recorded, messages=mine),
        replace(sent, messages=theirs),
        memo,
        (my_prefix, their_prefix),
    )
    if run is not None:
        run.projected = memo
    return not _VOUCHED.intersection(kept)


@dataclass(slots=True)
class Projected:
    """A run's last record and body each seen through their convention's projection
    (`vouches`): per side, the messages as read and as seen, and the two compared
    (`Compared`), so a call whose record and body extend them sees and compares only its new
    messages. Changed in place by `record_differs`, as the run's own `Compared` slot is."""

    seen: Projection
    record: tuple[tuple[Any, ...], tuple[Any, ...]]
    sent: tuple[tuple[Any, ...], tuple[Any, ...]]
    compared: Compared | None = None


@runtime_checkable
class Projects(Protocol):
    """Where a run keeps its last `Projected` (`RunState.projected`)."""

    projected: Projected | None


def _seen_as(
    messages: tuple[Any, ...],
    seen: Projection,
    last: tuple[tuple[Any, ...], tuple[Any, ...]] | None,
    prefix: tuple[Any, ...] | None,
) -> tuple[tuple[Any, ...], tuple[Any, ...] | None]:
    """``messages`` seen through ``seen``, and the view they were built to start with: the
    ``last`` messages' view followed by the new ones' where ``messages`` were built to start
    with (``prefix``) the very messages ``last`` saw (else seen whole, starting with none)."""
    if last is not None and prefix is not None and prefix is last[0]:
        new = messages[len(prefix) :]
        return last[1] + tuple(m for m in map(seen, new) if m is not None), last[1]
    return tuple(m for m in map(seen, messages) if m is not None), None


def _made(
    settings: Settings,
    found: Any,
    host: str,
    attempts: int,
    differ: bool,
    differs: tuple[str, ...] | None = None,
) -> FromWire:
    request = found.request
    host = host.lower()
    direct = host in PROVIDER_HOSTS.get(request.provider or "", frozenset()) or (
        host in settings.trusted_hosts or provider_host(request.provider, host)
    )
    return FromWire(
        request,
        found.unread,
        direct,
        found.held,
        attempts,
        differ,
        found.sealed,
        found.prefix,
        found.spelling,
        differs,
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


@runtime_checkable
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
    otherwise than the body the client sent: ``model`` (a Vertex AI model recorded by the resource
    name it was handed is the path's: `names_model`), ``instructions`` (system and developer
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
    if recorded.model is not None and not names_model(recorded.model, sent):
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
