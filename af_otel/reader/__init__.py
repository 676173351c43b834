"""The read path: exported spans (files, Tempo, Jaeger, the SDK) become span records, then runs and views.

``records`` holds the OTel-free span values every later step works on; ``sources`` turns each
export format into those values and is the only part of the reader that does I/O.
"""

from __future__ import annotations

from af_otel.model.gap_kinds import SERVED_GAPS, GapKind
from af_otel.reader.blobs import BlobDamage
from af_otel.reader.closes import RunEnd
from af_otel.reader.fold import KeyedFold
from af_otel.reader.gaps import UNGAPPED_FIELDS, Gap
from af_otel.reader.policy import Breach, Gate, Outcome, Policy, judge
from af_otel.reader.verify import Mismatch, Verdict, VerdictStatus, recompute, verify
from af_otel.reader.view import ServedView, served_views

__all__ = [
    "SERVED_GAPS",
    "UNGAPPED_FIELDS",
    "BlobDamage",
    "Breach",
    "Gap",
    "GapKind",
    "Gate",
    "KeyedFold",
    "Mismatch",
    "Outcome",
    "Policy",
    "RunEnd",
    "ServedView",
    "Verdict",
    "VerdictStatus",
    "judge",
    "recompute",
    "served_views",
    "verify",
]
