"""The gaps of one served view that its span and rebuilt values decide: the receipt's, the
unrecorded fields', the request rules' (`af_otel.model.gap_rules`, which the writer applies too),
server-held history, and the kinds taken from the writer's own ``af.gaps``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Final

from af_otel import names
from af_otel.model import FrozenDict
from af_otel.model.fields import order_fields
from af_otel.model.gap_rules import request_gaps
from af_otel.model.request import REQUEST_KEYS
from af_otel.reader.epochs import minted_from_wire
from af_otel.reader.fold import UNKNOWN
from af_otel.reader.gaps import CAUSE_NOT_COMMITTED, CAUSE_SHAPE_REJECTED, Gap, gap
from af_otel.reader.held import HeldCall, held_detail
from af_otel.reader.records import SpanRecord
from af_otel.receipts import MalformedReceipt, Receipt

__all__ = ["common_gaps", "not_on_record", "on_record_gap", "unrecorded_of"]

_NOT_ON_RECORD: Final = "not on record: "

# Gap kinds the writer records that the reader adds to its own findings. Kinds the reader finds
# itself from the record (base, missing spans, receipts, limits) are decided by the reader alone
# (here and in `af_otel.reader.view`);
# the writer's word is taken for what the reader cannot see: what stood between it and the wire,
# and a call it could not place in start order.
_TAKEN_FROM_WRITER: Final = frozenset(
    {
        names.GAP_NO_RUN_LOG,
        names.GAP_CACHE_TRANSFORM,
        names.GAP_THINKING_REPLAY,
        names.GAP_FORCED_TOOL_SCHEMA,
        names.GAP_PROVIDER_DEFAULTS,
        names.GAP_SPAN_LIMITS,
        names.GAP_WIRE_ATTEMPTS_DIFFER,
        names.GAP_WIRE_BODY_EVICTED,
    }
)


def _recorded_gaps(span: SpanRecord) -> tuple[frozenset[str], bool]:
    value = span.attributes.get(names.GAPS)
    if isinstance(value, tuple):
        return frozenset(v for v in value if isinstance(v, str)), True
    if isinstance(value, str):  # a backend that flattened the array to one string
        return frozenset({value}), True
    return frozenset(), False


def unrecorded_of(span: SpanRecord) -> tuple[str, ...]:
    value = span.attributes.get(names.RECEIPT_UNRECORDED)
    if isinstance(value, str):  # a backend that flattened a one-item array
        value = (value,)
    if not isinstance(value, tuple):
        return ()
    # Every span an instrumentation writes names the same few fields: ordered once per list.
    if all(type(v) is str for v in value):
        return _ordered(value)
    return order_fields(v for v in value if isinstance(v, str) and v)


@functools.lru_cache(maxsize=256)
def _ordered(value: tuple[str, ...]) -> tuple[str, ...]:
    return order_fields(v for v in value if v)


def on_record_gap(missing: Sequence[str]) -> Gap | None:
    """`no-conversation-on-record` naming the request keys not on record, or None for none."""
    return gap(names.GAP_NO_CONVERSATION, _NOT_ON_RECORD + ", ".join(missing)) if missing else None


def not_on_record(gaps: Sequence[Gap]) -> tuple[str, ...]:
    """The request keys a view's `no-conversation-on-record` names (`on_record_gap`)."""
    for found in gaps:
        if found.kind == names.GAP_NO_CONVERSATION and found.detail.startswith(_NOT_ON_RECORD):
            return tuple(found.detail.removeprefix(_NOT_ON_RECORD).split(", "))
    return ()


def _receipt_gap(receipt: Receipt | MalformedReceipt | None) -> Gap | None:
    if receipt is None:
        return gap(names.GAP_NO_RECEIPT, "the span carries no receipt", CAUSE_NOT_COMMITTED)
    if isinstance(receipt, MalformedReceipt):
        return gap(names.GAP_NO_RECEIPT, receipt.reason, CAUSE_SHAPE_REJECTED)
    if not receipt.minted:
        why = receipt.absent_reason or "no reason given"
        return gap(names.GAP_NO_RECEIPT, f"receipt {receipt.state}: {why}", CAUSE_NOT_COMMITTED)
    return None


def common_gaps(
    span: SpanRecord,
    receipt: Receipt | MalformedReceipt | None,
    values: Mapping[str, Any],
    params: FrozenDict | None,
    tools: Sequence[FrozenDict] | None,
    sealed: bool,
    unrecorded: tuple[str, ...] = (),
    held: tuple[tuple[HeldCall, ...], str | None] = ((), None),
) -> list[Gap]:
    found: list[Gap] = []
    recorded, has_recorded = _recorded_gaps(span)
    if names.GAP_HELD_HISTORY in recorded:
        found.append(gap(names.GAP_HELD_HISTORY, held_detail(span, *held)))
        if len(held[0]) == 1 and held[0][0].epoch is None:
            # The response this call continues is one no call on record got: the same hole as
            # a model turn no call gave, when the record names the missing call's answer.
            lost = held[0][0].response_id
            found.append(
                gap(
                    names.GAP_UNRECORDED_CALL,
                    f"continues {lost}, which no call on this run's record answered: a call of "
                    "this run with no span, or a response made outside this run's record",
                )
            )
    if unrecorded:
        by = span.scope or "the instrumentation"
        found.append(gap(names.GAP_UNRECORDED, f"not recorded by {by}: " + ", ".join(unrecorded)))
    minted = isinstance(receipt, Receipt) and receipt.minted
    missing = on_record_gap([k for k in REQUEST_KEYS if values.get(k) is UNKNOWN])
    if missing is not None:
        found.append(missing)
    no_receipt = _receipt_gap(receipt)
    if no_receipt is not None:
        found.append(no_receipt)
    if not minted or not has_recorded or names.GAP_CACHE_TRANSFORM in recorded:
        found.append(gap(names.GAP_CACHE_TRANSFORM))
    provider, model = values.get("provider"), values.get("model")
    found += (
        gap(kind, detail)
        for kind, detail in request_gaps(
            params,
            tools,
            provider=provider if isinstance(provider, str) else None,
            model=model if isinstance(model, str) else None,
            sealed=sealed,
            minted=minted,
            unrecorded=unrecorded,
        )
    )
    taken = recorded & _TAKEN_FROM_WRITER
    if minted_from_wire(span.attributes):
        # The writer's span-limits on such a call says what the span's dropped counts say (the
        # instrumentation's attributes were cut), which is no cut of this call's evidence; the
        # reader weighs those counts itself (`span_cut`).
        taken -= {names.GAP_SPAN_LIMITS}
    for kind in sorted(taken):
        found.append(gap(kind, "recorded by the writer"))
    return found
