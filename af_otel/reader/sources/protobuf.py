"""The Collector file exporter's length-prefixed format: 4-byte big-endian size, then one request.

With ``format: proto`` each record is a serialized ``ExportTraceServiceRequest`` (wire-identical to
``TracesData``); with a JSON ``encoding`` the same framing carries OTLP JSON, which is accepted
too. Records are read one at a time, so memory follows the largest record, not the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any, BinaryIO, Final, cast

import orjson

from af_otel.reader.records import SpanRecord
from af_otel.reader.sources.documents import document_records
from af_otel.reader.sources.otlp import resource_spans_records
from af_otel.reader.sources.stream import SpanStream

__all__ = ["framed_records", "looks_length_prefixed", "proto_records"]

_PREFIX: Final = 4
# A record's first byte: field 1 (resource_spans), wire type 2 (length-delimited) = 0x0A; or `{`
# when the framing carries JSON.
_FIRST_BYTES: Final = (0x0A, ord("{"))


def looks_length_prefixed(head: bytes, size: int) -> bool:
    """Whether a file starting with ``head`` (of ``size`` bytes in all) is length-prefixed OTLP."""
    if len(head) < _PREFIX + 1:
        return False
    length = int.from_bytes(head[:_PREFIX], "big")
    return 0 < length <= size - _PREFIX and head[_PREFIX] in _FIRST_BYTES


def framed_records(
    file: IO[bytes], name: str, size: int, stream: SpanStream
) -> Iterator[tuple[str, bytes]]:
    """Each whole length-prefixed record of ``file`` (``size`` bytes long) with where it is
    (``spans.pb:3``, numbered like lines). A record cut short (a file still being written, or
    copied part way) is a problem of ``stream`` naming the file, the record and its byte offset,
    and ends the reading: no later boundary can be trusted. The one reading of the framing, for
    the reader and for ``af-otel audit``."""
    offset = 0
    number = 0
    while True:
        prefix = file.read(_PREFIX)
        if not prefix:
            return
        number += 1
        origin = f"{name}:{number}"
        if len(prefix) < _PREFIX:
            stream.problem(
                f"{origin}: truncated length prefix at byte {offset} ({len(prefix)} of 4 bytes)",
                unit="line",
            )
            return
        length = int.from_bytes(prefix, "big")
        available = size - offset - _PREFIX
        if length > available:
            stream.problem(
                f"{origin}: truncated record at byte {offset}: the prefix announces {length} "
                f"bytes, {max(available, 0)} remain",
                unit="line",
            )
            return
        body = file.read(length)
        if len(body) < length:  # the file shrank, or its size was a compressed one's guess
            stream.problem(
                f"{origin}: truncated record at byte {offset}: the prefix announces {length} "
                f"bytes, {len(body)} remain",
                unit="line",
            )
            return
        offset += _PREFIX + length
        yield origin, body


def proto_records(file: BinaryIO, name: str, size: int, stream: SpanStream) -> Iterator[SpanRecord]:
    """Yield the records of every length-prefixed request in ``file`` (``size`` bytes long).

    Origins and messages number the records like lines: ``spans.pb:3`` is the third record. A
    record cut short ends the reading (`framed_records`); an undecodable record whose length is
    intact is skipped when lenient.
    """
    for origin, body in framed_records(file, name, size, stream):
        if body[:1] == b"{":
            try:
                doc = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                stream.problem(f"{origin}: invalid JSON ({exc})", unit="line")
                continue
            yield from document_records(doc, origin, stream)
            continue
        # proto3 JSON of the message is the dialect the OTLP decoder already reads (base64 ids,
        # enum names, int64 as strings): one decoder for every OTLP-shaped input.
        as_json = request_document(body, origin, stream)
        if as_json is not None:
            yield from resource_spans_records(as_json.get("resourceSpans"), origin, stream)


def request_document(body: bytes, origin: str, stream: SpanStream) -> dict[str, Any] | None:
    """One ExportTraceServiceRequest's bytes as its proto3 JSON document, or None with the problem
    named on ``stream`` (raised, or counted when lenient) when they do not decode."""
    # Imported here, not at the top (PLC0415): only this format needs protobuf, which comes with
    # the OTLP exporter, and the JSON sources must load without OpenTelemetry. protobuf ships no
    # type information (import-untyped).
    from google.protobuf import json_format, message  # type: ignore[import-untyped] # noqa: PLC0415
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: PLC0415

    request = trace_service_pb2.ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except message.DecodeError as exc:
        stream.problem(f"{origin}: not a protobuf ExportTraceServiceRequest ({exc})", unit="line")
        return None
    return cast("dict[str, Any]", json_format.MessageToDict(request))
