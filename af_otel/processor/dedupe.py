"""One real call, one epoch: spans of one run that record the same model call are merged.

A framework instrumentation (LangChain, LangGraph) and an instrumentation of the provider SDK
underneath it, or an instrumentation and the provider SDK's own spans, each write an LLM span for
one request. Two such spans describe the same call when they belong to one run, their time
windows nest (one lies within the other; they need not be parent and child, nor in one trace)
and their requests agree on what both recorded (`agree`). The record closest to the wire keeps the
epoch; the other is *merged*: it carries ``af.epoch.same_as`` naming that epoch (and the run and
lane), no ``af.epoch`` and no receipt, so it is never numbered and never raises ``no-run-log``.

Rank decides which record is closest to the wire: an instrumentation of the provider SDK (each
family's `Convention.sdk_scopes`) ranks above the provider SDK's own spans (`PROVIDER_OWN_SCOPES`,
which record no content by default), which rank above any other scope (frameworks). The setting
``trusted_scope`` (``AF_OTEL_TRUSTED_SCOPE``) ranks one scope above all.

Where it is decided, in both forms:

* at the end of a span not numbered at its start: it is merged into a finished call of its run
  that nests with it, agrees with it and ranks at least as high (`match`); the usual case, as the
  framework span ends after the SDK span it wraps;
* a provider SDK's own span whose parent is an LLM call of a higher rank, and any call whose
  parent is an LLM call of the trusted scope, is merged into the parent's epoch: at its start
  (processor), or in the exporter's batch before numbering; the inner span ends first, so its
  parent's end comes too late to decide;
* at the start of a call inside a call the processor numbered at its start (a framework that
  writes its attributes at start), `number_at_start`: when the open call is the run's last
  numbered one, of another scope that ranks no higher, the inner call takes over its number (no
  number is ever given twice or skipped, and none was exported yet, as the outer call is still
  open) and the outer call is merged at its end like any other. Should it then agree with no
  finished call, it is numbered at its end and says `no-run-log`, as any call numbered out of
  start order does.

Memory is bounded: the last `RECENT` finished calls per run are kept for matching, and cost no
copy of the history: a call keeps its messages as a count into a `History` that later calls
extending it share (`remember`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any, Final

from af_otel import names
from af_otel.model import Request
from af_otel.model.frozen_copy import replaced
from af_otel.processor.history import History, share_history
from af_otel.semconv import model_named, sdk_scopes

SpanKey = tuple[int, int]
RECENT: Final = 64
# Provider SDKs that write spans of their own (the anthropic SDK 2.x, on by default).
PROVIDER_OWN_SCOPES: Final = frozenset({"com.anthropic.sdk.python"})


@dataclass(frozen=True, slots=True)
class Conversation:
    """What `agree` compares of a request: its system parts, and its messages, which are the
    first ``count`` of its `History`'s (shared with later calls that extend it: `remember`)."""

    system: tuple[Any, ...]
    history: History
    count: int


def conversation(request: Request | None) -> Conversation | None:
    if request is None:
        return None
    return Conversation(request.system, History(request.messages), len(request.messages))


@dataclass(frozen=True, slots=True)
class Seen:
    """A finished call of a run, as the matching needs it."""

    start: int
    end: int
    epoch: int
    lane: str
    scope: str | None
    model: str | None
    conversation: Conversation | None


def remember(recent: Any, seen: Seen, prefix: tuple[Any, ...] | None) -> None:
    """Append ``seen`` to ``recent``. ``prefix``: a tuple its messages were built to start with
    (the run's last call's, incremental.py): the recent calls whose `History` holds it share it
    with this call from now on."""
    held = seen.conversation
    if prefix is not None and held is not None:
        histories = (o.conversation.history if o.conversation else None for o in reversed(recent))
        shared = share_history(histories, prefix, held.history.messages, None)
        if shared is not None:
            seen = replaced(seen, conversation=Conversation(held.system, shared, held.count))
    recent.append(seen)


@dataclass(frozen=True, slots=True)
class Opened:
    """The call a run last numbered at its start, as `number_at_start` needs it."""

    key: SpanKey
    scope: str | None
    model: str | None


def rank(scope: str | None, trusted: str | None = None) -> int:
    """How close a scope's record is to the wire (higher: closer)."""
    if scope is not None and scope == trusted:
        return 3
    if scope in sdk_scopes():
        return 2
    if scope in PROVIDER_OWN_SCOPES:
        return 1
    return 0


def model_of(attributes: Mapping[str, Any], request: Request | None) -> str | None:
    if request is not None and request.model:
        return request.model
    return model_named(attributes)


def nests(a_start: int, a_end: int, b_start: int, b_end: int) -> bool:
    """One window lies within the other."""
    return (a_start <= b_start and b_end <= a_end) or (b_start <= a_start and a_end <= b_end)


def _turns(held: Conversation) -> tuple[list[Any], list[Any]]:
    """The instructions and turns with system placement normalized: a leading system message and
    a ``system`` field describe the same request."""
    system = list(held.system)
    messages = list(islice(held.history.messages, held.count))
    while messages and messages[0].get("role") == "system":
        system.extend(messages.pop(0).get("parts", ()))
    return system, messages


def _same_parts(a: Any, b: Any) -> bool:
    """Parts agree on every field both record (one may leave out, say, empty tool arguments)."""
    a, b = tuple(a or ()), tuple(b or ())
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x.get("type") != y.get("type"):
            return False
        if any(x[key] != y[key] for key in x.keys() & y.keys()):
            return False
    return True


def agree(
    a_model: str | None, a: Conversation | None, b_model: str | None, b: Conversation | None
) -> bool:
    """Two records agree on what both recorded: the model when both name one, and the
    conversation when both carry a request. System placement is normalized, and of a message
    only its role and parts are compared (fields a convention adds, such as ``name`` on tool
    messages, are not on the wire)."""
    if a_model is not None and b_model is not None and a_model != b_model:
        return False
    if a is None or b is None:
        return True
    a_system, a_turns = _turns(a)
    b_system, b_turns = _turns(b)
    if len(a_turns) != len(b_turns) or not _same_parts(a_system, b_system):
        return False
    return all(
        x.get("role") == y.get("role") and _same_parts(x.get("parts"), y.get("parts"))
        for x, y in zip(a_turns, b_turns, strict=True)
    )


def could_match(recent: Any, start: int, end: int, scope: str | None, trusted: str | None) -> bool:
    """Whether a call of ``scope`` over this window may repeat a finished call (`match` without
    the requests, which are not read yet)."""
    mine = rank(scope, trusted)
    return any(
        seen.scope != scope
        and rank(seen.scope, trusted) >= mine
        and nests(start, end, seen.start, seen.end)
        for seen in recent
    )


def match(
    recent: Any,
    start: int,
    end: int,
    scope: str | None,
    model: str | None,
    request: Request | None,
    trusted: str | None,
) -> Seen | None:
    """The finished call this one duplicates, if any: the innermost nesting, agreeing call of
    another scope that ranks at least as high."""
    mine = rank(scope, trusted)
    mine_held = conversation(request)
    best: Seen | None = None
    for seen in recent:
        if seen.scope == scope or rank(seen.scope, trusted) < mine:
            continue
        if not nests(start, end, seen.start, seen.end):
            continue
        if not agree(model, mine_held, seen.model, seen.conversation):
            continue
        if best is None or seen.start > best.start:
            best = seen
    return best


def merges_into_parent(scope: str | None, parent_scope: str | None, trusted: str | None) -> bool:
    """A provider SDK's own span started inside an open LLM call of a higher-ranked scope, or
    any call started inside an open LLM call of the trusted scope (the call it makes)."""
    if parent_scope is not None and parent_scope == trusted:
        return scope != trusted
    return scope in PROVIDER_OWN_SCOPES and rank(parent_scope, trusted) > rank(scope, trusted)


def merged_attributes(run_id: str, lane: str, epoch: int) -> dict[str, Any]:
    """What a merged span carries: the run, the lane and the epoch it is the same call as."""
    return {names.RUN_ID: run_id, names.EPOCH_LANE: lane, names.EPOCH_SAME_AS: epoch}


def number_at_start(
    run: Any, key: SpanKey, start: int, scope: str | None, model: str | None, trusted: str | None
) -> None:
    """Number the call ``key`` at its start in ``run`` (a `RunState`, under its lock), or hand it
    the number of the open call it starts inside and may record again (module docstring)."""
    last: Opened | None = run.opened
    if last is not None and last.key != key and last.scope != scope:
        found = run.open_calls.get(last.key)
        if (
            found is not None
            and found[0] == run.last_epoch
            and rank(scope, trusted) >= rank(last.scope, trusted)
            and (model is None or last.model is None or model == last.model)
        ):
            del run.open_calls[last.key]
            run.open_calls[key] = found
            run.latest_start = max(run.latest_start, start)
            run.opened = Opened(key, scope, model)
            return
    run.number(key, start, at_start=True)
    run.opened = Opened(key, scope, model)
