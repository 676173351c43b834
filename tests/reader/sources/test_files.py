"""Span files: the layout is read from the content, bad lines name file and line, memory stays bounded."""

from __future__ import annotations

import io
import tracemalloc
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from af_otel.errors import SourceError, UnknownFormatError
from af_otel.reader.sources import SourceFormat, files, read_spans
from af_otel.reader.sources.stream import MAX_MESSAGES

from .helpers import FIXTURES, by_id

LINES = (FIXTURES / "otlp-json-file.jsonl").read_bytes().splitlines(keepends=True)
DOC: dict[str, Any] = orjson.loads(LINES[0])
SPANS_PER_LINE = [len(list(read_spans(orjson.loads(line)))) for line in LINES]


def _write(tmp_path: Path, data: bytes, name: str = "trace.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _span_doc(**changes: Any) -> dict[str, Any]:
    doc = orjson.loads(LINES[0])
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1].update(changes)
    return doc


class TestLayout:
    def test_a_json_extension_holding_lines_reads_as_lines(self, tmp_path: Path) -> None:
        """The content decides: JSON lines in a .json file are read line by line."""
        path = _write(tmp_path, b"".join(LINES), "spans.json")
        stream = read_spans(path)
        assert stream.format is SourceFormat.OTLP_JSON_LINES
        assert len(list(stream)) == sum(SPANS_PER_LINE)

    def test_a_one_line_document_is_one_json_line(self, tmp_path: Path) -> None:
        """A compact document on one line reads the same as the pretty one."""
        pretty = _write(tmp_path, orjson.dumps(DOC, option=orjson.OPT_INDENT_2), "pretty.json")
        compact = _write(tmp_path, orjson.dumps(DOC), "compact.json")
        assert read_spans(pretty).format is SourceFormat.OTLP_JSON
        assert by_id(read_spans(pretty)) == by_id(read_spans(compact))

    def test_bom_crlf_and_blank_lines_are_tolerated(self, tmp_path: Path) -> None:
        """A UTF-8 BOM, CRLF endings and blank lines do not change what is read; lines keep their numbers."""
        data = b"\xef\xbb\xbf" + LINES[0].rstrip() + b"\r\n\r\n   \n" + LINES[1].rstrip() + b"\r\n"
        records = list(read_spans(_write(tmp_path, data)))
        assert len(records) == SPANS_PER_LINE[0] + SPANS_PER_LINE[1]
        assert records[-1].origin.endswith("trace.jsonl:4")

    def test_binary_noise_is_an_unknown_format(self, tmp_path: Path) -> None:
        """A file that is neither JSON nor length-prefixed protobuf names its first bytes and the formats."""
        path = _write(tmp_path, b"\x00\x00\x00\x10not protobuf at all", "x.bin")
        with pytest.raises(UnknownFormatError, match=r"starts with bytes 00 00 00 10") as caught:
            read_spans(path)
        assert "Tempo GET /api/v2/traces" in str(caught.value)

    def test_compressed_files_say_so(self, tmp_path: Path) -> None:
        """A zstd file (the exporter's compression: zstd) is refused with the reason, not as noise."""
        path = _write(tmp_path, b"\x28\xb5\x2f\xfd" + b"\x00" * 32, "x.zst")
        with pytest.raises(UnknownFormatError, match="zstd-compressed"):
            read_spans(path)

    def test_a_missing_file_names_its_path(self, tmp_path: Path) -> None:
        """A path that cannot be opened raises SourceError naming it, before any iteration."""
        with pytest.raises(SourceError, match=r"missing\.jsonl: cannot read"):
            read_spans(tmp_path / "missing.jsonl")


class TestBadLines:
    def test_a_truncated_last_line_names_file_and_line(self, tmp_path: Path) -> None:
        """A line cut short by a crash raises SourceError 'file:line: invalid JSON', hinting at the cut."""
        path = _write(tmp_path, LINES[0] + LINES[1] + LINES[2][:-40])
        stream = read_spans(path)
        with pytest.raises(SourceError) as caught:
            list(stream)
        assert str(caught.value).startswith(f"{path}:3: invalid JSON (")
        assert "no newline" in str(caught.value)

    def test_lenient_skips_and_counts_a_torn_line(self, tmp_path: Path) -> None:
        """Lenient reading keeps every span of the good lines and counts the torn one."""
        path = _write(tmp_path, LINES[0] + b'{"resourceSpans": [{"reso\n' + LINES[2])
        stream = read_spans(path, lenient=True)
        records = list(stream)
        assert len(records) == SPANS_PER_LINE[0] + SPANS_PER_LINE[2]
        assert (stream.skipped_lines, stream.skipped_spans, stream.skipped) == (1, 0, 1)
        assert stream.problems == [stream.problems[0]]
        assert stream.problems[0].startswith(f"{path}:2: invalid JSON")

    def test_a_torn_first_line_is_still_json_lines(self, tmp_path: Path) -> None:
        """A corrupt first line followed by good lines is a bad line 1, not a bad document."""
        path = _write(tmp_path, LINES[0][:50] + b"\n" + LINES[1])
        with pytest.raises(SourceError, match=rf"^{path}:1: invalid JSON"):
            list(read_spans(path))
        assert len(list(read_spans(path, lenient=True))) == SPANS_PER_LINE[1]

    def test_a_span_without_span_id_names_line_and_span(self, tmp_path: Path) -> None:
        """A span missing its id names the line, the span's index and its JSON path."""
        doc = _span_doc()
        del doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["spanId"]
        path = _write(tmp_path, LINES[1] + orjson.dumps(doc) + b"\n")
        with pytest.raises(SourceError) as caught:
            list(read_spans(path))
        assert str(caught.value) == (
            f"{path}:2: span 1 (resourceSpans[0].scopeSpans[0].spans[1]): missing spanId"
        )
        stream = read_spans(path, lenient=True)
        assert len(list(stream)) == SPANS_PER_LINE[1] + SPANS_PER_LINE[0] - 1
        assert (stream.skipped_lines, stream.skipped_spans) == (0, 1)

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"traceId": "xyz"}, "traceId 'xyz' is neither 32 hex digits nor base64 of 16 bytes"),
            ({"traceId": "0" * 32}, "traceId is all zeros"),
            ({"kind": 9}, "kind 9 is not an OTLP SpanKind"),
            ({"kind": "SPAN_KIND_SIDEWAYS"}, "is not an OTLP SpanKind"),
            ({"startTimeUnixNano": "soon"}, "startTimeUnixNano must be an integer, got 'soon'"),
            (
                {"attributes": [{"key": "k", "value": {"intValue": "1.5"}}]},
                "attributes 'k' must be",
            ),
            ({"events": {"name": "x"}}, "events must be a list"),
        ],
    )
    def test_malformed_span_fields_are_named(
        self, tmp_path: Path, change: dict[str, Any], message: str
    ) -> None:
        """Each malformed field is reported with the span that holds it."""
        path = _write(tmp_path, orjson.dumps(_span_doc(**change)) + b"\n")
        with pytest.raises(SourceError, match=rf"^{path}:1: span 1 \(") as caught:
            list(read_spans(path))
        assert message in str(caught.value)

    def test_an_unknown_line_shape_names_the_line(self, tmp_path: Path) -> None:
        """A JSON line in no known shape raises UnknownFormatError at that line; lenient skips it."""
        path = _write(tmp_path, LINES[0] + b'{"logs": []}\n')
        with pytest.raises(UnknownFormatError, match=rf"^{path}:2: a JSON object with keys 'logs'"):
            list(read_spans(path))
        stream = read_spans(path, lenient=True)
        assert len(list(stream)) == SPANS_PER_LINE[0]
        assert stream.skipped_lines == 1

    def test_an_invalid_document_names_the_line_of_the_error(self, tmp_path: Path) -> None:
        """A pretty document that does not parse raises at once, naming file and line."""
        text = orjson.dumps(DOC, option=orjson.OPT_INDENT_2).replace(b'"name"', b'"name" "', 1)
        path = _write(tmp_path, text, "doc.json")
        with pytest.raises(SourceError, match=rf"^{path}:\d+: invalid JSON"):
            read_spans(path, lenient=True)

    def test_lenient_messages_are_bounded(self, tmp_path: Path) -> None:
        """A file of torn lines keeps counting but stores only the first few messages."""
        path = _write(tmp_path, b"{torn\n" * (MAX_MESSAGES * 3) + LINES[0])
        stream = read_spans(path, lenient=True)
        assert len(list(stream)) == SPANS_PER_LINE[0]
        assert stream.skipped_lines == MAX_MESSAGES * 3
        assert len(stream.problems) == MAX_MESSAGES


def test_closing_the_stream_stops_reading(tmp_path: Path) -> None:
    """Leaving the with-block closes the file: the stream yields nothing more."""
    path = _write(tmp_path, b"".join(LINES))
    with read_spans(path) as stream:
        next(stream)
    assert list(stream) == []


def _big_file(path: Path, lines: int, spans_per_line: int) -> None:
    # A small span (a receipt's scalars, an array, one commit): the bound is about lines held at
    # once, and a lighter span keeps the traced run short.
    resource = DOC["resourceSpans"][0]["resource"]
    with path.open("wb") as out:
        for line in range(lines):
            spans = [
                {
                    "traceId": f"{line + 1:032x}",
                    "spanId": f"{line * spans_per_line + k + 1:016x}",
                    "name": "chat gpt-4o",
                    "kind": 3,
                    "startTimeUnixNano": str(1_796_000_000_000_000_000 + k),
                    "endTimeUnixNano": str(1_796_000_000_000_000_100 + k),
                    "attributes": [
                        {"key": "af.run.id", "value": {"stringValue": f"run-{line}"}},
                        {"key": "af.epoch", "value": {"intValue": str(k + 1)}},
                        {
                            "key": "af.gaps",
                            "value": {"arrayValue": {"values": [{"stringValue": "no-run-log"}]}},
                        },
                    ],
                    "events": [{"name": "af.commit", "timeUnixNano": "1796000000000000050"}],
                    "status": {},
                }
                for k in range(spans_per_line)
            ]
            doc = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
            out.write(orjson.dumps(doc) + b"\n")


def test_memory_stays_bounded_on_a_big_file(tmp_path: Path) -> None:
    """Streaming 50,000 spans holds about one line at a time: peak stays a small fraction of the file."""
    path = tmp_path / "big.jsonl"
    _big_file(path, lines=2_500, spans_per_line=20)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        count = 0
        for _ in read_spans(path):
            count += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 50_000
    assert size > 20 * 2**20
    assert peak < 2 * 2**20, (
        f"peak {peak / 2**20:.1f} MiB while streaming a {size / 2**20:.0f} MiB file"
    )


@given(
    data=st.lists(
        st.sampled_from([b"\n", b"\r\n", b" ", b"{}", b'{"a": 1}', b"x" * 7, b"\xef\xbb\xbf"]),
        max_size=40,
    ).map(b"".join),
    chunk=st.integers(min_value=1, max_value=9),
)
def test_lines_are_split_as_a_file_iterates_them(data: bytes, chunk: int) -> None:
    """Read a few bytes at a time, the lines (views inside a read, joined across reads) are the
    lines a file's own iterator gives, newlines kept, the last one without if the file ends so."""
    with mock.patch.object(files, "_CHUNK", chunk):
        split = [bytes(line) for line in files._raw_lines(io.BytesIO(data))]
    assert split == list(io.BytesIO(data))
