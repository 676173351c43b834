"""Span records built by hand, as the contract says the writer builds them: receipts from the real
`mint_receipt`, commit events diffing each call's request against its parent's. For trees and
shapes the SDK pipeline does not make on demand (random trees, a writer that lost its parent)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from af_otel import names
from af_otel.canonical import canonical_json
from af_otel.model import Request
from af_otel.model.request import REQUEST_KEYS
from af_otel.reader.records import EventRecord, SpanKind, SpanRecord
from af_otel.receipts import Receipt, ReceiptContext, mint_receipt
from af_otel.store import Store


def _hex(text: str, digits: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:digits]


def _attr(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    out: list[tuple[str, str, Any]] = []
    for key in REQUEST_KEYS:
        old, new = before.get(key), after.get(key)
        if new is None:
            if old is not None:
                out.append((key, "delete", None))
            continue
        if old is not None and canonical_json(old) == canonical_json(new):
            continue
        if key == "messages" and old is not None and list(new[: len(old)]) == list(old):
            out.append((key, "append", list(new[len(old) :])))
        else:
            out.append((key, "set", new))
    return out


def synthetic_run(
    run_id: str,
    requests: Sequence[Mapping[str, Any]],
    parents: Sequence[int],
    *,
    base: Mapping[str, Any] | None = None,
    store: Store | None = None,
    inline_limit: int = 1024,
    key: bytes | None = None,
    forget_parent: Sequence[int] = (),
    source: str = names.SOURCE_INSTRUMENTATION,
) -> tuple[SpanRecord, ...]:
    """One span per request; ``parents[i]`` is request i+1's parent epoch (0: the base).

    ``forget_parent`` lists epochs minted as a writer that no longer held its parent's receipt
    does (``kept`` = 0, every key written whole); ``source`` is where the writer read each
    request (``af.receipt.source``, bound by af-2)."""
    states: dict[int, Mapping[str, Any]] = {0: {"messages": []}}
    receipts: dict[int, Receipt | None] = {0: None}
    base_address = None
    if base is not None:
        request = Request.from_dict(base)
        states[0] = request.to_dict()
        assert store is not None
        base_address = store.put_json(states[0])
        receipts[0] = mint_receipt(request, run_id=run_id, epoch=0, key=key)
    trace_id = _hex(run_id, 32)
    spans = []
    seq = 0
    for epoch, (raw, parent) in enumerate(zip(requests, parents, strict=True), start=1):
        request = Request.from_dict(raw)
        forgot = epoch in forget_parent
        parent_receipt = None if forgot else receipts[parent]
        receipt = mint_receipt(
            request,
            run_id=run_id,
            epoch=epoch,
            parent=parent_receipt if parent_receipt is not None else parent,
            key=key,
            context=ReceiptContext(
                base=base_address, source=source
            ),  # the span's af.run.base, bound by af-2
        )
        state = request.to_dict()
        before: Mapping[str, Any] = {} if forgot else states[parent]
        events = []
        for k, verb, payload in diff(before, state):
            seq += 1
            attrs: dict[str, Any] = {
                names.COMMIT_SEQ: seq,
                names.COMMIT_KEY: k,
                names.COMMIT_VERB: verb,
            }
            if verb != "delete":
                data = canonical_json(payload)
                attrs[names.COMMIT_BYTES] = len(data)
                if len(data) <= inline_limit or store is None:
                    attrs[names.COMMIT_VALUE] = data.decode()
                else:
                    attrs[names.COMMIT_REF] = store.put(data)
            else:
                attrs[names.COMMIT_BYTES] = 0
            events.append(EventRecord(names.COMMIT_EVENT, 1_000 * epoch + seq, attrs))
        states[epoch], receipts[epoch] = state, receipt
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            names.RUN_ID: run_id,
            names.EPOCH: epoch,
            names.EPOCH_PARENT: parent,
            **{k: _attr(v) for k, v in receipt.to_attributes().items()},
            names.GAPS: (),
            names.GAP_NO_RECEIPT_ON_CHART: False,
        }
        if base_address is not None:
            attributes[names.RUN_BASE] = base_address
        spans.append(
            SpanRecord(
                trace_id=trace_id,
                span_id=_hex(f"{run_id}/{epoch}", 16),
                parent_span_id=None,
                name=f"chat {request.model}",
                kind=SpanKind.CLIENT,
                start_ns=1_000_000 * epoch,
                end_ns=1_000_000 * epoch + 500,
                attributes=attributes,
                events=tuple(events),
                resource={"service.name": "synthetic"},
                origin=f"synthetic[{epoch}]",
            )
        )
    return tuple(spans)
