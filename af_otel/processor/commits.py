"""The changes of a run's state from one call to the next, as `af.commit` events (docs/receipt-spec.md).

The state is the normalized request's plain form (`Request.to_dict`): ``messages`` always, and
``system``, ``tools``, ``params``, ``model``, ``provider`` when set. Against the parent call's
state, each key that changed gives one commit: ``append`` when the parent's messages are a prefix of
the new ones (the payload is the new messages only), ``set`` otherwise (the whole value), ``delete``
for a key the parent had and this call has not. Unchanged keys give nothing. Folding the commits
onto the parent's state gives this call's state exactly: that is what the reader relies on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from af_otel import names
from af_otel.canonical import canonical_json
from af_otel.errors import StoreError
from af_otel.model import Request
from af_otel.model.prefix import identical_prefix
from af_otel.model.request import REQUEST_KEYS
from af_otel.processor.guard import report
from af_otel.processor.settings import Settings, WriteMode, note_written
from af_otel.store.items import StoredItems

Verb = names.CommitVerb
# A state no call has: what the first call of a run without a base diffs against.
EMPTY: Final[Mapping[str, Any]] = {"messages": []}


@dataclass(frozen=True, slots=True)
class Change:
    """One key's change; ``payload`` is None for ``delete``."""

    key: str
    verb: Verb
    payload: Any


def changes(
    parent: Request | Mapping[str, Any] | None,
    new: Request,
    *,
    prefix: tuple[Any, ...] | None = None,
) -> list[Change]:
    """What turns ``parent``'s state (a request, or a state mapping) into ``new``'s, in
    `REQUEST_KEYS` order.

    ``parent=None`` means the parent's state is not known (no longer held): every key is written
    whole, and every key this call lacks is deleted, so the fold is right whatever the parent held.
    ``prefix``: a tuple ``new.messages`` was built to start with (the emit path appends a call's
    new messages to the very tuple of the run's last call): when it is the parent's messages, the
    append is known without comparing them again.
    """
    # The diff only reads the states: the requests' own tuples, no copies.
    state = new.set_fields()
    before_state = parent.set_fields() if isinstance(parent, Request) else parent
    out: list[Change] = []
    for key in REQUEST_KEYS:
        value = state.get(key)
        if before_state is None:
            out.append(Change(key, "set" if value is not None else "delete", value))
            continue
        before = before_state.get(key)
        if value is None:
            if before is not None:
                out.append(Change(key, "delete", None))
            continue
        if key == "messages" and prefix is not None and before is prefix:
            if len(value) > len(before):
                out.append(Change(key, "append", list(value[len(before) :])))
            continue
        if before is not None and _same(before, value):
            continue
        if key == "messages" and isinstance(before, list | tuple) and _is_prefix(before, value):
            out.append(Change(key, "append", list(value[len(before) :])))
        else:
            out.append(Change(key, "set", value))
    return out


def _same(before: Any, value: Any) -> bool:
    if isinstance(before, list | tuple) and isinstance(value, list | tuple):
        return len(before) == len(value) and _is_prefix(before, value)
    return bool(before is value or before == value)


def _is_prefix(before: list[Any] | tuple[Any, ...], value: Sequence[Any]) -> bool:
    if len(before) > len(value):
        return False
    return identical_prefix(before, value) == len(before) or all(
        a is b or a == b for a, b in zip(before, value, strict=False)
    )


def event_attributes(
    change: Change,
    seq: int,
    settings: Settings,
    mode: WriteMode,
    items: StoredItems,
) -> dict[str, Any]:
    """One commit's event attributes, written the call's way (``mode``, see
    `Settings.write_mode`): ``inline`` puts the payload on the event up to the inline limit and
    stores larger ones; ``store`` stores every payload, the event holds its size and address.
    A ``messages`` payload holding turns other calls were sent goes message by message
    through ``items``, so what the store holds already is not written again.

    ``none`` writes key, verb and size only (no value, no ref): the reader sees which keys changed
    when, and that the content was withheld on purpose. A store that fails, or could not be
    opened, leaves the same shape (logged once): an outage costs the payload, never the span or
    its receipt, and never puts on the event a payload meant for the store."""
    attrs: dict[str, Any] = {
        names.COMMIT_SEQ: seq,
        names.COMMIT_KEY: change.key,
        names.COMMIT_VERB: change.verb,
    }
    if change.verb == "delete":
        attrs[names.COMMIT_BYTES] = 0
        return attrs
    data = canonical_json(change.payload)
    attrs[names.COMMIT_BYTES] = len(data)
    if mode == "none":
        return attrs
    if mode == "inline" and (len(data) <= settings.inline_limit or settings.store is None):
        # Over the limit with no store: keep the record whole rather than lose the payload.
        attrs[names.COMMIT_VALUE] = data.decode("utf-8")
        return attrs
    if settings.store is None:
        return attrs
    try:
        if change.key == "messages" and _answers(change.payload) > 1:
            # A payload holding more than the answer to its parent holds turns other calls
            # (other workers, likely) were sent, whose messages the store may hold already:
            # stored message by message (af_otel.store.items), they are not written again. The
            # usual payload (the parent's answer and what follows) costs one blob.
            attrs[names.COMMIT_REF] = settings.store.put_json(
                items.put(settings.store, change.payload)
            )
        else:
            attrs[names.COMMIT_REF] = settings.store.put(data)
    except (StoreError, OSError) as exc:
        report("store", exc)
        return attrs
    note_written(settings.store)
    return attrs


def _answers(messages: Any) -> int:
    return sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant")
