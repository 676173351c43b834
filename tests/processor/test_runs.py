"""The run table's bounds: LRU past max_runs, idle expiry, release when the root ends."""

from __future__ import annotations

import time

from af_otel.processor.runs import HISTORY_DEPTH, STATE_DEPTH, Finished, RunTable


def test_least_recently_used_run_is_evicted_past_the_bound() -> None:
    """The table never holds more than max_runs runs; the oldest goes first."""
    table = RunTable(max_runs=3)
    for run_id in ("a", "b", "c"):
        table.get(run_id)
    table.get("a")
    table.get("d")
    assert len(table) == 3
    assert table.peek("b") is None
    assert table.peek("a") is not None


def test_idle_runs_expire() -> None:
    """A run untouched for longer than idle_seconds is gone at the next access."""
    table = RunTable(idle_seconds=0.01)
    table.get("old")
    time.sleep(0.02)
    table.get("new")
    assert table.peek("old") is None


def test_release_waits_for_open_calls() -> None:
    """Releasing a run with a call still open frees it only when that call finishes."""
    table = RunTable()
    run = table.get("r")
    run.number((1, 1), 10)
    table.release("r")
    assert table.peek("r") is run
    run.finish((1, 1), Finished(20, 1, None, None))
    table.settle(run)
    assert table.peek("r") is None


def test_finished_history_is_bounded() -> None:
    """A run keeps HISTORY_DEPTH end times and only STATE_DEPTH requests, however long it runs."""
    table = RunTable()
    run = table.get("r")
    for epoch in range(1, 1000):
        key = (1, epoch)
        run.number(key, epoch * 10)
        run.finish(key, Finished(epoch * 10 + 5, epoch, None, None))
    assert len(run.finished) == HISTORY_DEPTH
    assert run.parent_of(10**9) is not None
    assert sum(1 for f in run.finished if f.request is not None) <= STATE_DEPTH


def test_out_of_order_numbering_is_reported() -> None:
    """Numbering a call that started before one already numbered says start order broke."""
    run = RunTable().get("r")
    assert run.number((1, 1), 100) == (1, False)
    assert run.number((1, 2), 50) == (2, True)
    assert run.number((1, 2), 50) == (2, True)
