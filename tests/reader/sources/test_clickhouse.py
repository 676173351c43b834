"""ClickHouse as a Source: the exporter's table (its exact DDL, rows as the exporter writes them from
spans the real processor enriched, in embedded chDB) answers every ask with the spans the OTLP
file they were exported from holds: the whole table, one trace, the traces of a window, a shard's
runs; a row it cannot read is named (strict) or counted (lenient)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import clickhouse_connect
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from af_otel import names
from af_otel.errors import ReaderError, SourceError, TraceNotFoundError
from af_otel.reader.records import SpanRecord
from af_otel.reader.sources import (
    AllSpans,
    ClickHouseSource,
    InWindow,
    NoteKind,
    OneTrace,
    Source,
    SourceFormat,
    Window,
    read_spans,
)
from af_otel.reader.sources.clickhouse import Shard
from tests.audit.conftest import Loaded, load_day
from tests.audit.exporter import COLUMNS, exporter_rows
from tests.without_otel import run_without

Key = tuple[str, str]


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    return load_day(tmp_path_factory.mktemp("clickhouse-source"))


@pytest.fixture(scope="module")
def file_spans(day: Loaded) -> dict[Key, SpanRecord]:
    return _by_id(read_spans(str(day.day.traces)))


def _by_id(records: Iterable[SpanRecord]) -> dict[Key, SpanRecord]:
    out: dict[Key, SpanRecord] = {}
    for record in records:
        assert (record.trace_id, record.span_id) not in out, "a span read twice"
        out[(record.trace_id, record.span_id)] = record
    return out


def _llm(span: SpanRecord) -> bool:
    """The spans af_otel enriched, as the table's filter keeps them (the test's own oracle)."""
    attrs = span.attributes
    return (
        any(k in attrs for k in (names.RUN_ID, names.EPOCH, names.RECEIPT_STATE))
        or any(k.startswith("af.receipt.") for k in attrs)
        or any(e.name == names.COMMIT_EVENT for e in span.events)
    )


def test_the_whole_table_is_the_file_s_spans(
    day: Loaded, file_spans: dict[Key, SpanRecord]
) -> None:
    """AllSpans reads every row: the file's spans, LLM calls and the rest, each once; the JSON
    variant gives them with every type kept, equal to the file's records."""
    source: Source = ClickHouseSource(day.url)
    stream = source.read(AllSpans())
    plain = _by_id(stream)
    assert plain.keys() == file_spans.keys()
    assert len(plain) == day.rows
    assert stream.format is SourceFormat.CLICKHOUSE
    assert stream.source == f"{day.url} default.otel_traces"
    assert source.label == f"ClickHouse at {day.url} (default.otel_traces)"
    for key, want in file_spans.items():
        got = plain[key]
        assert (got.name, got.start_ns, got.end_ns, got.events) == (
            want.name,
            want.start_ns,
            want.end_ns,
            want.events,
        )
        assert {k: v for k, v in got.attributes.items() if k.startswith("af.")} == {
            k: v for k, v in want.attributes.items() if k.startswith("af.")
        }
    assert _by_id(ClickHouseSource(day.url, "jsonday").read(AllSpans())) == file_spans


def test_one_trace_is_every_span_of_that_trace(
    day: Loaded, file_spans: dict[Key, SpanRecord]
) -> None:
    """OneTrace gives exactly the trace's spans, whatever case or leading zeros the id has."""
    source = ClickHouseSource(day.url)
    traces = sorted({trace for trace, _ in file_spans})
    assert len(traces) > 3
    for trace in traces:
        asked = trace.upper().lstrip("0") if trace.startswith("0") else trace.upper()
        stream = source.read(OneTrace(asked))
        got = _by_id(stream)
        assert got.keys() == {k for k in file_spans if k[0] == trace}
        assert stream.traces_read == stream.traces_expected == 1


def test_a_trace_the_table_does_not_hold_is_not_found(day: Loaded) -> None:
    """An id of no row raises TraceNotFoundError when asked, naming the table and the id."""
    with pytest.raises(TraceNotFoundError, match=r"ClickHouse at .* trace not found \(0+ab\)"):
        ClickHouseSource(day.url).read(OneTrace("ab"))


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_window_reads_whole_the_traces_whose_calls_started_in_it(
    day: Loaded, file_spans: dict[Key, SpanRecord], data: st.DataObject
) -> None:
    """InWindow reads every span of each trace in which an enriched span started inside the
    window, the oldest `limit` traces only, and notes the cut when the limit is reached."""
    starts = sorted({s.start_ns for s in file_spans.values()})
    low = data.draw(st.sampled_from(starts), label="start")
    high = data.draw(st.sampled_from([s for s in starts if s > low] + [starts[-1] + 1]))
    limit = data.draw(st.integers(1, 40), label="limit")
    first: dict[str, int] = {}
    for span in file_spans.values():
        if _llm(span) and low <= span.start_ns < high:
            first[span.trace_id] = min(first.get(span.trace_id, span.start_ns), span.start_ns)
    oldest = sorted(first, key=lambda trace: (first[trace], trace))[:limit]
    stream = ClickHouseSource(day.url).read(InWindow(Window(low, high), limit=limit))
    got = _by_id(stream)
    assert got.keys() == {k for k in file_spans if k[0] in oldest}
    assert stream.traces_expected == stream.traces_read == len(oldest)
    cut = [n for n in stream.notes if n.kind is NoteKind.TRUNCATED]
    assert bool(cut) == (len(first) >= limit)


def test_shards_split_the_calls_by_run(day: Loaded, file_spans: dict[Key, SpanRecord]) -> None:
    """A shard reads only LLM-call spans, the two halves apart and together the whole."""
    halves = [_by_id(ClickHouseSource(day.url, shard=Shard(k, 2)).read(AllSpans())) for k in (0, 1)]
    assert all(halves)
    assert not halves[0].keys() & halves[1].keys()
    assert halves[0].keys() | halves[1].keys() == {k for k, s in file_spans.items() if _llm(s)}
    runs = [{s.attributes.get(names.RUN_ID) for s in half.values()} for half in halves]
    assert not (runs[0] & runs[1]) - {None}


@pytest.fixture(scope="module")
def torn(day: Loaded, tmp_path_factory: pytest.TempPathFactory) -> ClickHouseSource:
    """The day's first three spans in database ``torn``, the second with a SpanKind pdata never
    writes."""
    client = clickhouse_connect.get_client(dsn=day.url)
    try:
        rows = list(exporter_rows(day.day.traces.read_text("utf-8").splitlines()))[:3]
        rows[1][COLUMNS.index("SpanKind")] = "Sideways"
        client.command("CREATE DATABASE IF NOT EXISTS torn")
        client.command("CREATE TABLE torn.otel_traces AS default.otel_traces")
        client.insert("otel_traces", rows, column_names=list(COLUMNS), database="torn")
    finally:
        client.close()
    return ClickHouseSource(day.url, "torn")


def test_an_unreadable_row_is_named_or_skipped(torn: ClickHouseSource) -> None:
    """Strict, the row that cannot be read raises naming its trace and span; lenient, the other
    rows are read and the one skipped is counted and described."""
    with pytest.raises(
        SourceError, match=r"torn\.otel_traces trace [0-9a-f]{32} span [0-9a-f]{16}"
    ):
        list(torn.read(AllSpans()))
    stream = torn.read(AllSpans(), lenient=True)
    assert len(list(stream)) == 2
    assert (stream.skipped_spans, stream.skipped_lines) == (1, 0)
    assert "SpanKind" in stream.problems[0]


def test_a_search_is_refused_and_bad_names_never_reach_sql(day: Loaded) -> None:
    """A window with a search is refused naming the source; a database or table that is not a
    plain identifier is refused before any SQL, naming its option."""
    with pytest.raises(ReaderError, match=r"ClickHouse at .* reads every span, one trace"):
        ClickHouseSource(day.url).read(InWindow(Window(0, 1), search="x"))
    with pytest.raises(ValueError, match=r"--table 'x; DROP TABLE y'"):
        ClickHouseSource(day.url, table="x; DROP TABLE y")
    with pytest.raises(ValueError, match=r"--database 'a.b'"):
        ClickHouseSource(day.url, database="a.b")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("clickhouse://h:9000", "expected chdb:///dir (embedded) or http(s)://host:8123"),
        ("chdb://", "name the directory"),
    ],
)
def test_a_url_of_another_kind_names_the_option(url: str, says: str) -> None:
    """A URL that is neither chdb:// with a directory nor http(s):// is refused naming it."""
    with pytest.raises(SourceError, match=re.escape(f"--clickhouse {url}: {says}")):
        list(ClickHouseSource(url).read(AllSpans()))


def test_a_table_that_is_not_there_is_named(day: Loaded) -> None:
    """A table the database does not hold: SourceError naming --clickhouse and the table."""
    with pytest.raises(SourceError, match=r"--clickhouse .* default\.nothing_here: "):
        list(ClickHouseSource(day.url, table="nothing_here").read(AllSpans()))


def test_without_the_extra_the_read_names_the_option_and_the_extra(tmp_path: Path) -> None:
    """Without clickhouse-connect the reader imports and the read fails with an AfOtelError
    naming --clickhouse and the extra to install; `verify` exits 2 saying so."""
    code = f"""
        import af_otel.reader.sources as sources
        from af_otel.errors import AfOtelError
        try:
            list(sources.ClickHouseSource("chdb://{tmp_path}").read(sources.AllSpans()))
        except AfOtelError as exc:
            print("refused:", exc)
        from af_otel.cli import main
        print("exit", main(["verify", "--clickhouse", "chdb://{tmp_path}"]))
    """
    result = run_without(code, blocked="clickhouse_connect")
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == "exit 2", result.stderr
    assert lines[0].startswith(f"refused: --clickhouse chdb://{tmp_path}: reading ClickHouse needs")
    assert "pip install 'af-otel[audit]'" in lines[0]
    assert "pip install 'af-otel[audit]'" in result.stderr
