"""Issue 28: the terminal shows progress as runs/s, calls/s and an ETA (through rich, a real
progress library), and nothing when stderr is not a terminal (a pipe, a CI log).
tests/audit/test_parts.py holds the runs and their rate; here the calls' rate and the ETA column
while the run is under way, and the silence on a pipe."""

from __future__ import annotations

import io
import re

from rich.console import Console

from af_otel.audit.progress import Progress


def test_a_run_under_way_shows_the_calls_rate_and_a_time_remaining() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=160)
    made = Progress(100, console)
    with made as tick:
        tick(4, 9)
        tick(6, 11)
        made.bar.refresh()
        shown = screen.getvalue()
    assert "10/100" in shown
    assert re.search(r"20 calls, [\d,]+/s", shown), shown
    # rich's TimeRemainingColumn: h:mm:ss, or -:--:-- before a speed is known
    assert re.search(r"(\d+:\d\d:\d\d|-:--:--)", shown), shown


def test_nothing_is_drawn_when_stderr_is_not_a_terminal() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=False)
    with Progress(10, console) as tick:
        tick(10, 20)
    assert screen.getvalue() == ""
