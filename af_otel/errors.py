"""Typed errors of the read path and of canonical JSON; the emit path never raises.

AfOtelError
├── CanonicalJSONError      a value JSON cannot hold (NaN, cycle, bytes, non-str key, object)
├── RequestShapeError       a request dict that is not GenAI-shaped (messages not a list, ...)
├── StoreError              the store refused an address or failed on I/O
│   ├── InvalidAddressError an address that is not `sha256:` + 64 lowercase hex
│   ├── BlobNotFoundError   nothing stored at that address
│   └── BlobDamagedError    bytes whose hash differs from their address
│       └── BlobShapeError  bytes that hash right but are not what the reference promised
├── SourceError             a span source could not be read (names file and line, or URL)
│   ├── UnknownFormatError  the input is in no format the reader knows
│   └── TraceNotFoundError  the backend answered that it has no such trace
└── ReaderError             spans were read but a request of the caller cannot be served
    └── ReplayRefusedError  the record cannot rebuild a call's request body (names the gap)
"""

from __future__ import annotations


class AfOtelError(Exception):
    """Root of every error af_otel raises on purpose."""


class CanonicalJSONError(AfOtelError, ValueError):
    """The value cannot be written as RFC 8785 canonical JSON."""


class RequestShapeError(AfOtelError, ValueError):
    """A request dict is not GenAI-shaped; the message names the offending field."""


class StoreError(AfOtelError):
    """The content-addressed store failed."""


class InvalidAddressError(StoreError, ValueError):
    """An address is not of the form ``sha256:<64 lowercase hex>``."""


class BlobNotFoundError(StoreError, KeyError):
    """No blob is stored at the address."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else "blob not found"


class BlobDamagedError(StoreError):
    """The stored bytes do not hash to their address: damage, never truth."""


class BlobShapeError(BlobDamagedError):
    """The stored bytes hash to their address but are not what the reference to them promised:
    not JSON, or not the shape its place needs (a chunk that is not a list of message
    references). Damage too: such a blob was put there and a record pointed at it."""


class SourceError(AfOtelError):
    """A span source could not be read; the message names the file and line, or the URL."""


class UnknownFormatError(SourceError):
    """The input is in no format the reader knows; the message says what was expected."""


class TraceNotFoundError(SourceError):
    """The backend answered that it has no trace of that id (Tempo's or Jaeger's 404, no span
    of it in the Phoenix project); the message names the URL. A backend that failed is a plain
    `SourceError`."""


class ReaderError(AfOtelError):
    """Spans were read, but the caller's request cannot be served (unknown run, epoch, ...)."""


class ReplayRefusedError(ReaderError):
    """The record cannot rebuild a call's request body (`af_otel.replay_request`); the message
    names the span, run and epoch and the gap (or verdict) that says why."""
