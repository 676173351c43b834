"""What ``af-otel audit FILES`` reads, told apart by what is at the path, and the scan for each.

- a directory holding Tempo blocks (``meta.json`` and ``data.parquet``): `TempoBlocks`;
- any other directory: an ``awss3exporter`` prefix copied from S3 (``aws s3 sync``), its
  ``year=/month=/day=/hour=/minute=`` folders holding ``<file prefix>traces_<n>.json`` (the
  ``otlp_json`` marshaler) or ``.binpb`` (``otlp_proto``), ``.gz`` when compressed;
- ``*.parquet``: the exporter's ``otel_traces`` columns as Parquet (what ClickHouse writes for
  ``SELECT * FROM otel_traces INTO OUTFILE 'day.parquet'``): `ParquetFiles`, the table's own query;
- any other path or glob: OTLP JSON lines (`Files`), or OTLP protobuf when the content is binary
  (the Collector file exporter's ``format: proto``: each request after its 4-byte big-endian
  length; or one bare request a file, as ``otlp_proto`` uploads).

Protobuf is the one input ClickHouse cannot read unaided (its Protobuf formats need a varint
framing and a schema file): each request is decoded here, one at a time, and written as a line of
OTLP JSON into a temporary folder that chDB then reads as it reads any JSON lines, so the spans
reach the reader's OTLP decoder as from a JSON file. The folder lives as long as the audit.
"""

from __future__ import annotations

import base64
import glob
import gzip
import os
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import IO, Any, Final, cast

import orjson

from af_otel.audit.clickhouse import Table
from af_otel.audit.files import Files, _quoted
from af_otel.audit.tempo import FORMAT, TempoBlocks, find_blocks
from af_otel.errors import SourceError
from af_otel.reader.sources.protobuf import (
    framed_records,
    looks_length_prefixed,
    request_document,
)
from af_otel.reader.sources.stream import SpanStream

__all__ = ["ParquetFiles", "open_files", "proto_requests"]

_GZIP: Final = b"\x1f\x8b"
_PREFIX: Final = 4
# A bare request's first byte: field 1 (resource_spans), wire type 2. A length-prefixed file
# opens with it only for a first record over 160 MiB, which no exporter writes; so any other
# binary start is read as the file exporter's framing, which names a record cut short, even one
# cut inside its first length prefix.
_REQUEST_TAG: Final = b"\x0a"
_JSON_START: Final = b" \t\r\n{"
# The object names awss3exporter gives traces (partition.go: ``<file prefix>traces_<n>.<ext>``).
_S3_JSON: Final = (".json", ".json.gz")
_S3_PROTO: Final = (".binpb", ".binpb.gz")
_S3_SIGNAL: Final = "traces_"


@dataclass(frozen=True, slots=True)
class ParquetFiles(Table):
    """Parquet files with the exporter's table columns, at ``url`` (a path or a glob): the
    table's query over ``file(url, 'Parquet')``."""

    def __post_init__(self) -> None:
        pass  # a path, not identifiers

    @property
    def qualified(self) -> str:
        return f"file('{_quoted(os.path.abspath(self.url))}', 'Parquet')"

    def __str__(self) -> str:
        return self.url


def open_files(
    pattern: str, stack: ExitStack, stream: SpanStream
) -> Files | ParquetFiles | TempoBlocks:
    """The scan of ``pattern`` (see the module's list); a temporary folder it needs is removed
    when ``stack`` closes. Raises `SourceError` naming the path when nothing can be read; a
    protobuf record that cannot be read is a problem of ``stream`` (strict or lenient)."""
    if os.path.isdir(pattern):
        blocks = find_blocks(pattern)
        if blocks:
            return TempoBlocks(pattern, tuple(blocks))
        return _s3_prefix(pattern, stack, stream)
    matches = sorted(glob.glob(pattern, recursive=True))
    if not matches:
        raise SourceError(f"{pattern}: no such file")
    if pattern.endswith(".parquet"):
        return ParquetFiles(pattern, "")
    if any(_is_proto(path) for path in matches):
        return Files(pattern, (_proto_lines(matches, stack, stream),))
    return Files(pattern)


def _s3_prefix(directory: str, stack: ExitStack, stream: SpanStream) -> Files:
    """The traces objects under an awss3exporter prefix: JSON read in place by one glob each
    suffix, protobuf decoded into JSON lines first."""
    found: dict[str, list[str]] = {suffix: [] for suffix in (*_S3_JSON, *_S3_PROTO)}
    for root, _dirs, files in sorted(os.walk(directory)):
        for name in sorted(files):
            suffix = next((s for s in found if name.endswith(s)), None)
            if suffix is not None and _S3_SIGNAL in name:
                found[suffix].append(os.path.join(root, name))
    paths = [
        os.path.join(directory, "**", f"*{_S3_SIGNAL}*{suffix}")
        for suffix in _S3_JSON
        if found[suffix]
    ]
    protos = [path for suffix in _S3_PROTO for path in found[suffix]]
    if protos:
        paths.append(_proto_lines(protos, stack, stream))
    if not paths:
        raise SourceError(
            f"{directory}: no Tempo block (meta.json) and no awss3exporter traces object "
            f"(*{_S3_SIGNAL}*.json, .binpb, .gz) under it"
        )
    return Files(directory, tuple(paths))


def _open(path: str) -> IO[bytes]:
    try:
        with open(path, "rb") as probe:
            gzipped = probe.read(2) == _GZIP
        return cast(IO[bytes], gzip.open(path, "rb")) if gzipped else open(path, "rb")
    except OSError as exc:
        raise SourceError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _is_proto(path: str) -> bool:
    with _open(path) as file:
        head = file.read(1)
    return bool(head) and head not in _JSON_START and head != b"\xef"  # \xef: a UTF-8 BOM


def _size(path: str) -> int:
    """The bytes ``path`` holds once decompressed (a gzip member's trailer keeps it, mod 2**32)."""
    with open(path, "rb") as file:
        if file.read(2) != _GZIP:
            return os.fstat(file.fileno()).st_size
        file.seek(-4, os.SEEK_END)
        return int.from_bytes(file.read(4), "little")


def proto_requests(path: str, stream: SpanStream) -> Iterator[tuple[str, bytes]]:
    """Each serialized ``ExportTraceServiceRequest`` in ``path`` with where it is
    (``file:record``), read one at a time: length-prefixed records (the file exporter, framed as
    the reader frames them: `framed_records`), or the whole file as one request (an
    ``otlp_proto`` object, which opens with the first field's tag). A record cut short is a
    problem of ``stream`` naming the file, the record and its byte offset: raised, or when
    lenient skipped after the whole records before it."""
    size = _size(path)
    with _open(path) as file:
        try:
            head = file.read(_PREFIX + 1)
            if head[:1] == _REQUEST_TAG and not looks_length_prefixed(head, size):
                yield f"{path}:1", head + file.read()
                return
            # A file exporter's file, possibly cut inside its first record.
            file.seek(0)
            yield from framed_records(file, path, size, stream)
        except (EOFError, zlib.error) as exc:  # a gzip file cut short
            stream.problem(f"{path}: the compressed file is cut short ({exc})", unit="line")


def _hex_ids(span: dict[str, Any]) -> None:
    """proto3 JSON writes ids in base64; OTLP JSON (and the audit's run key) in hex."""
    for key in ("traceId", "spanId", "parentSpanId"):
        if span.get(key):
            span[key] = base64.b64decode(span[key]).hex()
    for link in span.get("links") or ():
        _hex_ids(link)


def _proto_lines(paths: list[str], stack: ExitStack, stream: SpanStream) -> str:
    """Decode every request of ``paths`` into one OTLP JSON line each, in a temporary folder
    removed with ``stack``; returns the glob of the lines written. A request that cannot be read
    is a problem of ``stream`` (raised, or skipped when lenient)."""
    folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="af-otel-audit-proto-"))
    for index, path in enumerate(paths):
        with open(os.path.join(folder, f"{index:06d}.jsonl"), "wb") as out:
            for where, body in proto_requests(path, stream):
                doc = request_document(body, where, stream)
                if doc is None:
                    continue
                for batch in doc.get("resourceSpans") or ():
                    for block in batch.get("scopeSpans") or ():
                        for span in block.get("spans") or ():
                            _hex_ids(span)
                out.write(orjson.dumps(doc) + b"\n")
    return os.path.join(folder, "*.jsonl")


# The format Tempo's blocks carry, re-exported for the command's help.
TEMPO_FORMAT: Final = FORMAT
