"""``af-otel audit FILES`` on the other span files: the file exporter's protobuf, Parquet with the
table's columns, a Tempo vParquet4 block with dedicated columns, and an awss3exporter prefix of
JSON or protobuf objects, each made from the day (and from its tampered copy) and each giving the
verdicts ``verify`` gives on the day's OTLP JSON lines, call for call, exit codes too."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import clickhouse_connect
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from af_otel import names
from af_otel.audit.tempo import find_blocks
from af_otel.cli import main
from tests.audit.conftest import Loaded
from tests.audit.formats import write_file_exporter_proto, write_s3_prefix
from tests.audit.tempo_block import write_block
from tests.audit.test_files import key, run

# Dedicated columns for the block: the run id among them, so the run key and the filter must
# find it there and not in the generic columns.
SPAN_COLUMNS = ("gen_ai.request.model", names.RUN_ID, names.RECEIPT_STATE)
RESOURCE_COLUMNS = ("service.name.missing", "telemetry.sdk.language")


def _parquet(loaded: Loaded, copy: str, target: Path) -> Path:
    database = "tampered" if copy == "tampered" else "default"
    client = clickhouse_connect.get_client(dsn=loaded.url)
    try:
        client.command(
            f"INSERT INTO FUNCTION file('{target}', 'Parquet') SELECT * FROM {database}.otel_traces"
        )
    finally:
        client.close()
    return target


def _tempo(source: Path, target: Path) -> Path:
    write_block(source, target, span_columns=SPAN_COLUMNS, resource_columns=RESOURCE_COLUMNS)
    return target


MAKERS: dict[str, Callable[[Loaded, str, Path, Path], Path]] = {
    "proto": lambda _l, _c, src, dst: write_file_exporter_proto(src, dst / "day.pb"),
    "parquet": lambda loaded, copy, _src, dst: _parquet(loaded, copy, dst / "day.parquet"),
    "tempo": lambda _l, _c, src, dst: _tempo(src, dst / "tempo"),
    "s3-json": lambda _l, _c, src, dst: write_s3_prefix(src, dst / "s3", "otlp_json"),
    "s3-proto": lambda _l, _c, src, dst: write_s3_prefix(src, dst / "s3", "otlp_proto"),
}


@pytest.mark.parametrize("copy", ["traces", "tampered"])
@pytest.mark.parametrize("shape", sorted(MAKERS))
def test_each_format_audits_as_verify_reads_the_day(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, tmp_path: Path, shape: str, copy: str
) -> None:
    """Every format, made from the day or its tampered copy, gives verify's verdicts."""
    source = getattr(loaded.day, copy)
    made = MAKERS[shape](loaded, copy, source, tmp_path)
    store = str(loaded.day.store)
    code, rows = run(capsys, "audit", str(made), "--store", store, "--json")
    verify_code, verdicts = run(capsys, "verify", str(source), "--store", store, "--json")
    assert rows, "the audit found no call"
    assert code == verify_code == (1 if copy == "tampered" else 0)
    assert sorted(map(key, rows)) == sorted(map(key, verdicts))


def test_shards_of_a_tempo_block_split_it_as_the_table(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, tmp_path: Path
) -> None:
    """A block's shards are the table's shards: the run key is found in its dedicated column."""
    block = _tempo(loaded.day.traces, tmp_path / "tempo")
    store = str(loaded.day.store)
    for k in (0, 1):
        _, part = run(capsys, "audit", str(block), "--store", store, "--json", "--shard", f"{k}/2")
        _, table = run(
            capsys, "audit", "--clickhouse", loaded.url, "--store", store, "--json",
            "--shard", f"{k}/2",
        )  # fmt: skip
        assert part
        assert sorted(map(key, part)) == sorted(map(key, table))


def test_the_block_writer_keeps_tempo_columns(loaded: Loaded, tmp_path: Path) -> None:
    """The block names its dedicated columns in meta.json and fills them instead of the generic
    columns; service.name is in the resource's own column; event times are relative."""
    (block,) = find_blocks(str(_tempo(loaded.day.traces, tmp_path / "tempo")))
    assert block.span_columns == SPAN_COLUMNS
    rows = pq.read_table(Path(block.path) / "data.parquet").to_pylist()
    spans = [s for t in rows for rs in t["rs"] for ss in rs["ss"] for s in ss["Spans"]]
    runs = [s["DedicatedAttributes"]["String02"] for s in spans]
    assert any(runs)
    assert all(a["Key"] not in SPAN_COLUMNS for s in spans for a in s["Attrs"])
    assert {rs["Resource"]["ServiceName"] for t in rows for rs in t["rs"]} == {
        "checkout",
        "support",
    }
    events = [(s, e) for s in spans for e in s["Events"]]
    assert events
    assert all(e["TimeSinceStartNano"] < s["DurationNano"] + 1 for s, e in events)


def test_a_folder_with_nothing_to_read_is_refused(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, tmp_path: Path
) -> None:
    """A folder with no block and no traces object is an error naming the folder (exit 2)."""
    (tmp_path / "logs_1.json").write_text("{}", encoding="utf-8")
    code = main(["audit", str(tmp_path), "--store", str(loaded.day.store)])
    assert code == 2
    assert str(tmp_path) in capsys.readouterr().err


def test_a_protobuf_record_cut_short_is_named(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, tmp_path: Path
) -> None:
    """A file exporter's protobuf file cut inside a record: exit 2, naming the file and record."""
    whole = write_file_exporter_proto(loaded.day.traces, tmp_path / "day.pb").read_bytes()
    cut = tmp_path / "cut.pb"
    cut.write_bytes(whole[:-10])
    code = main(["audit", str(cut), "--store", str(loaded.day.store)])
    assert code == 2
    assert f"{cut}:" in capsys.readouterr().err


def _record_starts(data: bytes) -> list[int]:
    """The byte offset of each length-prefixed record of ``data``, and its end."""
    starts, offset = [], 0
    while offset < len(data):
        starts.append(offset)
        offset += 4 + int.from_bytes(data[offset : offset + 4], "big")
    return [*starts, offset]


@pytest.fixture
def whole_proto(loaded: Loaded, tmp_path: Path) -> bytes:
    return write_file_exporter_proto(loaded.day.traces, tmp_path / "day.pb").read_bytes()


def _audit_cut(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, folder: Path, whole: bytes, cut_at: int
) -> None:
    """Audit the file ``whole`` cut after ``cut_at`` bytes, strict and lenient, and hold what it
    says to where the cut is."""
    starts = _record_starts(whole)
    whole_records = sum(1 for start in starts[1:] if start <= cut_at)
    cut = folder / "cut.pb"
    cut.write_bytes(whole[:cut_at])
    store = str(loaded.day.store)
    lines = [line for line in loaded.day.traces.read_text("utf-8").splitlines() if line.strip()]
    before = folder / "before.jsonl"
    before.write_text("".join(f"{line}\n" for line in lines[:whole_records]), encoding="utf-8")
    verify_code, verdicts = run(capsys, "verify", str(before), "--store", store, "--json")
    capsys.readouterr()
    if cut_at in starts:  # whole records only: nothing is cut
        code, rows = run(capsys, "audit", str(cut), "--store", store, "--json")
        assert (code, sorted(map(key, rows))) == (verify_code, sorted(map(key, verdicts)))
        return
    record, offset = whole_records + 1, starts[whole_records]
    named = f"{cut}:{record}: truncated "
    assert main(["audit", str(cut), "--store", store]) == 2
    err = capsys.readouterr().err
    assert named in err
    assert f" at byte {offset}" in err
    code = main(["audit", str(cut), "--store", store, "--json", "--lenient"])
    out, err = capsys.readouterr()
    rows = [row for row in map(json.loads, out.splitlines()) if row.get("type") != "summary"]
    assert f"af-otel audit: skipped {named}" in err
    assert f" at byte {offset}" in err
    assert "skipped 1 unreadable row(s) or record(s)" in err
    if not whole_records:  # nothing whole before the cut: not "nothing to verify"
        assert code == 2
        assert "no LLM call left" in err
        return
    assert (code, sorted(map(key, rows))) == (verify_code, sorted(map(key, verdicts)))


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_protobuf_file_cut_anywhere_is_named_strict_and_read_to_the_cut_lenient(
    capsys: pytest.CaptureFixture[str],
    loaded: Loaded,
    tmp_path: Path,
    whole_proto: bytes,
    data: st.DataObject,
) -> None:
    """A file exporter's protobuf file cut at any byte inside a record: strict, exit 2 naming
    the file, the record and its offset; lenient, the whole records before it are audited as
    ``verify`` reads their lines, and the cut one is named as skipped."""
    starts = _record_starts(whole_proto)
    record = data.draw(st.integers(0, len(starts) - 2), label="record")
    cut_at = data.draw(st.integers(starts[record] + 1, starts[record + 1] - 1), label="cut at")
    _audit_cut(capsys, loaded, tmp_path, whole_proto, cut_at)


@pytest.mark.parametrize(
    ("where", "at"),
    [
        ("inside the first length prefix", lambda starts: 2),
        ("inside the first record", lambda starts: starts[1] - 1),
        ("inside a later length prefix", lambda starts: starts[1] + 3),
        ("just after a later prefix", lambda starts: starts[1] + 4),
        ("at a record's end", lambda starts: starts[1]),
    ],
)
def test_a_protobuf_file_cut_at_its_edges(
    capsys: pytest.CaptureFixture[str],
    loaded: Loaded,
    tmp_path: Path,
    whole_proto: bytes,
    where: str,
    at: Callable[[list[int]], int],
) -> None:
    """The edges of a record: in its length, just past it, and a cut between records (whole
    records only, read as the lines they were made from, nothing skipped)."""
    _audit_cut(capsys, loaded, tmp_path, whole_proto, at(_record_starts(whole_proto)))


def test_a_gzip_protobuf_file_cut_short_is_named(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, tmp_path: Path, whole_proto: bytes
) -> None:
    """A gzipped protobuf file that lost its last bytes: strict, exit 2 naming the file;
    lenient, every request that decompressed is audited as verify reads the day."""
    cut = tmp_path / "cut.pb.gz"
    cut.write_bytes(gzip.compress(whole_proto)[:-3])
    store = str(loaded.day.store)
    assert main(["audit", str(cut), "--store", store]) == 2
    assert f"{cut}: the compressed file is cut short" in capsys.readouterr().err
    code = main(["audit", str(cut), "--store", store, "--json", "--lenient"])
    out, err = capsys.readouterr()
    rows = [row for row in map(json.loads, out.splitlines()) if row.get("type") != "summary"]
    assert f"af-otel audit: skipped {cut}: the compressed file is cut short" in err
    verify_code, verdicts = run(
        capsys, "verify", str(loaded.day.traces), "--store", store, "--json"
    )
    assert (code, sorted(map(key, rows))) == (verify_code, sorted(map(key, verdicts)))


def test_a_block_of_another_format_is_refused(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, tmp_path: Path
) -> None:
    """A vParquet5 block is refused naming its meta.json (exit 2), not misread."""
    block = write_block(loaded.day.traces, tmp_path / "tempo")
    meta = block / "meta.json"
    meta.write_text(meta.read_text(encoding="utf-8").replace("vParquet4", "vParquet5"), "utf-8")
    code = main(["audit", str(tmp_path / "tempo"), "--store", str(loaded.day.store)])
    assert code == 2
    err = capsys.readouterr().err
    assert str(meta) in err
    assert "vParquet5" in err


def test_a_block_span_reads_as_the_reader_reads_its_otlp(tmp_path: Path) -> None:
    """A span with every kind of value (ints, doubles, bools, arrays, a map, Tempo's own and
    dedicated columns, events) reads from a block as the reader reads its OTLP JSON line."""
    import json

    from af_otel.audit.clickhouse import connect_embedded
    from af_otel.audit.tempo import TempoBlocks, span_from_tempo_row
    from af_otel.reader.sources import read_spans

    def kv(key: str, value: dict[str, object]) -> dict[str, object]:
        return {"key": key, "value": value}

    span = {
        "traceId": "0000000000000000000000000000abcd",
        "spanId": "00000000000000ef",
        "parentSpanId": "0000000000000012",
        "name": "chat m",
        "kind": 3,
        "startTimeUnixNano": "1000000000",
        "endTimeUnixNano": "1500000000",
        "attributes": [
            kv(names.RECEIPT_STATE, {"stringValue": "minted"}),
            kv(names.RUN_ID, {"stringValue": "r"}),
            kv(names.EPOCH, {"intValue": "3"}),
            kv("d", {"doubleValue": 0.25}),
            kv("b", {"boolValue": True}),
            kv("a", {"arrayValue": {"values": [{"stringValue": "x"}, {"stringValue": "y"}]}}),
            kv("n", {"arrayValue": {"values": [{"intValue": "1"}, {"intValue": "2"}]}}),
            kv("e", {"arrayValue": {}}),
            kv("m", {"kvlistValue": {"values": [kv("k", {"intValue": "1"})]}}),
            kv("mixed", {"arrayValue": {"values": [{"intValue": "1"}, {"stringValue": "s"}]}}),
            kv("http.method", {"stringValue": "POST"}),
            kv("http.status_code", {"intValue": "200"}),
            kv("gen_ai.request.model", {"stringValue": "m"}),
        ],
        "events": [
            {
                "timeUnixNano": "1200000000",
                "name": names.COMMIT_EVENT,
                "attributes": [kv(names.COMMIT_SEQ, {"intValue": "1"})],
            }
        ],
        "status": {"code": 1},
    }
    resource = {
        "attributes": [
            kv("service.name", {"stringValue": "svc"}),
            kv("k8s.pod.name", {"stringValue": "pod-1"}),
            kv("telemetry.sdk.language", {"stringValue": "python"}),
            kv("host.cores", {"intValue": "4"}),
        ]
    }
    line = {
        "resourceSpans": [
            {"resource": resource, "scopeSpans": [{"scope": {"name": "s"}, "spans": [span]}]}
        ]
    }
    lines = tmp_path / "one.jsonl"
    lines.write_text(json.dumps(line) + "\n", encoding="utf-8")
    _tempo(lines, tmp_path / "tempo")
    (expected,) = read_spans(str(lines))
    scan = TempoBlocks(str(tmp_path / "tempo"), tuple(find_blocks(str(tmp_path / "tempo"))))
    client = connect_embedded()
    try:
        sql, parameters = scan.sql(None, None, scan.row_columns)
        (row,) = client.query(sql, parameters=parameters).result_rows
    finally:
        client.close()
    assert span_from_tempo_row(row, "block") == expected
