"""What ``af-otel demo`` ends with: the demo's trace read back, verdict by verdict, its report, the
tampered copy verified, and the commands to try next."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import TextIO

from af_otel.cli.loading import print_notes, verify_all
from af_otel.present import render_report
from af_otel.present.terminal import verdict_line
from af_otel.reader.policy import EXIT_DAMAGED, EXIT_PASSED
from af_otel.reader.sources import SourceNote, read_spans
from af_otel.reader.verify import Verdict, VerdictStatus
from af_otel.reader.view import ServedView, served_views
from af_otel.store import open_store

__all__ = ["demo_readback", "next_commands"]


def demo_readback(out: str | os.PathLike[str], *, stream: TextIO | None = None) -> int:
    """What ``af-otel demo`` ends with: read back ``out/traces.jsonl`` with ``out/store``, print
    every call's verdict and gaps, write ``out/report.html``, verify the tampered copy
    ``out/tampered.jsonl`` if there is one, and print the commands to try next. Returns 0 when
    the trace has no damaged call and the tampered copy has one, else 1."""
    target = stream if stream is not None else sys.stdout
    folder = Path(out)
    traces, store, tampered = folder / "traces.jsonl", folder / "store", folder / "tampered.jsonl"
    views, verdicts, notes = _demo_verdicts(traces, store)
    print(f"read back {traces}:", file=target)
    for view, verdict in zip(views, verdicts, strict=True):
        gaps = ", ".join(f"{g.kind} ({g.cause})" if g.cause else g.kind for g in view.gaps)
        print(f"  {verdict_line(verdict)}", file=target)
        print(f"      gaps: {gaps or 'none'}", file=target)
    report = folder / "report.html"
    report.write_text(
        render_report(views, verdicts, title="af-otel demo", source=str(traces), notes=notes),
        encoding="utf-8",
    )
    print(f"  report  {report}", file=target)
    clean = not any(v.status is VerdictStatus.DAMAGED for v in verdicts)
    damaged: list[Verdict] = []
    if tampered.exists():
        _, altered, _ = _demo_verdicts(tampered, store)
        print(f"read back {tampered} (the tampered copy):", file=target)
        for verdict in altered:
            print(f"  {verdict_line(verdict)}", file=target)
        damaged = [v for v in altered if v.status is VerdictStatus.DAMAGED]
    print("next, try:", file=target)
    for line in next_commands(folder, damaged[0] if damaged else None):
        print(f"  {line}", file=target)
    return EXIT_PASSED if clean and (damaged or not tampered.exists()) else EXIT_DAMAGED


def _demo_verdicts(
    traces: Path, store: Path
) -> tuple[tuple[ServedView, ...], list[Verdict], tuple[SourceNote, ...]]:
    stream = read_spans(traces)
    records = tuple(stream)
    print_notes(stream, str(traces), "demo")
    views = served_views(records, store=open_store(store, must_exist=True))
    return views, verify_all(views, None), tuple(stream.notes)


def next_commands(folder: Path, damaged: Verdict | None) -> list[str]:
    """The reading commands to try on what the demo wrote, with its paths and store; ``served``
    shows the first damaged call of the tampered copy, when there is one."""
    traces, store = shlex.quote(str(folder / "traces.jsonl")), shlex.quote(str(folder / "store"))
    tampered = shlex.quote(str(folder / "tampered.jsonl"))
    report = shlex.quote(str(folder / "report.html"))
    served = f"af-otel served {traces} --store {store}"
    if damaged is not None and damaged.run_id:
        served = (
            f"af-otel served {tampered} --store {store} "
            f"--run {shlex.quote(damaged.run_id)} --epoch {damaged.epoch}"
        )
    return [
        f"af-otel verify {traces} --store {store}",
        f"af-otel verify {tampered} --store {store}",
        served,
        f"af-otel gaps {traces} --store {store}",
        f"af-otel report {traces} --store {store} -o {report}",
    ]
