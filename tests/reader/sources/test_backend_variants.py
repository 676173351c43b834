"""What backends do to a real recording, read back: OTLP JSON under proto field names (Phoenix),
arrays as JSON text (Jaeger 2.x on Elasticsearch and friends), a backend's own notes used as the
cause of a gap, and a document saved on one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from af_otel import names
from af_otel.cli.demo import run_demo
from af_otel.processor import run
from af_otel.reader.gaps import gap_why
from af_otel.reader.records import SpanKind
from af_otel.reader.sources import NoteKind, SourceFormat, SourceNote, read_spans
from af_otel.reader.verify import verify
from af_otel.reader.view import served_views
from af_otel.store import LocalStore
from tests.reader.recordings import agent, file_recorder

from . import replay
from .helpers import FIXTURES, by_id, sdk_records


def _verdicts(records: Any, store: Path) -> dict[tuple[str, int], tuple[str, str]]:
    """(run, epoch) -> (verdict, reason) for every LLM call of ``records``."""
    return {
        (view.run_id or "", view.epoch): (verdict.status.value, verdict.reason)
        for view in served_views(tuple(records), store=LocalStore(store))
        for verdict in (verify(view),)
    }


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, Path]:
    traces, store = tmp_path / "traces.jsonl", tmp_path / "store"
    with file_recorder(traces, LocalStore(store)) as rec:
        agent(rec, "variant-run", 4)
        with run("blind-run"):
            rec.blind_chat()
    return traces, store


@pytest.mark.parametrize("nulls", [False, True], ids=["proto-names", "proto-names-with-nulls"])
def test_proto_field_names_read_as_lower_camel(
    recorded: tuple[Path, Path], tmp_path: Path, nulls: bool
) -> None:
    """The recording with every field under its proto name (and Phoenix's nulls) reads to the
    same records and the same verdicts."""
    traces, store = recorded
    renamed = tmp_path / "renamed.jsonl"
    lines = [replay.proto_names(doc, nulls=nulls) for doc in replay.export_lines(traces)]
    renamed.write_text("".join(json.dumps(doc) + "\n" for doc in lines), encoding="utf-8")
    assert '"start_time_unix_nano"' in renamed.read_text()
    assert '"startTimeUnixNano"' not in renamed.read_text()
    stream = read_spans(renamed)
    assert stream.format is SourceFormat.OTLP_JSON_LINES
    assert by_id(stream) == by_id(read_spans(traces))
    expected = _verdicts(read_spans(traces), store)
    assert _verdicts(read_spans(renamed), store) == expected
    assert sum(status == "verified" for status, _ in expected.values()) == 4


def test_the_committed_document_under_proto_names_reads_the_same() -> None:
    """Every field, value kind and id form of the fixture document survives the renaming."""
    doc = replay.proto_names(orjson.loads((FIXTURES / "otlp-document.json").read_bytes()))
    assert "resource_spans" in doc
    stream = read_spans(doc)
    assert stream.format is SourceFormat.OTLP_JSON
    assert by_id(stream) == by_id(sdk_records())


def test_jaeger_text_arrays_verify_like_the_demo_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo trace served by Jaeger 2.x from a tag store (arrays and maps as JSON text)
    verifies exactly as the file the demo wrote: every minted call verified, minted from the
    request body the client sent (the wire tap), nothing unrecorded."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    demo = run_demo(tmp_path / "demo")
    as_text, changed = replay.arrays_as_text(
        replay.jaeger_v3(replay.merged(replay.export_lines(demo.traces)))
    )
    assert changed > 0  # the af_otel arrays really are text in the body under test
    expected = _verdicts(read_spans(demo.traces), demo.store)
    got = _verdicts(read_spans(as_text), demo.store)
    assert got == expected
    views = served_views(tuple(read_spans(as_text)), store=LocalStore(demo.store))
    whole = [
        view
        for view in views
        if verify(view).status.value == "verified"
        and view.unrecorded == ()
        and view.source == names.SOURCE_WIRE
    ]
    assert len(whole) == len([c for c in demo.calls if c.state == names.STATE_MINTED]) >= 5
    for record in read_spans(as_text):
        for key in (names.GAPS, names.RECEIPT_MESSAGES_ADDED):
            if key in record.attributes:
                assert isinstance(record.attributes[key], tuple), key


def test_jaeger_query_warnings_are_notes() -> None:
    """Jaeger 2.x's @jaeger@warnings span attribute becomes notes; its max-trace-size warning is
    a truncation."""
    doc = orjson.loads((FIXTURES / "jaeger-v3.json").read_bytes())
    span = doc["result"]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    cut = "trace has more than 2 spans, showing first 2 spans only"
    span["attributes"].append(
        {"key": "@jaeger@warnings", "value": {"stringValue": json.dumps([cut, "clock skew"])}}
    )
    stream = read_spans(doc)
    list(stream)
    assert [(n.kind, n.text.rsplit(": ", 1)[1]) for n in stream.notes] == [
        (NoteKind.TRUNCATED, cut),
        (NoteKind.WARNING, "clock skew"),
    ]


def test_a_cut_trace_names_the_backend_as_the_cause(recorded: tuple[Path, Path]) -> None:
    """When Tempo says the trace is partial, the missing-span gap names that, not sampling."""
    traces, store = recorded
    body = replay.tempo_v2(
        replay.without_epoch(replay.merged(replay.export_lines(traces)), 2),
        status="PARTIAL",
        message="trace exceeds max size (max bytes: 5000000)",
    )
    stream = read_spans(body)
    records = tuple(stream)
    views = served_views(records, store=LocalStore(store))
    third = next(v for v in views if v.run_id == "variant-run" and v.epoch == 3)
    (missing,) = [g for g in third.gaps if g.kind == names.GAP_NO_RUN_LOG]
    assert stream.notes == [
        SourceNote(
            NoteKind.PARTIAL,
            "<document>: Tempo returned a partial trace (trace exceeds max size (max bytes: 5000000))",
        )
    ]
    sentence = gap_why(missing, stream.notes)
    assert "trace exceeds max size" in sentence
    assert "sampling" not in sentence
    assert "sampling" in gap_why(missing)  # with no note, the catalogue's sentence stands
    warning_only = [SourceNote(NoteKind.WARNING, "clock skew adjusted")]
    assert gap_why(missing, warning_only) == missing.why


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("tempo-v2.json", SourceFormat.TEMPO_V2),
        ("jaeger-v3.json", SourceFormat.JAEGER_V3),
        ("otlp-document.json", SourceFormat.OTLP_JSON_LINES),  # an export file after one export
    ],
)
def test_a_document_saved_on_one_line_is_a_document(
    name: str, fmt: SourceFormat, tmp_path: Path
) -> None:
    """A backend's answer saved by curl (one line, no newline) is labelled by its shape, not as
    JSON lines; its spans still name line 1."""
    doc = orjson.loads((FIXTURES / name).read_bytes())
    path = tmp_path / "saved.json"
    path.write_bytes(orjson.dumps(doc))
    stream = read_spans(path)
    records = list(stream)
    assert stream.format is fmt
    assert records
    assert {r.origin for r in records} == {f"{path}:1"}
    assert by_id(records) == by_id(read_spans(doc))
    two = tmp_path / "two.jsonl"
    two.write_bytes(orjson.dumps(doc) + b"\n" + orjson.dumps(doc) + b"\n")
    assert read_spans(two).format is SourceFormat.OTLP_JSON_LINES


def test_a_page_a_real_phoenix_served_reads_as_its_spans() -> None:
    """The committed page (the fixture spans through a real Phoenix) reads to the spans sent,
    minus exactly what Phoenix does not keep; the span with a bytes attribute Phoenix refused."""
    stream = read_spans(FIXTURES / "phoenix-spans.json")
    remote = by_id(stream)
    assert stream.format is SourceFormat.PHOENIX
    sent = by_id(sdk_records())
    refused = set(sent) - set(remote)
    assert [sent[k].name for k in refused] == ["execute_tool get_weather"]  # a bytes attribute
    for key, record in remote.items():
        mine = sent[key]
        assert record.kind is SpanKind.INTERNAL
        assert (record.resource, record.scope) == ({}, "")
        assert (record.dropped_attributes_count, record.dropped_events_count) == (0, 0)
        assert abs(record.start_ns - mine.start_ns) < 1000  # rounded through a float
        assert abs(record.end_ns - mine.end_ns) < 1000
        assert (record.name, record.parent_span_id, record.status_code) == (
            mine.name,
            mine.parent_span_id,
            mine.status_code,
        )
        assert {k: record.attributes.get(k) for k in mine.attributes} == dict(mine.attributes)
        added = set(record.attributes) - set(mine.attributes)
        assert all(k.startswith(("llm.", "openinference.")) for k in added), added
        assert [(e.name, dict(e.attributes)) for e in record.events] == [
            (e.name, dict(e.attributes)) for e in mine.events
        ]
