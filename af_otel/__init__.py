"""af_otel: receipts for LLM calls on OpenTelemetry spans, and a reader that turns traces into evidence.

The public surface is what ``__all__`` lists (CONTRACT §8); everything else is internal.
"""

from af_otel.canonical import canonical_json, receipt_hash
from af_otel.errors import AfOtelError, CanonicalJSONError
from af_otel.model import Request
from af_otel.receipts import Receipt, ReceiptDigests, ReceiptRejected, mint_receipt

__all__ = [
    "AfOtelError",
    "CanonicalJSONError",
    "Receipt",
    "ReceiptDigests",
    "ReceiptRejected",
    "Request",
    "canonical_json",
    "mint_receipt",
    "receipt_hash",
]
