"""``af-otel audit``: verify every LLM call of a time window in ClickHouse, and report.

Thin over the rest of `af_otel.audit` (none of which imports the ``audit`` extra until a
connection is made or progress shown, so that the ``af-otel`` command and the core package need
none of it): one query streams the window's runs, each run is verified by the reader's own
`served_views` and `verify` (here or on ``--workers`` processes), and each call's result goes to
``--results`` and ``--json`` as it comes. The terminal shows progress and ends on a summary, then
the same last line as ``verify``; the audit is held to the same gate options as ``verify``
(``--require``, ``--fail-on``, ``--max-reconstructed``) by the reader's own `Gate`, fed one call at
a time so that memory stays bounded by the largest run, and exits as ``verify`` does
(`EXIT_CODES`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from itertools import chain
from typing import TYPE_CHECKING, Any, NoReturn

from af_otel.audit.calls import CallResult, audit_batches, run_records
from af_otel.audit.clickhouse import (
    Scan,
    Table,
    connect,
    connect_embedded,
    count_runs,
    referencing_rows,
    stream_runs,
    table_scan,
)
from af_otel.audit.inputs import open_files
from af_otel.audit.results import ResultsWriter
from af_otel.audit.summary import Tally
from af_otel.cli.options import add_table_options
from af_otel.cli.read import (
    _EXITS,
    EXIT_ERROR,
    NothingToRead,
    _guarded,
    _json_line,
    add_key_options,
    add_policy_options,
    add_store_options,
    key_from_args,
    open_checked_store,
    policy_from_args,
    print_outcome,
    summary_line,
)
from af_otel.errors import ReaderError
from af_otel.reader.policy import Gate
from af_otel.reader.sources.clickhouse import DEFAULT_DATABASE, DEFAULT_TABLE, Shard
from af_otel.reader.sources.stream import SourceFormat, SpanStream
from af_otel.reader.sources.window import Window
from af_otel.reader.verdict_json import SCHEMA, summary_json
from af_otel.reader.verify import VerdictStatus

if TYPE_CHECKING:
    from af_otel.audit.clickhouse import RunRows

__all__ = ["audit_command", "register"]

_EXTRA = "af-otel audit needs the audit extra: pip install 'af-otel[audit]'"
# Unreadable rows described on stderr (all are counted): the first few say what is wrong.
_PROBLEMS_SHOWN = 5


def register(subparsers: Any) -> None:
    """Add ``audit`` to the ``af-otel`` command."""
    audit = subparsers.add_parser(
        "audit",
        help="verify every LLM call of a time window in ClickHouse (otel_traces); gate and exit "
        "as verify",
        description="Verify every LLM call of a time window in ClickHouse (or in span files: "
        "OTLP JSON lines or protobuf, Parquet, Tempo blocks, an awss3exporter prefix, read "
        "through embedded chDB), with the same verdicts as `af-otel verify`: "
        "one query streams the runs, each run is verified apart; results go to a ClickHouse "
        "table (--results) or JSON lines (--json); made to gate a pipeline as verify is, by "
        "default on damage alone, or on a policy (--require, --fail-on, --max-reconstructed).",
        **_EXITS,
    )
    audit.add_argument(
        "files",
        nargs="?",
        metavar="FILES",
        help="span files to audit instead of a table: OTLP JSON lines or protobuf (a path or a "
        "quoted glob, .gz too), Parquet with the table's columns (*.parquet), a folder of Tempo "
        "vParquet4 blocks, or an awss3exporter prefix copied to a folder",
    )
    audit.add_argument(
        "--clickhouse",
        metavar="URL",
        help="chdb:///dir (embedded chDB) or http(s)://host:8123 (a server or cluster)",
    )
    add_table_options(audit)
    audit.set_defaults(database=DEFAULT_DATABASE, table=DEFAULT_TABLE)
    audit.add_argument("--since", metavar="DURATION", help="the last DURATION (90s, 15m, 1h, 2d)")
    audit.add_argument("--start", metavar="TIME", help="window start, ISO 8601 or Unix seconds")
    audit.add_argument("--end", metavar="TIME", help="window end (default now; with --start)")
    audit.add_argument(
        "--shard", metavar="K/N", help="only the runs with cityHash64(run) %% N = K (0 <= K < N)"
    )
    audit.add_argument(
        "--workers", metavar="N", type=int, default=1, help="verify on N local processes"
    )
    audit.add_argument(
        "--results",
        metavar="TABLE",
        help="write one row a call into TABLE (a ReplacingMergeTree it creates in --database)",
    )
    audit.add_argument(
        "--json",
        action="store_true",
        help=f"one JSON object a call on stdout, then verify's summary object ({SCHEMA})",
    )
    add_store_options(audit)
    add_key_options(audit)
    add_policy_options(audit)
    audit.set_defaults(func=_guarded(audit_command), source_parser=audit)


def _window(args: argparse.Namespace, fail: Callable[[str], NoReturn]) -> Window | None:
    if args.since is not None and (args.start is not None or args.end is not None):
        fail("--since and --start/--end are two ways to give a window; use one")
    if args.end is not None and args.start is None:
        fail("--end needs --start")
    try:
        if args.since is not None:
            return Window.since(args.since)
        if args.start is not None:
            return Window.between(args.start, args.end)
    except ValueError as exc:
        fail(f"{'--since' if args.since is not None else '--start/--end'}: {exc}")
    return None


def audit_command(args: argparse.Namespace) -> int:
    fail: Callable[[str], NoReturn] = args.source_parser.error
    window = _window(args, fail)
    if args.workers < 1:
        fail(f"--workers must be at least 1, got {args.workers}")
    try:  # the extra, checked before any work
        import clickhouse_connect  # noqa: F401, PLC0415

        from af_otel.audit.progress import Progress  # noqa: PLC0415 - imports rich
    except ImportError:
        print(_EXTRA, file=sys.stderr)
        return EXIT_ERROR

    if (args.files is None) == (args.clickhouse is None):
        fail("give FILES or --clickhouse URL (one of them)")
    if args.files is not None and args.results:
        fail("--results writes into ClickHouse: it goes with --clickhouse URL")
    try:
        shard = Shard.parse(args.shard) if args.shard else None
        table = (
            None if args.files is not None else Table(args.clickhouse, args.database, args.table)
        )
        results = Table(args.clickhouse, args.database, args.results) if args.results else None
    except ValueError as exc:
        fail(str(exc))
    with ExitStack() as clients:
        # A table's variant (plain or JSON) is asked of ClickHouse below.
        scan, unread = _input_scan(args, table, clients)
        where = (
            str(scan) + (f" ({window})" if window else "") + (f" shard {shard}" if shard else "")
        )

        def opened() -> Any:
            client = (
                connect_embedded()
                if args.clickhouse is None
                else connect(args.clickhouse, args.database)
            )
            clients.callback(client.close)
            return client

        if table is not None:
            scan = table_scan(opened(), table.url, table.database, table.table)
        runs = stream_runs(opened(), scan, window, shard)
        # Closed before its client (an early exit): it starts an embedded table's merges again.
        clients.callback(runs.close)
        first = next(runs, None)
        if first is None:
            _say_skipped(unread.skipped, 0, where)
            raise NothingToRead(f"no span of {where} carries af.* attributes: nothing to verify")
        store = open_checked_store(
            args.store,
            run_records(referencing_rows(opened(), scan, window, shard), where, lenient=True)[0],
            warn=lambda text: print(f"af-otel audit: {text}", file=sys.stderr),
        )
        writer = ResultsWriter(opened(), results) if results else None
        # The number of runs is counted only for a person watching: it gives the ETA.
        expected = count_runs(opened(), scan, window, shard)[0] if sys.stderr.isatty() else None
        with Progress(expected) as tick:
            tally, skipped, gate = _verify_runs(
                args, chain((first,), runs), store, where, writer, tick
            )
        skipped += unread.skipped
        if writer is not None:
            writer.close()
    out = sys.stderr if args.json else sys.stdout
    _say_skipped(skipped, tally.calls, where)
    for line in tally.lines():
        print(line, file=out)
    if writer is not None:
        print(f"results: {writer.written} row(s) written into {results}", file=out)
    print(f"store {store.url}", file=out)
    print(summary_line(tally.counts(), where), file=out)
    outcome = gate.outcome()
    if args.json:  # the rows have no "type"; the summary is the one object that has
        sys.stdout.write(_json_line(summary_json(outcome, read=where, store=store.url)) + "\n")
    print_outcome(outcome, out)
    return outcome.exit_code


def _input_scan(
    args: argparse.Namespace, table: Table | None, clients: ExitStack
) -> tuple[Scan, SpanStream]:
    """The table, or the files FILES names (what is at the path says how to read it; a temporary
    folder for protobuf lives as long as ``clients``), and the stream that holds what their
    protobuf held and could not be read (a record cut short): raised, or when lenient skipped,
    named on stderr now and counted with the rows."""
    unread = SpanStream(str(args.files), SourceFormat.OTLP_PROTO, lenient=args.lenient)
    if table is not None:
        return table, unread
    scan = open_files(args.files, clients, unread)
    for problem in unread.problems[:_PROBLEMS_SHOWN]:
        print(f"af-otel audit: skipped {problem}", file=sys.stderr)
    return scan, unread


def _say_skipped(skipped: int, calls: int, where: str) -> None:
    """Say how many rows or records were skipped; with no call left, what could not be read may
    have held the calls: an error, not "nothing to verify"."""
    if not skipped:
        return
    print(
        f"af-otel audit: skipped {skipped} unreadable row(s) or record(s) in {where}",
        file=sys.stderr,
    )
    if not calls:
        raise ReaderError(f"no LLM call left in {where} after skipping {skipped} row(s)")


def _verify_runs(
    args: argparse.Namespace,
    runs: Iterator[RunRows],
    store: Any,
    where: str,
    writer: ResultsWriter | None,
    tick: Callable[[int, int], None],
) -> tuple[Tally, int, Gate[CallResult]]:
    """Verify every run, streaming each batch's rows to --json and --results as it comes: the
    tally, the rows skipped, and the gate. The gate keeps counts and the first few calls of each
    rule broken: bounded, whatever the day's size (the rows and --results hold every call)."""
    tally, skipped = Tally(), 0
    gate: Gate[CallResult] = Gate(policy_from_args(args))
    for batch in audit_batches(
        runs,
        store,
        key=key_from_args(args),
        source=where,
        workers=args.workers,
        lenient=args.lenient,
    ):
        if args.json:
            for result in batch.results:
                sys.stdout.write(_json_line(result.as_json()) + "\n")
        tally.add_run(batch.results)
        for result in batch.results:
            gate.add(result, VerdictStatus(result.status), result.gaps)
        if writer is not None:
            writer.add(batch.results)
        for problem in batch.problems[: max(0, _PROBLEMS_SHOWN - skipped)]:
            print(f"af-otel audit: skipped {problem}", file=sys.stderr)
        skipped += batch.skipped
        tick(batch.runs, len(batch.results))
    return tally, skipped, gate
