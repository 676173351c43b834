"""Length-prefixed OTLP protobuf: records stream one at a time; cut or damaged records name themselves."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from af_otel.errors import SourceError
from af_otel.reader.sources import SourceFormat, read_spans

from .helpers import FIXTURES, by_id, shapes
from .strategies import attribute_maps, sdk_span

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DATA = (FIXTURES / "collector.pb").read_bytes()


def _records(data: bytes) -> list[bytes]:
    out, at = [], 0
    while at < len(data):
        size = int.from_bytes(data[at : at + 4], "big")
        out.append(data[at : at + 4 + size])
        at += 4 + size
    return out


RECORDS = _records(DATA)


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


@given(attributes=attribute_maps)
@SETTINGS
def test_attributes_round_trip_through_the_real_protobuf_encoder(
    attributes: dict[str, Any],
) -> None:
    """The real OTLP protobuf encoding of a span reads back to the record the SDK span gives."""
    span = sdk_span(attributes)
    (expected,) = read_spans([span])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spans.pb"
        path.write_bytes(_frame(encode_spans([span]).SerializeToString()))
        (record,) = read_spans(path)
    assert record == expected


def test_the_fixture_has_three_records() -> None:
    """collector.pb frames three requests, the batches the JSON-lines fixtures hold."""
    assert len(RECORDS) == 3
    assert b"".join(RECORDS) == DATA


def test_a_cut_record_names_record_and_byte(tmp_path: Path) -> None:
    """A file cut inside its third record raises naming record 3 and its offset; lenient keeps records 1-2."""
    path = tmp_path / "cut.pb"
    path.write_bytes(DATA[:-10])
    with pytest.raises(SourceError) as caught:
        list(read_spans(path))
    offset = len(RECORDS[0]) + len(RECORDS[1])
    assert str(caught.value).startswith(f"{path}:3: truncated record at byte {offset}: ")
    stream = read_spans(path, lenient=True)
    whole = by_id(read_spans(FIXTURES / "collector.pb"))
    kept = by_id(stream)
    assert kept.keys() < whole.keys()
    assert all(r.origin.endswith((":1", ":2")) for r in kept.values())
    assert stream.skipped_lines == 1


def test_a_damaged_record_is_skipped_when_its_length_is_intact(tmp_path: Path) -> None:
    """Garbage inside an intact frame is that record's error; lenient reading goes on to the next."""
    path = tmp_path / "damaged.pb"
    path.write_bytes(RECORDS[0] + _frame(b"\x0a\xff\xff\xff\xff\x0f") + RECORDS[2])
    with pytest.raises(SourceError, match=rf"^{path}:2: not a protobuf ExportTraceServiceRequest"):
        list(read_spans(path))
    stream = read_spans(path, lenient=True)
    assert {r.origin.rsplit(":", 1)[1] for r in stream} == {"1", "3"}
    assert stream.skipped_lines == 1


def test_a_cut_length_prefix_is_named(tmp_path: Path) -> None:
    """Two stray bytes after the last record are a cut prefix at that offset."""
    path = tmp_path / "tail.pb"
    path.write_bytes(DATA + b"\x00\x00")
    with pytest.raises(
        SourceError, match=rf"^{path}:4: truncated length prefix at byte {len(DATA)}"
    ):
        list(read_spans(path))


def test_length_prefixed_json_is_read_too(tmp_path: Path) -> None:
    """The same framing around OTLP JSON (the exporter with a JSON encoding) reads the same spans."""
    lines = (FIXTURES / "collector.jsonl").read_bytes().splitlines()
    path = tmp_path / "framed-json.bin"
    path.write_bytes(b"".join(_frame(line) for line in lines))
    stream = read_spans(path)
    assert stream.format is SourceFormat.OTLP_PROTO
    assert by_id(stream) == by_id(read_spans(FIXTURES / "collector.pb"))
    assert orjson.loads(lines[0])["resourceSpans"]  # the framing really held JSON


def test_the_extension_does_not_matter(tmp_path: Path) -> None:
    """A protobuf file named .json is still recognized by its framing."""
    path = tmp_path / "misnamed.json"
    path.write_bytes(DATA)
    assert len(list(read_spans(path))) == len(shapes.build_spans())
