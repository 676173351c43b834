"""Span sources: every export format and backend the reader knows, read into ``SpanRecord`` values.

``read_spans`` takes whatever the user has (a file path, a parsed document, the SDK's in-memory
spans) and works out the format from the content; ``TempoSource``, ``JaegerSource`` and
``PhoenixSource`` fetch a trace by id, or every trace of a time ``Window``; ``ClickHouseSource``
reads the Collector ClickHouse exporter's table (every span, a trace, or a window). Each of those
and ``FileSource`` is a ``Source``: asked for ``AllSpans``, ``OneTrace`` or ``InWindow``, it answers with
a ``SpanStream`` (``source.py``). This package and ``store/`` are the only places that do I/O.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from itertools import chain

from af_otel.errors import UnknownFormatError
from af_otel.reader.sources.clickhouse import ClickHouseSource
from af_otel.reader.sources.documents import open_document
from af_otel.reader.sources.files import read_file
from af_otel.reader.sources.jaeger import ARRAY_KEYS, JaegerSource
from af_otel.reader.sources.phoenix import PhoenixSource
from af_otel.reader.sources.sdk import is_readable_span, sdk_records
from af_otel.reader.sources.source import AllSpans, Ask, InWindow, OneTrace, Source
from af_otel.reader.sources.stream import (
    NoteKind,
    SourceFormat,
    SourceNote,
    SpanStream,
    expected_formats,
)
from af_otel.reader.sources.tempo import TempoSource
from af_otel.reader.sources.trace_file import FileSource
from af_otel.reader.sources.window import Window

__all__ = [
    "ARRAY_KEYS",
    "AllSpans",
    "Ask",
    "ClickHouseSource",
    "FileSource",
    "InWindow",
    "JaegerSource",
    "NoteKind",
    "OneTrace",
    "PhoenixSource",
    "Source",
    "SourceFormat",
    "SourceNote",
    "SpanStream",
    "TempoSource",
    "Window",
    "read_spans",
]


def read_spans(
    source: str | os.PathLike[str] | Mapping[str, object] | Iterable[object],
    *,
    lenient: bool = False,
) -> SpanStream:
    """Read span records lazily from a path, a parsed JSON document, or SDK ``ReadableSpan``s.

    A path may hold OTLP JSON lines (the Collector file exporter, otlp-json-file exporter),
    one JSON document (OTLP; Tempo ``/api/traces``, ``/api/v2/traces``; Jaeger ``/api/v3/traces``,
    ``/api/traces``) or the Collector's length-prefixed protobuf; the content decides, not the
    extension. An ``InMemorySpanExporter`` (or anything with ``get_finished_spans()``) is read too.

    Strict by default: the first bad line, record or span raises ``SourceError`` naming it (file
    and line, span index). With ``lenient=True`` those are skipped and counted on the returned
    stream (``skipped_lines``, ``skipped_spans``, ``problems``). Input in no known format raises
    ``UnknownFormatError`` listing the expected ones, lenient or not.
    """
    if isinstance(source, str | os.PathLike):
        return read_file(os.fspath(source), lenient=lenient)
    if isinstance(source, Mapping):
        return open_document(source, "<document>", lenient=lenient)
    finished = getattr(source, "get_finished_spans", None)
    if callable(finished):
        source = finished()
    if isinstance(source, bytes | bytearray) or not isinstance(source, Iterable):
        raise UnknownFormatError(
            f"cannot read spans from a {type(source).__name__}; pass a path, a parsed JSON "
            f"document or ReadableSpan objects. Expected one of: {expected_formats()}"
        )
    spans = iter(source)
    first = next(spans, None)
    if first is not None and not is_readable_span(first):
        raise UnknownFormatError(
            f"an iterable of {type(first).__name__} holds no ReadableSpan objects; expected one "
            f"of: {expected_formats()}"
        )
    stream = SpanStream("<ReadableSpans>", SourceFormat.SDK, lenient=lenient)
    rest = chain((first,), spans) if first is not None else iter(())
    return stream.feed(sdk_records(rest, stream))
