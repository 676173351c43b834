"""The audit's parts the command runs only on a terminal or summarizes: the count that gives the
progress its total, the progress line itself, and the tally's worst runs."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from af_otel.audit.calls import CallResult
from af_otel.audit.clickhouse import Shard, Table, count_runs, stream_runs
from af_otel.audit.progress import Progress
from af_otel.audit.summary import WORST, Tally
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
