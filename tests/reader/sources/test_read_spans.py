"""read_spans: every committed format yields the records the SDK's own spans give, and knows its format."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import names
from af_otel.errors import UnknownFormatError
from af_otel.reader.records import SpanKind, SpanRecord, StatusCode
from af_otel.reader.sources import SourceFormat, read_spans

from .helpers import FIXTURES, as_jaeger_v1_sees_it, by_id, sdk_records, shapes

ALL_FILES = {
    "otlp-json-file.jsonl": SourceFormat.OTLP_JSON_LINES,
    "otlp-document.json": SourceFormat.OTLP_JSON,
    "collector.jsonl": SourceFormat.OTLP_JSON_LINES,
    "collector.pb": SourceFormat.OTLP_PROTO,
    "tempo-v1.json": SourceFormat.TEMPO_V1,
    "tempo-v2.json": SourceFormat.TEMPO_V2,
    "jaeger-v3.json": SourceFormat.JAEGER_V3,
    "jaeger-v1.json": SourceFormat.JAEGER_V1,
}
RUN_A = f"{shapes.TRACE_A:032x}"
RUN_B = f"{shapes.TRACE_B:032x}"


def _expected(name: str) -> dict[tuple[str, str], SpanRecord]:
    expected = by_id(sdk_records())
    if name.startswith(("tempo", "jaeger-v3")):  # one trace per trace-by-id response
        expected = {k: r for k, r in expected.items() if r.trace_id == RUN_A}
    if name == "jaeger-v1.json":
        expected = {k: as_jaeger_v1_sees_it(r) for k, r in expected.items()}
    return expected


@pytest.mark.parametrize("name", sorted(ALL_FILES))
def test_every_format_reads_the_same_spans(name: str) -> None:
    """Each fixture file yields exactly the records of the SDK spans it was made from."""
    stream = read_spans(FIXTURES / name)
    got = by_id(stream)
    assert stream.format is ALL_FILES[name]
    assert stream.skipped == 0
    assert got == _expected(name)
    # Field by field too, so that a difference reads as the field that differs.
    for key, record in _expected(name).items():
        for field in SpanRecord.__dataclass_fields__:
            if field != "origin":
                assert getattr(got[key], field) == getattr(record, field), (key, field)


@pytest.mark.parametrize("name", [n for n in sorted(ALL_FILES) if n.endswith(".json")])
def test_a_parsed_document_reads_like_its_file(name: str) -> None:
    """A JSON document already parsed into a dict gives the same records, with origin <document>."""
    doc = orjson.loads((FIXTURES / name).read_bytes())
    records = list(read_spans(doc))
    assert by_id(records) == by_id(read_spans(FIXTURES / name))
    assert {r.origin for r in records} == {"<document>"}


def test_the_fixtures_carry_what_the_tests_rely_on() -> None:
    """The fixture spans hold arrays, commits, every kind, an error, limits and a 16-digit Jaeger id."""
    records = by_id(sdk_records())
    assert len(records) == 9
    assert {r.kind for r in records.values()} == set(SpanKind) - {SpanKind.UNSPECIFIED}
    chat1 = next(r for r in records.values() if r.attributes.get(names.EPOCH) == 1)
    assert chat1.attributes[names.GAPS] == (names.GAP_PROVIDER_DEFAULTS,)
    assert len(chat1.attributes[names.RECEIPT_SYSTEM_PIECES]) == 2  # type: ignore[arg-type]
    assert [e.attributes[names.COMMIT_SEQ] for e in chat1.events] == [1, 2]
    assert chat1.service_name == "agent-demo"
    chat2 = next(r for r in records.values() if r.attributes.get(names.EPOCH) == 2)
    assert chat2.status_code is StatusCode.ERROR
    assert chat2.attributes["app.big_counter"] == 2**60
    assert chat2.attributes[names.RECEIPT_TOOLS_NAMES] == ()
    capped = next(r for r in records.values() if r.attributes.get(names.EPOCH) == 3)
    assert (capped.dropped_attributes_count, capped.dropped_events_count) == (2, 1)
    assert [e.dropped_attributes_count for e in capped.events] == [1, 1]
    tool = next(r for r in records.values() if r.name.startswith("execute_tool"))
    assert tool.service_name == "tool-runner"
    assert tool.attributes["app.payload"] == "AAH+/w=="
    assert tool.attributes["app.options"] == '{"retries":2,"units":"metric"}'
    jaeger = orjson.loads((FIXTURES / "jaeger-v1.json").read_bytes())
    assert jaeger["data"][1]["traceID"] == RUN_B[16:]  # read back as RUN_B by the equality test


def test_origins_name_file_and_line_or_record() -> None:
    """JSON lines and protobuf records are origins path:n; a whole document is its path."""
    lines = list(read_spans(FIXTURES / "otlp-json-file.jsonl"))
    assert {r.origin for r in lines} == {
        f"{FIXTURES / 'otlp-json-file.jsonl'}:{n}" for n in (1, 2, 3)
    }
    records = list(read_spans(FIXTURES / "collector.pb"))
    assert {r.origin for r in records} == {f"{FIXTURES / 'collector.pb'}:{n}" for n in (1, 2, 3)}
    document = list(read_spans(str(FIXTURES / "tempo-v2.json")))
    assert {r.origin for r in document} == {str(FIXTURES / "tempo-v2.json")}


def test_the_real_file_exporter_output_reads_as_the_sdk_spans(tmp_path: Path) -> None:
    """Spans exported now by opentelemetry-exporter-otlp-json-file read back equal to the SDK's."""
    spans = shapes.build_spans()
    exporter = FileSpanExporter(tmp_path / "now.jsonl")
    exporter.export(spans[:4])
    exporter.export(spans[4:])
    exporter.shutdown()
    assert by_id(read_spans(tmp_path / "now.jsonl")) == by_id(read_spans(spans))


def test_an_in_memory_exporter_is_read_directly() -> None:
    """An InMemorySpanExporter itself is a source: its finished spans are read."""
    exporter = InMemorySpanExporter()
    exporter.export(shapes.build_spans())
    stream = read_spans(exporter)
    assert stream.format is SourceFormat.SDK
    assert by_id(stream) == by_id(sdk_records())


@pytest.mark.parametrize(
    "source",
    [
        {"spans": []},
        [1, 2, 3],
        b'{"resourceSpans": []}',
        42,
    ],
    ids=["unknown-dict", "list-of-ints", "bytes", "int"],
)
def test_unknown_inputs_say_what_was_expected(source: object) -> None:
    """Input in no known shape raises UnknownFormatError listing the formats the reader knows."""
    with pytest.raises(UnknownFormatError) as caught:
        read_spans(source, lenient=True)  # type: ignore[arg-type]
    message = str(caught.value)
    for fmt in SourceFormat:
        assert fmt.value in message


def test_empty_inputs_yield_nothing(tmp_path: Path) -> None:
    """An empty file, an empty request and an empty span list are zero spans, not errors."""
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert list(read_spans(tmp_path / "empty.jsonl")) == []
    assert list(read_spans({})) == []
    assert list(read_spans({"resourceSpans": []})) == []
    assert list(read_spans([])) == []
