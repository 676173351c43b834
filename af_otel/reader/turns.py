"""Model turns in a conversation, and the calls a run's record lacks that they reveal: a history that
shows a model answer no call on record gave (`unrecorded-call`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from af_otel import names
from af_otel.errors import CanonicalJSONError
from af_otel.model.request import INSTRUCTION_ROLES
from af_otel.reader.gaps import Gap, gap

__all__ = ["Turned", "model_turns", "unrecorded_call_gaps"]


class _Prefixes(Protocol):
    def shared_prefix(
        self, new: Sequence[Any], old: Sequence[Any], *, extends: bool = False
    ) -> int: ...

    def canonical(self, message: Any, *, keep: bool = True) -> bytes: ...


class Turned(Protocol):
    """What the check reads of a view (`af_otel.reader.view.ServedView`)."""

    @property
    def epoch(self) -> int: ...
    @property
    def parent(self) -> int: ...
    @property
    def messages(self) -> Sequence[Any] | None: ...
    @property
    def parent_view(self) -> Turned | None: ...
    @property
    def context(self) -> _Prefixes: ...


# Who wrote a message: a model turn is a run of these, one call's answer.
_MODEL_ROLES: Final = frozenset({"assistant", "model"})


def _tool_result(message: Mapping[str, Any]) -> bool:
    """A message that only hands tool results back (role ``tool``, or Anthropic's user turn of
    tool results): it continues the model's turn, it is no new input."""
    if message.get("role") == "tool":
        return True
    parts = message.get("parts", ())
    return bool(parts) and all(p.get("type") == "tool_call_response" for p in parts)


def model_turns(messages: Sequence[Mapping[str, Any]], start: int = 0) -> list[int]:
    """Where each model turn among ``messages[start:]`` begins: a model message after new input
    (a user, system or developer message; tool results continue the turn they answer).

    A tool loop's answer after its tool results counts with the call it answers, so a call that
    answered tool results and left no span is not told apart from its parent's answer; a turn
    after new input is."""
    starts: list[int] = []
    fresh = True
    # One slice, not an index per message: a fold's list is a chain that an index walks down.
    for index, message in enumerate(messages[start:], start):
        if message.get("role") in _MODEL_ROLES:
            if fresh:
                starts.append(index)
            fresh = False
        elif not _tool_result(message):
            fresh = True
    return starts


def _last(context: _Prefixes, messages: Sequence[Any], end: int) -> bytes | None:
    # By content, not by `==` on a dict hashed over its keys: one encoding of one message a view
    # (kept by the run for `verify`, which hashes the same message), and the counts compared only
    # for the few calls that end alike.
    try:
        return context.canonical(messages[end - 1])
    except CanonicalJSONError:
        return None


def _said(messages: Sequence[Any], end: int) -> list[Any]:
    # Instructions are not counted when two calls' histories are matched: some conventions
    # record them as a message, others beside the messages.
    return [m for m in messages[:end] if m.get("role") not in INSTRUCTION_ROLES]


def unrecorded_call_gaps(views: Sequence[Turned]) -> dict[int, Gap]:
    """The `unrecorded-call` gap of each view of one run (by its index in ``views``) whose
    history shows a model answer no call on record gave: since its parent it appended two model
    turns or more (the parent's answer is one), and no other call of the run was served the
    history before the extra one (as many turns and the same last message: a call whose earlier
    turns were edited, or whose instructions were recorded apart from its messages, counts), nor,
    beside it, that history and then input of its own (a fan-out the application merged)."""
    served: dict[bytes | None, list[Sequence[Any]]] = {}
    beside: dict[int, list[Turned]] = {}
    for view in views:
        if view.messages:
            last = _last(view.context, view.messages, len(view.messages))
            served.setdefault(last, []).append(view.messages)
            beside.setdefault(view.parent, []).append(view)

    def on_record(view: Turned, messages: Sequence[Any], at: int) -> bool:
        found = _last(view.context, messages, at)
        if found is None:  # unreadable here: cannot tell, so no gap is claimed
            return True
        count = len(_said(messages, at))
        if any(
            other is not messages and len(_said(other, len(other))) == count
            for other in served.get(found, ())
        ):
            return True
        # A fan-out: calls beside this one were served that history and then input of their
        # own; the application may have merged their answers into the turn.
        before = _said(messages, at)
        for other in beside.get(view.parent, ()):
            if other is view or other.messages is None:
                continue
            theirs = _said(other.messages, len(other.messages))
            diverges = len(theirs) > len(before) and theirs[len(before)] != messages[at]
            if diverges and theirs[: len(before)] == before:
                return True
        return False

    out: dict[int, Gap] = {}
    for index, view in enumerate(views):
        parent = view.parent_view
        messages = view.messages
        if parent is None or parent.messages is None or messages is None:
            continue
        # Only a request that carries all of its parent's: otherwise what it appended is not
        # "since the parent" (a call beside it, history edited, or held by the server).
        shared = view.context.shared_prefix(messages, parent.messages)
        if shared < len(parent.messages):
            continue
        extra = [
            at for at in model_turns(messages, shared)[1:] if not on_record(view, messages, at)
        ]
        if not extra:
            continue
        where = ", ".join(f"#{at}" for at in extra)
        out[index] = gap(
            names.GAP_UNRECORDED_CALL,
            f"since epoch {parent.epoch} ({len(parent.messages)} messages) this request appends "
            f"{len(messages) - shared} with a model turn more than that call's answer at "
            f"{where}; no call on record was served the messages before it",
        )
    return out
