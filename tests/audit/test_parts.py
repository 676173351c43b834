"""The audit's parts the command runs only on a terminal or summarizes: the count that gives the
progress its total, the progress line itself, and the tally's worst runs."""

from __future__ import annotations

import io
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from af_otel.audit.calls import CallResult
from af_otel.audit.clickhouse import (
    JsonTable,
    Table,
    _lines,
    _runs,
    connect,
    connect_embedded,
    count_runs,
    run_ranges,
    stream_runs,
)
from af_otel.audit.files import Files
from af_otel.audit.progress import Progress
from af_otel.audit.summary import WORST, Tally
from af_otel.reader.sources.clickhouse import Shard
from tests.audit.conftest import Loaded


def test_the_count_is_the_runs_and_spans_the_stream_gives(loaded: Loaded, clickhouse: Any) -> None:
    """count_runs says how many runs and LLM-call rows the stream then hands on, per shard too."""
    table = Table(loaded.url, "default")
    for shard in (None, Shard(0, 2), Shard(1, 2)):
        runs = list(stream_runs(clickhouse, table, None, shard))
        assert count_runs(clickhouse, table, None, shard) == (
            len(runs),
            sum(len(run.rows) for run in runs),
        )
    assert count_runs(clickhouse, table, None, None) == (12, loaded.rows)


def test_the_runs_are_the_same_whatever_rows_one_query_sorts(
    loaded: Loaded, clickhouse: Any
) -> None:
    """stream_runs sorts a range of runs a query: cut small (a run a query) or not at all (the
    day in one), the runs, their order and their rows' order are the same, shards too."""
    for table in (Table(loaded.url, "default"), JsonTable(loaded.url, "jsonday")):
        for shard in (None, Shard(0, 2), Shard(1, 2)):
            whole = list(stream_runs(clickhouse, table, None, shard, sort_rows=10**9))
            assert len(run_ranges(clickhouse, table, None, shard, 10**9)) == 1
            for rows in (1, 3, 7):
                cut = list(stream_runs(clickhouse, table, None, shard, sort_rows=rows))
                assert cut == whole, (table, shard, rows)
        whole = list(stream_runs(clickhouse, table, None, None))
        ranges = run_ranges(clickhouse, table, None, None, 1)
        assert len(ranges) == len(whole) == 12
        assert all(low == high for low, high in ranges)
        assert [bytes.fromhex(low).decode() for low, _ in ranges] == [run.key for run in whole]


def test_files_come_in_the_same_runs_whatever_rows_one_query_sorts(loaded: Loaded) -> None:
    """The same for span files read by ClickHouse's file(): each range reads the files again."""
    scan = Files(str(loaded.day.traces))
    client = connect_embedded()
    try:
        whole = list(stream_runs(client, scan, None, None, sort_rows=10**9))
        assert len(whole) == 12
        for rows in (1, 4):
            assert list(stream_runs(client, scan, None, None, sort_rows=rows)) == whole
    finally:
        client.close()


def test_a_range_holds_at_most_its_rows_unless_one_run_is_larger(
    loaded: Loaded, clickhouse: Any
) -> None:
    """run_ranges cuts between runs only: each range's rows are at most the budget, or it is one
    run, and together they are every row in key order."""
    table = Table(loaded.url, "default")
    runs = list(stream_runs(clickhouse, table, None, None, sort_rows=10**9))
    for budget in (2, 5, 11):
        ranges = run_ranges(clickhouse, table, None, None, budget)
        assert all(a[1] < b[0] for a, b in pairwise(ranges))
        inside = [
            [run for run in runs if low <= run.key.encode().hex().upper() <= high]
            for low, high in ranges
        ]
        assert [run for group in inside for run in group] == runs
        for group in inside:
            held = sum(len(run.rows) for run in group)
            assert held <= budget or len(group) == 1, (budget, held, len(group))


def test_the_progress_line_shows_runs_and_calls() -> None:
    """On a terminal the line counts runs of the total and calls, with their rates."""
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    with Progress(10, console) as tick:
        tick(4, 9)
        tick(6, 11)
    shown = screen.getvalue()
    assert "10/10" in shown
    assert "20 calls" in shown
    assert "runs/s" in shown


def _result(run: str, status: str, span: int) -> CallResult:
    return CallResult(0, "svc", run, "", span, "t" * 32, f"{span:016x}", "m", status, (), "", "")


def test_the_worst_runs_are_the_most_damaged_then_reconstructed() -> None:
    """Of many runs the tally keeps the WORST worst, most damaged first; clean runs never."""
    tally = Tally()
    for index in range(WORST + 5):
        statuses = ["damaged"] * (index % 3) + ["reconstructed"] * index + ["verified"]
        tally.add_run([_result(f"r{index}", s, n) for n, s in enumerate(statuses, 1)])
    tally.add_run([_result("clean", "verified", 1)])
    worst = tally.worst_runs()
    assert len(worst) == WORST
    assert [(w.damaged, w.reconstructed) for w in worst] == sorted(
        ((i % 3, i) for i in range(WORST + 5)), reverse=True
    )[:WORST]
    assert tally.runs == WORST + 6
    assert tally.calls == sum(i % 3 + i + 1 for i in range(WORST + 5)) + 1


class _Chunks:
    """A stream that hands its bytes out in the given sizes (as a socket or chDB's blocks do)."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data, self.sizes = data, sizes

    def read(self, size: int, /) -> bytes:
        step = min(size, self.sizes.pop(0) if self.sizes else size)
        out, self.data = self.data[:step], self.data[step:]
        return out


@given(
    lines=st.lists(st.binary(min_size=1).map(lambda b: b.replace(b"\n", b" ")), max_size=20),
    sizes=st.lists(st.integers(1, 40), max_size=60),
    last_newline=st.booleans(),
)
def test_the_stream_is_cut_into_its_lines_wherever_its_chunks_end(
    lines: list[bytes], sizes: list[int], last_newline: bool
) -> None:
    """However the bytes arrive, each line comes whole, once, in order, without its newline."""
    data = b"\n".join(lines) + (b"\n" if lines and last_newline else b"")
    assert list(_lines(_Chunks(data, sizes))) == lines


@given(st.lists(st.sampled_from(["a", "b", "é", "span:1:2"]), max_size=12))
def test_lines_in_key_order_make_one_run_a_key(keys: list[str]) -> None:
    """Consecutive lines of one key are one run, holding those lines in their order."""
    keys.sort()
    lines = [
        b'{"k":"' + key.encode().hex().upper().encode() + b'","r":[' + str(n).encode() + b"]}"
        for n, key in enumerate(keys)
    ]
    runs = list(_runs(iter(lines), Table.kind))
    assert [run.key for run in runs] == sorted(set(keys))
    assert [row for run in runs for row in run.rows] == [[n] for n in range(len(keys))]
    assert sum(run.count for run in runs) == len(keys)


def test_an_embedded_table_does_not_merge_while_its_runs_stream(
    loaded: Loaded, clickhouse: Any
) -> None:
    """The embedded engine merges a table's parts in the process that reads it: while the stream
    is open an embedded table's merges are held off (an OPTIMIZE is refused, its parts stay), and
    after the last run they are started again (the same OPTIMIZE merges them into one)."""
    clickhouse.command("CREATE DATABASE IF NOT EXISTS merges")
    clickhouse.command("DROP TABLE IF EXISTS merges.otel_traces")
    clickhouse.command("CREATE TABLE merges.otel_traces AS default.otel_traces")
    for _ in range(2):
        clickhouse.command("INSERT INTO merges.otel_traces SELECT * FROM default.otel_traces")
    other = connect(loaded.url)

    def parts() -> int:
        return int(
            other.query(
                "SELECT count() FROM system.parts"
                " WHERE database = 'merges' AND table = 'otel_traces' AND active"
            ).result_rows[0][0]
        )

    try:
        assert parts() == 2
        runs = stream_runs(clickhouse, Table(loaded.url, "merges"), None, None)
        first = next(runs)
        with pytest.raises(Exception, match="Cancelled merging parts"):
            other.command("OPTIMIZE TABLE merges.otel_traces FINAL")
        assert parts() == 2
        assert len([first, *runs]) == 12  # the last run read: the stream has ended
        other.command("OPTIMIZE TABLE merges.otel_traces FINAL")
        assert parts() == 1
    finally:
        other.command("DROP DATABASE merges")
        other.close()
