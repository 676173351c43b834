"""Messages a run's recent calls share: a call read as extending the run's last call
(`af_otel.semconv.incremental`) holds that call's messages in front, the very same objects, so
the calls before it keep theirs as a count into one tuple instead of a copy each; and whether a
run's first call already holds earlier turns (`carries_history`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from af_otel.model import Request
from af_otel.model.request import INSTRUCTION_ROLES
from af_otel.receipts.entries import common_entries

_HISTORY_ROLES: Final = INSTRUCTION_ROLES | {"user"}


class History:
    """Messages (and their entry hashes) that a run's recent calls share. A call read as
    extending the run's last call (`Read.prefix`) holds that call's messages in front, the very
    same objects, so the calls before it can keep theirs as a count into its tuples: a growing
    conversation keeps one tuple, not one per call (run_table.Finished, dedupe.Seen)."""

    __slots__ = ("entries", "messages")

    def __init__(self, messages: tuple[Any, ...], entries: Sequence[str] | None = None) -> None:
        self.messages = messages
        self.entries = entries

    def extend(
        self, prefix: tuple[Any, ...], messages: tuple[Any, ...], entries: Sequence[str] | None
    ) -> bool:
        """Hold the tuples of a call whose ``messages`` were built to start with ``prefix``, when
        this history holds ``prefix`` and ``entries`` start with its entries; whether it does."""
        theirs = self.entries
        if self.messages is not prefix or (theirs is None) != (entries is None):
            return False
        if (
            theirs is not None
            and entries is not None
            and (len(entries) < len(theirs) or common_entries(theirs, entries) < len(theirs))
        ):
            return False
        self.messages, self.entries = messages, entries
        return True


def share_history(
    histories: Iterable[History | None],
    prefix: tuple[Any, ...],
    messages: tuple[Any, ...],
    entries: Sequence[str] | None,
) -> History | None:
    """The first of ``histories`` (newest first) that takes on a call whose ``messages`` were
    built to start with ``prefix`` (`History.extend`), for that call to share; None if none."""
    return next(
        (h for h in histories if h is not None and h.extend(prefix, messages, entries)), None
    )


def carries_history(request: Request) -> bool:
    """A first call that already holds earlier turns: an assistant or tool message (or a tool
    result part), or more than one user message. System and developer messages are not turns."""
    users = 0
    for message in request.messages:
        role = message.get("role")
        if role not in _HISTORY_ROLES:
            return True
        if any(part.get("type") == "tool_call_response" for part in message.get("parts", ())):
            return True
        if role == "user":
            users += 1
    return users > 1
