"""One tree across the lanes of a run several writers served: each call's parent found from content.

Each writer numbers and links only its own calls (its lane, ``af.epoch.lane``). `link_by_content`
joins the lanes by the rule each writer applies to its own calls, the longest message prefix, and
names a gap wherever the record cannot prove a link.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from af_otel import names
from af_otel.canonical import canonical_json
from af_otel.reader.fold import UNKNOWN, ChainedTuple
from af_otel.reader.run_log import EpochRecord, Run

__all__ = ["link_by_content"]


@dataclass(slots=True)
class _Call:
    """One call of a run served by several writers, as the content link sees it."""

    record: EpochRecord
    start: int
    end: int
    digests: tuple[bytes, ...] | None  # one per message; None when the messages are not proven
    keys: tuple[int, ...] = ()  # keys[k]: a rolling hash of the first k digests
    roles: tuple[str, ...] = ()


def _answers_between(call: _Call, parent: _Call) -> int:
    """The assistant messages ``call`` adds to ``parent``'s that another message follows (a last
    assistant message is a prefill the caller wrote, not an answer)."""
    added = call.roles[len(parent.roles) : len(call.roles) - 1]
    return sum(1 for role in added if role == "assistant")


def link_by_content(lanes: list[Run], numbers: Mapping[str, Mapping[int, int]]) -> list[Run]:
    """Each call's parent across the lanes of one run: among the calls that finished before it
    started, the one whose messages are the longest prefix of its own (ties: the latest finished),
    the rule each writer applies to its own calls. Messages are compared by the SHA-256 of their
    canonical JSON. A call whose link cannot be proven gets parent 0 and a ``no-run-log`` reason:
    its own messages are not on record; a call that could have been a better parent is not
    readable (its messages are not on record, its record is incomplete, or its span is missing
    from its lane's numbering); or the messages it adds to the parent found hold a second model
    answer, which a call not on record gave (the one way a writer's last calls lost together show).
    A link is never guessed: such a call is a root of the tree, with the reason."""
    calls: list[_Call] = []
    memo: dict[int, tuple[Any, bytes]] = {}  # id(message) -> (message, digest)
    # (earliest start, end or None when unknown) of calls that could not be read
    unreadable: list[tuple[int, int | None]] = []
    for run in lanes:
        for record in (*run.epochs.values(), *run.others):
            span = record.span
            own = run.epochs.get(record.epoch) is record
            readable = own and record.epoch not in run.broken
            digests = _digests(run, record, memo) if readable else None
            if digests is None:
                unreadable.append((span.start_ns, span.end_ns))
            if own:
                roles = _roles(run, record) if digests is not None else ()
                calls.append(
                    _Call(record, span.start_ns, span.end_ns, digests, _keys(digests), roles)
                )
        unreadable.extend(_holes(run, numbers.get(run.lane, {})))
    by_prefix: dict[tuple[int, int], list[_Call]] = {}
    for call in calls:
        if call.digests is not None:
            by_prefix.setdefault((len(call.digests), call.keys[-1]), []).append(call)
    parents: dict[int, int] = {}
    unproven: dict[int, str] = {}
    for call in calls:
        epoch = call.record.epoch
        parents[epoch] = 0
        if call.digests is None:
            unproven[epoch] = (
                "its parent cannot be found from content: its messages are not on record"
            )
            continue
        found = _longest_prefix(call, by_prefix)
        after = found.end if found is not None else None
        if any(
            start < call.start
            and (end is None or (end <= call.start and (after is None or end > after)))
            for start, end in unreadable
        ):
            unproven[epoch] = (
                "its parent cannot be found from content: a call of the run that may be it "
                "cannot be read"
            )
        elif found is not None and _answers_between(call, found) > 1:
            # Each answer a call adds to its parent's messages came from a model call; the
            # parent's own answer is one, so a second one came from a call not on record.
            unproven[epoch] = (
                f"its parent cannot be found from content: its messages add "
                f"{_answers_between(call, found)} model answers to those of epoch "
                f"{found.record.epoch}, so a call in between is not on record"
            )
        elif found is not None:
            parents[epoch] = found.record.epoch
    out: list[Run] = []
    for run in lanes:
        epochs = {e: replace(r, parent=parents.get(e, 0)) for e, r in run.epochs.items()}
        broken = dict(run.broken)
        for epoch in epochs:
            if epoch in unproven:
                broken.setdefault(epoch, unproven[epoch])
        out.append(replace(run, epochs=MappingProxyType(epochs), broken=MappingProxyType(broken)))
    return out


def _keys(digests: tuple[bytes, ...] | None) -> tuple[int, ...]:
    if digests is None:
        return ()
    keys = [0]
    for digest in digests:
        keys.append(hash((keys[-1], digest)))
    return tuple(keys)


def _longest_prefix(call: _Call, by_prefix: Mapping[tuple[int, int], list[_Call]]) -> _Call | None:
    digests = call.digests
    assert digests is not None
    for size in range(len(digests), -1, -1):
        best: _Call | None = None
        for other in by_prefix.get((size, call.keys[size]), ()):
            if other is call or other.end > call.start or other.digests != digests[:size]:
                continue
            if best is None or (other.end, other.record.epoch) > (best.end, best.record.epoch):
                best = other
        if best is not None:
            return best
    return None


def _roles(run: Run, record: EpochRecord) -> tuple[str, ...]:
    messages = run.fold.value_at("messages", record.epoch)
    if not isinstance(messages, tuple | ChainedTuple):
        return ()
    return tuple(str(m.get("role")) for m in messages)


def _digests(
    run: Run, record: EpochRecord, memo: dict[int, tuple[Any, bytes]]
) -> tuple[bytes, ...] | None:
    """The call's messages as digests, when the record proves them: the fold holds them and the
    call has commits or a minted receipt (a call with neither says nothing of its own request)."""
    state = record.span.attributes.get(names.RECEIPT_STATE)
    if not record.commits and state != names.STATE_MINTED:
        return None
    messages = run.fold.value_at("messages", record.epoch)
    if messages is UNKNOWN:
        return None
    if not isinstance(messages, tuple | ChainedTuple):
        return ()
    out: list[bytes] = []
    for message in messages:  # a lane's calls share their message objects: each is hashed once
        found = memo.get(id(message))
        if found is None or found[0] is not message:
            found = (message, hashlib.sha256(canonical_json(message)).digest())
            memo[id(message)] = found
        out.append(found[1])
    return tuple(out)


def _holes(run: Run, numbers: Mapping[int, int]) -> list[tuple[int, int | None]]:
    """Calls missing from a lane's numbering, as (earliest start, None): each started after the
    lane's call numbered just below it, and could have ended any time."""
    starts = {
        wire: run.epochs[mine].span.start_ns for wire, mine in numbers.items() if mine in run.epochs
    }
    out: list[tuple[int, int | None]] = []
    earliest = -1
    for wire in range(1, max(numbers, default=0) + 1):
        if wire in numbers:
            earliest = starts.get(wire, earliest)
        else:
            out.append((earliest, None))
    return out
