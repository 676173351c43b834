"""The audit's progress on a terminal: runs done of those counted, runs/s, calls/s and the ETA,
drawn by rich on stderr when it is a terminal; nothing otherwise (a pipe, a CI log)."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich import progress
from rich.console import Console

__all__ = ["Progress"]


class Progress:
    """Runs and calls done, with their rates (and an ETA when the number of runs is known), on
    stderr through rich when it is a terminal; nothing otherwise."""

    def __init__(self, total: int | None, console: Console | None = None) -> None:
        console = console if console is not None else Console(stderr=True)
        self.bar = progress.Progress(
            progress.TextColumn("auditing runs"),
            progress.BarColumn(),
            progress.MofNCompleteColumn(),
            progress.TextColumn("{task.fields[rates]}"),
            progress.TimeRemainingColumn(),
            console=console,
            disable=not console.is_terminal,
            transient=True,
        )
        self.task = self.bar.add_task("audit", total=total, rates="")
        self.started = time.monotonic()
        self.runs = self.calls = 0

    def __enter__(self) -> Callable[[int, int], None]:
        self.bar.__enter__()
        return self.tick

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

    def tick(self, runs: int, calls: int) -> None:
        self.runs += runs
        self.calls += calls
        seconds = max(time.monotonic() - self.started, 1e-9)
        rates = f"{self.runs / seconds:,.0f} runs/s · {self.calls:,} calls, {self.calls / seconds:,.0f}/s"
        self.bar.update(self.task, advance=runs, rates=rates)
