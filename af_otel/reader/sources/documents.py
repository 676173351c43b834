"""Which export a parsed JSON document is, told by its top-level key, and its records.

Every JSON shape the reader knows has one distinguishing top key, so a document read from a file,
a line of a JSON-lines file, or a body fetched over HTTP is dispatched the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Final

from af_otel.errors import UnknownFormatError
from af_otel.reader.records import SpanRecord
from af_otel.reader.sources.jaeger import jaeger_v1_records, jaeger_v3_records
from af_otel.reader.sources.otlp import resource_spans_records
from af_otel.reader.sources.phoenix import phoenix_records
from af_otel.reader.sources.stream import SourceFormat, SpanStream, expected_formats
from af_otel.reader.sources.tempo import tempo_v1_records, tempo_v2_records

__all__ = ["document_format", "document_records", "open_document"]

_Decoder = Callable[[Mapping[str, object], str, SpanStream], Iterator[SpanRecord]]


def _otlp(doc: Mapping[str, object], origin: str, stream: SpanStream) -> Iterator[SpanRecord]:
    if "resourceSpans" in doc:
        return resource_spans_records(doc["resourceSpans"], origin, stream)
    return resource_spans_records(doc.get("resource_spans"), origin, stream, "resource_spans")


# Checked in order; the first key present decides.
_SHAPES: Final[tuple[tuple[str, SourceFormat, _Decoder], ...]] = (
    ("resourceSpans", SourceFormat.OTLP_JSON, _otlp),
    ("resource_spans", SourceFormat.OTLP_JSON, _otlp),  # the proto field name, equally valid
    ("batches", SourceFormat.TEMPO_V1, tempo_v1_records),
    ("trace", SourceFormat.TEMPO_V2, tempo_v2_records),
    ("result", SourceFormat.JAEGER_V3, jaeger_v3_records),
    ("next_cursor", SourceFormat.PHOENIX, phoenix_records),  # before Jaeger's "data"
    ("data", SourceFormat.JAEGER_V1, jaeger_v1_records),
)


def _shape(doc: object) -> tuple[SourceFormat, _Decoder | None] | None:
    """The format of a parsed document and its decoder, or None when it is none the reader knows.

    ``{}`` is an OTLP request with no spans (proto3 JSON leaves an empty list out): no decoder.
    """
    if not isinstance(doc, Mapping):
        return None
    if not doc:
        return SourceFormat.OTLP_JSON, None
    return next(((fmt, decode) for key, fmt, decode in _SHAPES if key in doc), None)


def document_format(doc: object) -> SourceFormat | None:
    """The format of a parsed document, or None when it is none the reader knows."""
    found = _shape(doc)
    return found[0] if found is not None else None


def _unknown(doc: object, origin: str) -> str:
    """What is said of a document in no known format: a short description and what was expected."""
    if isinstance(doc, Mapping):
        what = f"a JSON object with keys {', '.join(repr(k) for k in list(doc)[:5])}"
    else:
        what = f"a JSON {type(doc).__name__}"
    return (
        f"{origin}: {what} is in no format the reader knows; expected one of: {expected_formats()}"
    )


def document_records(doc: object, origin: str, stream: SpanStream) -> Iterator[SpanRecord]:
    """Yield the records of one document; an unknown shape is a problem of its line."""
    found = _shape(doc)
    if found is None or not isinstance(doc, Mapping):
        stream.problem(_unknown(doc, origin), unit="line", error=UnknownFormatError)
        return
    decoder = found[1]
    if decoder is not None:
        yield from decoder(doc, origin, stream)


def open_document(doc: object, origin: str, *, lenient: bool) -> SpanStream:
    """A stream over one whole document; an unknown shape raises at once, lenient or not."""
    fmt = document_format(doc)
    if fmt is None:
        raise UnknownFormatError(_unknown(doc, origin))
    stream = SpanStream(origin, fmt, lenient=lenient)
    return stream.feed(document_records(doc, origin, stream))
