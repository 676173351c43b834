"""Receipts: `mint_receipt` and the run-scoped digest memo — pure functions, no OpenTelemetry."""

from af_otel.receipts.memo import ReceiptDigests, chain_start, chain_step, same_json
from af_otel.receipts.mint import (
    ReceiptContext,
    digest_preimage,
    list_bytes,
    mint_receipt,
    receipt_digest,
    request_bytes,
    seal_receipt,
)
from af_otel.receipts.receipt import MalformedReceipt, Receipt

__all__ = [
    "MalformedReceipt",
    "Receipt",
    "ReceiptContext",
    "ReceiptDigests",
    "chain_start",
    "chain_step",
    "digest_preimage",
    "list_bytes",
    "mint_receipt",
    "receipt_digest",
    "request_bytes",
    "same_json",
    "seal_receipt",
]
