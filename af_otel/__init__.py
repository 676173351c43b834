"""af_otel: receipts for LLM calls on OpenTelemetry spans, and a reader that turns traces into evidence.

The public surface is what ``__all__`` lists; everything else is internal.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

from af_otel.canonical import canonical_json, receipt_hash
from af_otel.errors import (
    AfOtelError,
    BlobDamagedError,
    BlobNotFoundError,
    BlobShapeError,
    CanonicalJSONError,
    InvalidAddressError,
    ReaderError,
    ReplayRefusedError,
    RequestShapeError,
    SourceError,
    StoreError,
    TraceNotFoundError,
    UnknownFormatError,
)
from af_otel.model import Request
from af_otel.model.conversation import Conversation
from af_otel.model.gap_kinds import SERVED_GAPS
from af_otel.reader.policy import Policy, judge
from af_otel.reader.replay import replay_request
from af_otel.reader.sources import read_spans
from af_otel.reader.verify import Verdict, VerdictStatus, verify
from af_otel.reader.view import ServedView, served_views
from af_otel.receipts import MalformedReceipt, Receipt, ReceiptDigests, mint_receipt

if TYPE_CHECKING:
    from af_otel.processor import (
        ReceiptSpanExporter,
        ReceiptSpanProcessor,
        RunTagger,
        completion_hook,
        llm_call,
        run,
    )

# The emit side imports the OpenTelemetry SDK; it loads on first use so that the pure core
# (canonical, model, receipts) imports without OpenTelemetry installed.
_EMIT = frozenset(
    {
        "ReceiptSpanExporter",
        "ReceiptSpanProcessor",
        "RunTagger",
        "completion_hook",
        "llm_call",
        "run",
    }
)

__all__ = [
    "SERVED_GAPS",
    "AfOtelError",
    "BlobDamagedError",
    "BlobNotFoundError",
    "BlobShapeError",
    "CanonicalJSONError",
    "Conversation",
    "InvalidAddressError",
    "MalformedReceipt",
    "Policy",
    "ReaderError",
    "Receipt",
    "ReceiptDigests",
    "ReceiptSpanExporter",
    "ReceiptSpanProcessor",
    "ReplayRefusedError",
    "Request",
    "RequestShapeError",
    "RunTagger",
    "ServedView",
    "SourceError",
    "StoreError",
    "TraceNotFoundError",
    "UnknownFormatError",
    "Verdict",
    "VerdictStatus",
    "canonical_json",
    "completion_hook",
    "judge",
    "llm_call",
    "mint_receipt",
    "read_spans",
    "receipt_hash",
    "replay_request",
    "run",
    "served_views",
    "verify",
]


def __getattr__(name: str) -> Any:
    if name in _EMIT:
        return getattr(import_module("af_otel.processor"), name)
    raise AttributeError(f"module 'af_otel' has no attribute {name!r}")


def __dir__() -> list[str]:
    # The lazily loaded emit names are listed before their first use, like every other name; the
    # helpers this module imports for itself (`Any`, `import_module`) are not listed.
    own = {
        name
        for name, value in globals().items()
        if name.startswith("_") or isinstance(value, ModuleType)
    }
    return sorted(own | set(__all__))
