"""Span files: tell JSON lines, one JSON document and length-prefixed protobuf apart by content.

The extension is not trusted (``.json`` files hold JSON lines as often as documents): the first
non-space byte says JSON or binary, and for JSON whether the first lines parse on their own says
lines or one pretty document. JSON lines and protobuf records are read one at a time; only a
single document is parsed whole, as it must be.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import BinaryIO, Final, Literal

import orjson

from af_otel.errors import SourceError, UnknownFormatError
from af_otel.reader.records import SpanRecord
from af_otel.reader.sources.documents import document_format, document_records, open_document
from af_otel.reader.sources.protobuf import looks_length_prefixed, proto_records
from af_otel.reader.sources.stream import SourceFormat, SpanStream, expected_formats

__all__ = ["read_file"]

_HEAD: Final = 4096
# The read buffer: OTLP JSON lines run to hundreds of KiB (a call's whole prompt is one line),
# and the default 8 KiB buffer makes each line a chain of small reads and copies (reading the
# reader benchmark's 15 MiB file line by line took 16 ms with it, 3 ms with this).
_BUFFER: Final = 2**20
_LOOKAHEAD: Final = 8
# JSON lines are read this many bytes at a time (`_raw_lines`): two reads are held at once (the
# line just read is a view of the last), so half the read buffer keeps the same bound.
_CHUNK: Final = _BUFFER // 2
# A line of nothing but JSON's spaces, its newline included.
_BLANK: Final = re.compile(rb"[ \t\r\n]*\Z")
_SPACE: Final = b" \t\r\n"
_BOM: Final = b"\xef\xbb\xbf"
_COMPRESSED: Final = {
    b"\x28\xb5\x2f\xfd": "zstd-compressed (the file exporter's compression: zstd)",
    b"\x1f\x8b": "gzip-compressed",
}

_Layout = Literal["lines", "document", "line", "proto"]


def read_file(path: str, *, lenient: bool) -> SpanStream:
    """Open a span file of any known layout; its format is settled before the first record."""
    layout = _layout(path)
    if layout == "document":
        return open_document(_load_document(path), path, lenient=lenient)
    if layout == "line":
        # One document on one line: labelled by its own shape, messages still name line 1.
        doc = _load_document(path)
        stream = SpanStream(path, document_format(doc) or SourceFormat.OTLP_JSON, lenient=lenient)
        return stream.feed(document_records(doc, f"{path}:1", stream))
    if layout == "proto":
        stream = SpanStream(path, SourceFormat.OTLP_PROTO, lenient=lenient)
        return stream.feed(_proto(path, stream))
    stream = SpanStream(path, SourceFormat.OTLP_JSON_LINES, lenient=lenient)
    return stream.feed(_lines(path, stream))


def _open(path: str, buffering: int = _BUFFER) -> BinaryIO:
    try:
        return open(path, "rb", buffering=buffering)  # callers close it: with-blocks, generators
    except (OSError, ValueError) as exc:  # ValueError: a NUL or lone surrogate in the path
        reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        raise SourceError(f"{path}: cannot read ({reason})") from None


def _layout(path: str) -> _Layout:
    with _open(path) as file:
        head, size = file.read(_HEAD), os.fstat(file.fileno()).st_size
    text = head.removeprefix(_BOM).lstrip(_SPACE)
    if not text:
        return "lines"  # an empty file is an export that has not written yet: zero spans
    if text.startswith(b"{"):
        return _json_layout(path)
    if looks_length_prefixed(head, size):
        return "proto"
    for magic, what in _COMPRESSED.items():
        if head.startswith(magic):
            raise UnknownFormatError(
                f"{path}: the file is {what}; decompress it first. Expected one of: "
                f"{expected_formats()}"
            )
    raise UnknownFormatError(
        f"{path}: starts with bytes {head[:8].hex(' ')}, which is no format the reader knows; "
        f"expected one of: {expected_formats()}"
    )


def _json_layout(path: str) -> _Layout:
    """Tell JSON lines from one document by the first few lines.

    Lines when one of the first ``_LOOKAHEAD`` non-blank lines is a whole document of a known
    shape (a torn first line does not hide the rest) and some other non-blank line follows. A
    file whose only line is a backend's answer (Tempo, Jaeger, Phoenix, as curl saves it) is that
    document; an OTLP request alone on its line is an export file after one export.
    Otherwise a document only when the first line opens one the way pretty-printers do (``{``
    alone, or ending in ``{`` or ``[``): a run of torn lines is still JSON lines, to be skipped
    one by one.
    """
    first: bytes | None = None
    seen = 0
    whole = False
    fmt: SourceFormat | None = None
    with _open(path) as file:
        for raw in file:
            line = raw.strip(_SPACE).removeprefix(_BOM)
            if not line:
                continue
            first = line if first is None else first
            seen += 1
            if whole:
                return "lines"  # another line follows a whole document
            if seen > _LOOKAHEAD:
                break
            try:
                fmt = document_format(orjson.loads(line))
            except orjson.JSONDecodeError:
                fmt = None
            whole = fmt is not None
            if whole and seen > 1:
                return "lines"
    if whole:
        # An OTLP request on one line is what an exporter writes after one export; any other
        # shape on one line is a backend's answer saved as is (curl -o).
        return "lines" if fmt is SourceFormat.OTLP_JSON else "line"
    if first is not None and (first == b"{" or first.endswith((b"{", b"["))):
        return "document"
    return "lines"


def _load_document(path: str) -> object:
    with _open(path) as file:
        data = file.read()
    try:
        return orjson.loads(data.removeprefix(_BOM))
    except orjson.JSONDecodeError as exc:
        raise SourceError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None


def _lines(path: str, stream: SpanStream) -> Iterator[SpanRecord]:
    with _open(path, buffering=0) as file:  # `_raw_lines` reads in large chunks itself
        for number, line in enumerate(_raw_lines(file), start=1):
            if _BLANK.match(line):
                continue
            origin = f"{path}:{number}"
            raw = line[3:] if number == 1 and line[:3] == _BOM else line
            try:
                doc = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                cut = "" if raw[-1:] == b"\n" else "; the last line has no newline: cut short?"
                stream.problem(f"{origin}: invalid JSON ({exc}{cut})", unit="line")
                continue
            yield from document_records(doc, origin, stream)
            # Freed before the next line is parsed, not when `doc` is bound again after: the
            # next parse then reuses its memory, still in the caches, instead of fresh pages.
            del doc


def _raw_lines(file: BinaryIO) -> Iterator[bytes | memoryview]:
    """The lines of ``file``, each with its newline (the last one may have none), as a file's
    line iterator gives them. Read ``_CHUNK`` bytes at a time: a line inside one read is a view
    of it, not a copy (a copy of every line cost a tenth of the read of a file of long lines);
    only a line two reads share is joined."""
    head: list[bytes] = []  # the start of a line the previous reads ended inside
    while chunk := file.read(_CHUNK):
        view = memoryview(chunk)
        start = 0
        if head:
            end = chunk.find(b"\n")
            if end < 0:
                head.append(chunk)
                continue
            head.append(chunk[: end + 1])
            yield b"".join(head)
            head = []
            start = end + 1
        while (end := chunk.find(b"\n", start)) >= 0:
            yield view[start : end + 1]
            start = end + 1
        if start < len(chunk):
            head.append(chunk[start:])
    if head:
        yield b"".join(head)


def _proto(path: str, stream: SpanStream) -> Iterator[SpanRecord]:
    with _open(path) as file:
        yield from proto_records(file, path, os.fstat(file.fileno()).st_size, stream)
