"""Server-held history: the earlier calls whose requests and answers the provider's server held for a
later call (the Responses API's ``previous_response_id``), found by following the run's response ids.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from af_otel import names
from af_otel.reader.records import SpanRecord

__all__ = ["HeldCall", "Served", "held_calls", "held_detail", "response_id"]


class Served(Protocol):
    """What the held history reads of an earlier call's view (`af_otel.reader.view.ServedView`)."""

    @property
    def messages(self) -> Sequence[object] | None: ...
    @property
    def gap_kinds(self) -> tuple[str, ...]: ...
    @property
    def minted(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class HeldCall:
    """One earlier call whose request and answer the provider's server held for a later call
    (the Responses API's ``previous_response_id``), found by following the run's response ids.

    ``epoch`` is None when no call on this run's record got ``response_id``: the record of the
    held history ends there. The answer is never fingerprinted by any receipt."""

    response_id: str
    epoch: int | None = None
    # That epoch's request as served there: its message count (None: not on record), its gap
    # kinds (what its own view cannot prove) and whether it carries a usable receipt.
    messages: int | None = None
    gaps: tuple[str, ...] = ()
    minted: bool = False


def response_id(span: SpanRecord) -> str | None:
    """The provider's id for the response a call got, as its convention records it."""
    found = span.attributes.get("gen_ai.response.id")
    if isinstance(found, str):
        return found
    output = span.attributes.get("output.value")  # OpenInference: the response object as JSON
    if isinstance(output, str) and output.startswith("{"):
        with contextlib.suppress(ValueError):
            decoded = json.loads(output)
            if isinstance(decoded, dict) and isinstance(decoded.get("id"), str):
                return str(decoded["id"])
    return None


def held_calls(
    span: SpanRecord,
    answered_by: Mapping[str, tuple[int, str | None]],
    views: Mapping[int, Served],
) -> tuple[tuple[HeldCall, ...], str | None]:
    """The earlier calls of this run whose requests and answers the server held for this one,
    oldest first, followed back response by response; and where that record ends: a tell-tale
    the oldest one shows, or None (it holds the history from its start, or the oldest is a
    response no call on record got)."""
    value = span.attributes.get(names.HELD_HISTORY)
    if not isinstance(value, str) or not value or " " in value:  # none, or a tell-tale
        return (), None
    chain: list[HeldCall] = []
    held: str | None = value
    # A response id answered twice, or a loop in a corrupt record, cannot send this round forever.
    while held is not None and " " not in held and len(chain) <= len(answered_by):
        found = answered_by.get(held)
        if found is None:
            chain.append(HeldCall(held))
            held = None
            break
        epoch, continued = found
        view = views.get(epoch)
        chain.append(
            HeldCall(
                held,
                epoch,
                len(view.messages) if view is not None and view.messages is not None else None,
                view.gap_kinds if view is not None else (),
                view.minted if view is not None else False,
            )
        )
        held = continued
    return tuple(reversed(chain)), held


def held_detail(span: SpanRecord, held: Sequence[HeldCall], end: str | None) -> str:
    """What the record says of the history a call continues: the earlier calls of this run that
    hold it, followed back response by response, and where the record of it ends."""
    value = span.attributes.get(names.HELD_HISTORY)
    if not isinstance(value, str) or not value:
        return "the writer found history this request does not carry"
    if " " in value:  # a tell-tale, not an id
        return f"history not on record: {value}; the earlier response id is not recorded"
    linked = [h for h in held if h.epoch is not None]
    if not linked:
        return f"continues {value}, which is not in this run's record"
    epochs = ", ".join(str(h.epoch) for h in linked)
    if held[0].epoch is None:
        rest = f"before those, {held[0].response_id} is not in this run's record"
    elif end is not None:
        rest = f"before those, {end}"
    else:
        rest = "this run holds it from its start"
    return (
        f"continues {value}, the response of epoch {linked[-1].epoch} of this run: the server "
        f"held the requests and answers of epochs {epochs}, in that order; {rest}"
    )
