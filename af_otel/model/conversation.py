"""An append-only conversation for `llm_call`: each message is read once, when it is added.

Handed a list of its own dicts, `llm_call` cannot tell what changed since the run's last call
without comparing every message again (a dict can change in place), so its cost grows with the
history. A `Conversation` is a tuple of messages normalized and frozen as they are added (their
dicts become `FrozenDict`, their lists tuples: nothing in it can change), built only by adding
to an earlier one. A message object is made once, at the place it was added, so the same object
at the same place proves the whole history up to it unchanged: one identity test instead of a
pass over the history. Its receipts are the ones a list of the same dicts gets: freezing changes
no canonical JSON.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from af_otel.model.request import FrozenDict, normalize_message

__all__ = ["Conversation", "frozen"]


def frozen(value: Any) -> Any:
    """``value`` with every dict made a `FrozenDict` and every list a tuple, all copies; other
    values (strings, numbers, and whatever canonical JSON refuses) as they are."""
    if isinstance(value, dict):
        return FrozenDict({key: frozen(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(frozen(item) for item in value)
    return value


def _messages(messages: Iterable[Any], start: int) -> list[FrozenDict]:
    return [
        frozen(normalize_message(message, f"messages[{index}]"))
        for index, message in enumerate(messages, start)
    ]


class Conversation(tuple[FrozenDict, ...]):
    """``Conversation(messages)``, then ``conversation = conversation.add(message, ...)``: a
    new conversation each time, the earlier one unchanged. Hand it to `llm_call` as
    ``messages``: only what was added since the run's last call is read.

    A message that is not a GenAI-shaped message raises `RequestShapeError` where it is added,
    in the caller's code. Slicing or joining gives a plain tuple, which `llm_call` reads as any
    list of messages."""

    __slots__ = ()

    def __new__(cls, messages: Iterable[Any] = ()) -> Conversation:
        return super().__new__(cls, _messages(messages, 0))

    def add(self, *messages: Any) -> Conversation:
        """This conversation followed by ``messages``."""
        return tuple.__new__(Conversation, (*self, *_messages(messages, len(self))))

    def __repr__(self) -> str:
        return f"Conversation({list(self)!r})"
