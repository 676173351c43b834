"""The committed af-2 golden vectors (tests/receipts/golden/af-2.json, computed by the independent
reference minter) are what af_otel mints and reads back, and af-1's committed hash vectors stay
reproducible through the public API with ``scheme="af-1"``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from af_otel import mint_receipt, names, receipt_hash
from af_otel.canonical import key_id
from af_otel.receipts import Receipt, ReceiptContext, receipt_digest

GOLDEN = json.loads((Path(__file__).parent / "golden" / "af-2.json").read_text("utf-8"))
AF1 = json.loads(
    (Path(__file__).parents[1] / "canonical" / "golden" / "receipt-hash.json").read_text("utf-8")
)


@pytest.mark.parametrize("case", GOLDEN["hashes"], ids=lambda case: case["salt"] + case["text"])
def test_af2_hash_vectors(case: dict[str, Any]) -> None:
    """Each af-2 hash vector is receipt_hash(..., scheme="af-2")."""
    got = receipt_hash(case["salt"], case["text"], key=case["key"], scheme="af-2")
    assert got == case["h2"]


@pytest.mark.parametrize("case", AF1["hashes"], ids=lambda case: case["salt"] + case["text"])
def test_af1_hash_vectors_through_the_public_api(case: dict[str, Any]) -> None:
    """agentfootprint's af-1 vectors come back from receipt_hash with scheme="af-1", and from its
    default (af-1, so that values computed before af-2 keep their meaning)."""
    key = bytes.fromhex(case["key_hex"]) if case["key_hex"] is not None else None
    assert receipt_hash(case["salt"], case["text"], key=key, scheme="af-1") == case["h"]
    assert receipt_hash(case["salt"], case["text"], key=key) == case["h"]


def test_key_id_vectors() -> None:
    assert {secret: key_id(secret) for secret in GOLDEN["key_ids"]} == GOLDEN["key_ids"]


@pytest.mark.parametrize("case", GOLDEN["receipts"], ids=lambda case: str(case["key"]))
def test_af2_receipts_mint_and_read_back(case: dict[str, Any]) -> None:
    """The golden parent and child receipts are what mint_receipt mints in that span context;
    read back from their attributes, their digests recompute."""
    span = GOLDEN["span"]
    context = ReceiptContext(
        gaps=tuple(span[names.GAPS]),
        scope_name=span[names.RECEIPT_SCOPE_NAME],
        scope_version=span[names.RECEIPT_SCOPE_VERSION],
    )
    request = GOLDEN["request"]
    place = {"run_id": GOLDEN["run_id"], "lane": GOLDEN["lane"], "key": case["key"]}
    first = {**request, "messages": request["messages"][:1]}
    parent = mint_receipt(first, epoch=1, context=context, **place)
    child = mint_receipt(request, epoch=2, parent=parent, context=context, **place)
    assert parent.to_attributes() == case["parent"]
    assert child.to_attributes() == case["receipt"]
    for epoch, parent_epoch, attributes in ((1, 0, case["parent"]), (2, 1, case["receipt"])):
        on_span = {
            **attributes,
            **span,
            names.RUN_ID: GOLDEN["run_id"],
            names.EPOCH: epoch,
            names.EPOCH_PARENT: parent_epoch,
            names.EPOCH_LANE: GOLDEN["lane"],
        }
        read = Receipt.from_attributes(on_span)
        assert isinstance(read, Receipt)
        assert receipt_digest(read, key=case["key"]) == attributes[names.RECEIPT_DIGEST]
