"""Fixture writers for the span files the audit reads besides OTLP JSON lines, each made from the
day's OTLP JSON lines as the upstream writer would make it (fixtures/README.md names the sources):
the Collector file exporter's ``format: proto`` (each request after its 4-byte big-endian length),
an ``awss3exporter`` prefix (``year=/month=/day=/hour=/minute=`` folders of
``traces_<n>.json`` or ``.binpb`` objects, ``.gz`` when compressed, one export an object), and
Parquet with the table's columns, as ClickHouse writes it from the exporter's table.
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


def _b64_ids(span: dict[str, Any]) -> None:
    for key in ("traceId", "spanId", "parentSpanId"):
        if span.get(key):
            span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()


def request_bytes(line: str) -> bytes:
    """One OTLP JSON line as the serialized ``ExportTraceServiceRequest`` pdata would send
    (proto3 JSON spells ids in base64, OTLP JSON in hex)."""
    doc = json.loads(line)
    for batch in doc.get("resourceSpans") or ():
        for block in batch.get("scopeSpans") or ():
            for span in block.get("spans") or ():
                _b64_ids(span)
    request = json_format.ParseDict(doc, trace_service_pb2.ExportTraceServiceRequest())
    return bytes(request.SerializeToString())


def _lines(source: Path) -> list[str]:
    return [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_file_exporter_proto(source: Path, target: Path) -> Path:
    """The lines of ``source`` as the file exporter's ``format: proto`` file."""
    with target.open("wb") as out:
        for line in _lines(source):
            body = request_bytes(line)
            out.write(len(body).to_bytes(4, "big") + body)
    return target


def write_s3_prefix(source: Path, prefix: Path, marshaler: str) -> Path:
    """Each line of ``source`` as one object under ``prefix`` (``otlp_json`` or ``otlp_proto``),
    spread over two minutes' partitions, every other one gzipped; a logs object beside them that
    the audit must leave alone."""
    for index, line in enumerate(_lines(source)):
        minute = prefix / "year=2026/month=12/day=01/hour=10" / f"minute={index % 2:02d}"
        minute.mkdir(parents=True, exist_ok=True)
        body = line.encode() if marshaler == "otlp_json" else request_bytes(line)
        suffix = ".json" if marshaler == "otlp_json" else ".binpb"
        if index % 2:
            body, suffix = gzip.compress(body), suffix + ".gz"
        (minute / f"traces_{100000000 + index}{suffix}").write_bytes(body)
    (prefix / "year=2026/month=12/day=01/hour=10/minute=00/logs_100000000.json").write_text(
        '{"resourceLogs": []}', encoding="utf-8"
    )
    return prefix
