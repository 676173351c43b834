"""The wire tap (docs/processor.md): the exact request body an LLM client sends over ``httpx`` or
``httpx2``, paired with its LLM span (the current one, the one started last where it was
sent, or one of its trace that claims it when it ends: `af_otel.wire.loose`), and read by a per-endpoint reader into the normalized request that receipts are minted
from. Nothing here imports OpenTelemetry: the processor hands the tap the span's key."""

from __future__ import annotations

from af_otel.wire.endpoints import ANTHROPIC_MESSAGES, OPENAI_CHAT, OPENAI_RESPONSES, endpoint_of
from af_otel.wire.read import read_body
from af_otel.wire.sent import Sent
from af_otel.wire.shapes import WireRead
from af_otel.wire.tap import SENT, install, installed, note, release, uninstall

__all__ = [
    "ANTHROPIC_MESSAGES",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "SENT",
    "Sent",
    "WireRead",
    "endpoint_of",
    "install",
    "installed",
    "note",
    "read_body",
    "release",
    "uninstall",
]
