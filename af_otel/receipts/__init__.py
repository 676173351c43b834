"""Receipts: `mint_receipt` and the run-scoped digest memo — pure functions, no OpenTelemetry."""

from af_otel.receipts.memo import ReceiptDigests, WorkCounts, same_json
from af_otel.receipts.mint import digest_preimage, mint_receipt, receipt_digest
from af_otel.receipts.receipt import Receipt, ReceiptRejected

__all__ = [
    "Receipt",
    "ReceiptDigests",
    "ReceiptRejected",
    "WorkCounts",
    "digest_preimage",
    "mint_receipt",
    "receipt_digest",
    "same_json",
]
