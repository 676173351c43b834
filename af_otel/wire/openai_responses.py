"""OpenAI Responses (``POST .../responses``): not read from the wire yet, so a call to it keeps
the instrumentation's record (``af.receipt.source = instrumentation``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from af_otel.wire.shapes import WireRead


def read(body: Mapping[str, Any]) -> WireRead | None:
    return None
