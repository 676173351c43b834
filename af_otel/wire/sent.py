"""One HTTP attempt at an LLM endpoint as the wire tap keeps it (`Sent`), the key of the span it
is filed under, and how it came under that span: shared by the tap's table of sent bodies
(`af_otel.wire.tap`) and the table of bodies no span was current for (`af_otel.wire.loose`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

Key = tuple[int, int]  # a span's (trace id, span id)

# How a body came to be filed under its span (`Owner`): the span was current while it was sent,
# or it was the span started last in the sending context while another (or none) was current.
VIA_CURRENT: Final = "current"
VIA_STARTED: Final = "started"


@dataclass(frozen=True, slots=True)
class Sent:
    """One HTTP attempt at an LLM endpoint: which endpoint, to which host, with which body; when
    it was sent (wall clock, ns, as span times are), how it came under its span, the path
    (which names the model for Gemini and Bedrock), and the trace it was sent in when no LLM
    span was current (``loose``: kept by that trace too, 0 for none)."""

    endpoint: str
    host: str
    body: bytes
    at: int = field(default=0, compare=False)
    via: str = field(default=VIA_CURRENT, compare=False)
    path: bytes = field(default=b"", compare=False)  # the endpoint says what the call is
    trace: int = field(default=0, compare=False)
    loose: bool = field(default=False, compare=False)
