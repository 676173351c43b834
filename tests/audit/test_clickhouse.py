"""The audit's one pass over the day (`af_otel.audit.clickhouse`): the window's rows copied once
into a temporary table ordered by run, read a range of runs at a time, and the table gone however
the stream ends; a session that may not create it reads the ranges on the scan itself."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from af_otel.audit.clickhouse import JsonTable, RunRows, Table, connect, stream_runs
from af_otel.audit.files import Files
from af_otel.errors import SourceError
from af_otel.reader.sources.clickhouse import Shard
from tests.audit.conftest import Loaded

_COPIES = "SELECT count() FROM system.databases WHERE name LIKE 'af_otel_audit_%'"


def _copies(client: Any) -> int:
    return int(client.query(_COPIES).result_rows[0][0])


@pytest.fixture
def read_only(loaded: Loaded) -> Iterator[Any]:
    """A session on the day's engine that may read and set settings but not create anything
    (``readonly = 2``, as a server's read-only profile)."""
    client = connect(loaded.url)
    client.command("SET readonly = 2")
    try:
        yield client
    finally:
        client.close()


def test_a_read_only_session_may_not_create_the_table(read_only: Any) -> None:
    """The refusal the fallback is for is real: the session cannot create a database."""
    with pytest.raises(Exception, match="readonly"):
        read_only.command("CREATE DATABASE af_otel_audit_refused")


@pytest.mark.parametrize("shard", [None, Shard(0, 2), Shard(1, 2)])
def test_the_one_pass_gives_the_runs_the_ranges_give(
    loaded: Loaded, clickhouse: Any, read_only: Any, shard: Shard | None
) -> None:
    """The runs read through the temporary table are the runs, rows and order that one query a
    range on the table itself gives (a session refused the table), for both table variants, each
    shard, and any rows a range."""
    for table in (Table(loaded.url, "default"), JsonTable(loaded.url, "jsonday")):
        said: list[str] = []
        ranges = list(stream_runs(read_only, table, None, shard, warn=said.append))
        assert len(said) == 1
        assert ranges
        for rows in (1, 5, 10**9):
            assert list(stream_runs(clickhouse, table, None, shard, sort_rows=rows)) == ranges


def test_the_fallback_says_why_on_stderr(
    loaded: Loaded, read_only: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no warn given, one stderr line names the table read, the refusal, and the cost."""
    runs = list(stream_runs(read_only, Table(loaded.url, "default"), None, None))
    assert len(runs) == 12
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"af-otel audit: {loaded.url} default.otel_traces: ")
    assert "could not be made" in lines[0]
    assert "readonly" in lines[0]
    assert "a scan of the window" in lines[0]


def test_files_are_read_once_into_the_table(loaded: Loaded) -> None:
    """Span files go through the same one pass: their runs are those the ranges give."""
    scan = Files(str(loaded.day.traces))
    client = connect(loaded.url)
    try:
        copied = list(stream_runs(client, scan, None, None))
        assert len(copied) == 12
        client.command("SET readonly = 2")
        said: list[str] = []
        assert list(stream_runs(client, scan, None, None, warn=said.append)) == copied
        assert len(said) == 1
    finally:
        client.close()


def _first(runs: Iterator[RunRows]) -> RunRows:
    return next(runs)


def test_the_table_is_there_while_the_runs_stream_and_gone_after(
    loaded: Loaded, clickhouse: Any
) -> None:
    """The temporary table lives in a database of its own while the stream is open, and is
    dropped after the last run."""
    other = connect(loaded.url)
    try:
        runs = stream_runs(clickhouse, Table(loaded.url, "default"), None, None)
        first = _first(runs)
        assert _copies(other) == 1
        assert len([first, *runs]) == 12
        assert _copies(other) == 0
    finally:
        other.close()


def test_the_table_is_dropped_on_an_early_close(loaded: Loaded, clickhouse: Any) -> None:
    """A consumer that stops after the first run (an early exit) leaves no table behind."""
    other = connect(loaded.url)
    try:
        runs = stream_runs(clickhouse, Table(loaded.url, "default"), None, None)
        _first(runs)
        assert _copies(other) == 1
        runs.close()
        assert _copies(other) == 0
    finally:
        other.close()


def test_the_table_is_dropped_when_the_stream_fails(loaded: Loaded, clickhouse: Any) -> None:
    """An exception thrown into the stream propagates as itself, and the table is dropped."""
    runs = stream_runs(clickhouse, Table(loaded.url, "default"), None, None)
    _first(runs)
    with pytest.raises(KeyError, match="a consumer's failure"):
        runs.throw(KeyError("a consumer's failure"))
    assert _copies(clickhouse) == 0


def test_a_table_that_does_not_exist_is_named(loaded: Loaded, clickhouse: Any) -> None:
    """A scan of no table is an error naming it, and leaves no temporary table behind."""
    said: list[str] = []
    with pytest.raises(SourceError, match="nosuch"):
        list(
            stream_runs(
                clickhouse, Table(loaded.url, "default", "nosuch"), None, None, warn=said.append
            )
        )
    assert _copies(clickhouse) == 0
    assert said == []  # the error is the scan's, not a refusal to fall back on
