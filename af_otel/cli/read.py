"""``af-otel served | verify | gaps | report``: the reading commands, thin over `served_views`,
`verify` and `render_report`.

Every command reads spans from a file (any format `read_spans` knows) or from a backend, with the
options of `af_otel.cli.options`, loaded by `af_otel.cli.loading`; what it prints for a view or a
verdict is `af_otel.present.terminal`'s. Every command exits by `EXIT_CODES`, so that ``verify``
can gate a pipeline.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

import orjson
from opentelemetry import metrics

from af_otel import names
from af_otel.cli import EXIT_PIPE
from af_otel.cli.loading import (
    NothingToRead,
    load_views,
    open_checked_store,
    verdicts_or_none,
    verify_all,
)
from af_otel.cli.options import (
    add_key_options,
    add_policy_options,
    add_source_options,
    add_store_options,
    key_from_args,
    policy_from_args,
)
from af_otel.cli.request import print_requests
from af_otel.errors import AfOtelError
from af_otel.model.gap_kinds import SERVED_GAPS
from af_otel.present import render_report
from af_otel.present.terminal import indent, print_view, verdict_line, view_json
from af_otel.reader.gaps import gap_why
from af_otel.reader.policy import EXIT_DAMAGED, EXIT_PASSED, EXIT_POLICY, Outcome, judge
from af_otel.reader.verdict_json import SCHEMA, summary_json, verdict_json
from af_otel.reader.verify import Verdict, VerdictStatus
from af_otel.reader.view import ServedView

# `af_otel.audit.command` builds its command from these; the options and the store check are
# defined in `af_otel.cli.options` and `af_otel.cli.loading`, and listed here for it.
__all__ = [
    "NothingToRead",
    "add_key_options",
    "add_policy_options",
    "add_store_options",
    "count_verdicts",
    "key_from_args",
    "open_checked_store",
    "policy_from_args",
    "print_outcome",
    "register",
    "run_end_lines",
    "summary_line",
]

EXIT_OK: Final = EXIT_PASSED
EXIT_ERROR: Final = 2
EXIT_NOTHING: Final = 3
EXIT_CODES: Final = f"""\
exit status:
  {EXIT_OK}    every LLM call verified or reconstructed (and the policy of verify or audit,
       if given, met)
  {EXIT_DAMAGED}    at least one LLM call is damaged (verify and audit only: the others show it
       and exit 0); damage wins over a broken policy
  {EXIT_ERROR}    the input could not be read (missing file, unknown format, a bad line without
       --lenient, a keyed receipt without its key, an unknown --run or --epoch, a usage
       error), or the store is unusable: the trace refers to stored blobs and the store
       (--store, else ${names.ENV_STORE}, else {names.DEFAULT_STORE}) does not exist, is not a directory,
       or holds none of them
  {EXIT_NOTHING}    nothing to verify: no span carries af.* attributes (an empty file included)
  {EXIT_POLICY}    verify's policy is not met, or audit's (--require, --fail-on,
       --max-reconstructed), and nothing is damaged; the output names each rule broken and
       the calls breaking it
  {EXIT_PIPE}  the output pipe was closed (e.g. by head); nothing more is printed
"""


_EXITS: Final[dict[str, Any]] = {
    "epilog": EXIT_CODES,
    "formatter_class": argparse.RawDescriptionHelpFormatter,
}


def register(subparsers: Any) -> None:
    """Add ``served``, ``verify``, ``gaps`` and ``report`` to the ``af-otel`` command."""
    served = subparsers.add_parser("served", help="print what each LLM call was served", **_EXITS)
    add_source_options(served)
    add_key_options(served)
    served.add_argument("--full", action="store_true", help="print long contents whole")
    served.add_argument("--json", action="store_true", help="one JSON object per view")
    served.add_argument(
        "--request",
        action="store_true",
        help="print each call's provider-native request body rebuilt from the record, one JSON "
        "object a line (exit 2 if the record cannot rebuild one; stderr names the gap)",
    )
    served.set_defaults(func=_guarded(served_command))

    check = subparsers.add_parser(
        "verify",
        help="recompute every receipt; exit 1 if any call is damaged, 4 if the policy is not "
        "met, 2 on error, 3 if none",
        description="Recompute every receipt and print one verdict a call, the store read and "
        "a summary; made to gate a pipeline, by default on damage alone, or on a policy "
        "(--require, --fail-on, --max-reconstructed).",
        **_EXITS,
    )
    add_source_options(check)
    add_key_options(check)
    add_policy_options(check)
    check.add_argument(
        "--json",
        action="store_true",
        help=f"JSON lines ({SCHEMA}, docs/verdict.schema.json): one object per call, then a summary",
    )
    check.set_defaults(func=_guarded(verify_command))

    gaps = subparsers.add_parser("gaps", help="list LLM calls by gap kind", **_EXITS)
    add_source_options(gaps)
    gaps.add_argument("--kind", choices=list(SERVED_GAPS), help="only this kind")
    gaps.set_defaults(func=_guarded(gaps_command))

    report = subparsers.add_parser("report", help="write one self-contained HTML report", **_EXITS)
    add_source_options(report)
    add_key_options(report)
    report.add_argument("-o", "--output", default="report.html", help="where to write the page")
    report.add_argument("--title", default="af_otel report", help="the page title")
    report.set_defaults(func=_guarded(report_command))


def _guarded(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Read-path errors print one line naming what failed and exit 2 (1 means damage); input
    with nothing to read says so and exits 3. A closed output pipe is left to `af_otel.cli.main`."""

    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except BrokenPipeError:
            raise
        except NothingToRead as exc:
            print(f"af-otel {args.command}: {exc}", file=sys.stderr)
            return EXIT_NOTHING
        except (AfOtelError, OSError) as exc:
            print(f"af-otel {args.command}: {exc}", file=sys.stderr)
            return EXIT_ERROR

    return run


def _json_line(value: Any) -> str:
    """One line of ``--json`` output: strict JSON, never a repr (`json_text` is for people)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def served_command(args: argparse.Namespace) -> int:
    loaded = load_views(args)
    if getattr(args, "request", False):
        return print_requests(loaded.views, key_from_args(args), store=loaded.store)
    verdicts = verdicts_or_none(loaded.views, key_from_args(args))
    for view, verdict in zip(loaded.views, verdicts, strict=True):
        if args.json:
            sys.stdout.write(_json_line(view_json(view, verdict)) + "\n")
        else:
            print_view(view, verdict, args.full, sys.stdout, loaded.notes)
    return EXIT_OK


def count_verdicts(
    verdicts: Sequence[Verdict], provider: metrics.MeterProvider | None = None
) -> None:
    """Add the verdicts to the ``af_otel.verdicts`` counter (label ``verdict``) of ``provider``,
    by default the global one: a no-op unless an SDK is configured, as under
    ``opentelemetry-instrument af-otel verify ...``, whose exporters flush at exit."""
    meter = (provider or metrics.get_meter_provider()).get_meter("af_otel")
    counter = meter.create_counter(
        names.METRIC_VERDICTS,
        unit="{call}",
        description="LLM calls verified by af-otel verify, by verdict",
    )
    for status in VerdictStatus:
        count = sum(v.status is status for v in verdicts)
        if count:
            counter.add(count, {names.METRIC_ATTR_VERDICT: status.value})


def verify_command(args: argparse.Namespace) -> int:
    loaded = load_views(args)
    views, where, store = loaded.views, loaded.where, loaded.store
    verdicts = verify_all(views, key_from_args(args))
    outcome = judge(verdicts, policy_from_args(args))
    for verdict in verdicts:
        if args.json:
            sys.stdout.write(_json_line(verdict_json(verdict)) + "\n")
        else:
            print(verdict_line(verdict))
    if not args.json:
        for line in run_end_lines(views):
            print(line)
    count_verdicts(verdicts)
    # The store the verdicts were read against: on stdout with the summary, on stderr for --json.
    print(f"store {store.url}", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        summary = summary_json(outcome, read=where, store=store.url)
        sys.stdout.write(_json_line(summary) + "\n")
    else:
        print(summary_line({s: sum(v.status is s for v in verdicts) for s in VerdictStatus}, where))
    # With --json the rules broken are in the summary object; people read them on stderr too.
    print_outcome(outcome, sys.stderr if args.json else sys.stdout)
    return outcome.exit_code


def print_outcome(outcome: Outcome[Any], out: TextIO) -> None:
    """Each rule the read breaks (damage first), one line a rule naming a few of the calls
    breaking it, under a head line with the exit code; when it passes, the policy's options if
    any were given (the default policy, nothing damaged, says nothing more)."""
    if outcome.passed:
        if outcome.policy.options:
            print(f"policy met: {' '.join(outcome.policy.options)}", file=out)
        return
    print(f"failed (exit {outcome.exit_code}):", file=out)
    for breach in outcome.breaches:
        print(f"  {breach.option}: {breach.text}", file=out)


def summary_line(counts: Mapping[VerdictStatus, int], where: str) -> str:
    """The last line of ``verify`` (and of ``audit``): the calls read in ``where``, by verdict."""
    summary = ", ".join(f"{counts.get(s, 0)} {s.value}" for s in VerdictStatus)
    return f"{sum(counts.values())} LLM call(s) in {where}: {summary}"


def run_end_lines(views: Sequence[ServedView]) -> list[str]:
    """One line per run: how it ends on the record (closed, open, or cut at the end)."""
    ends = {v.run_id: v.run_end for v in views if v.run_id is not None and v.run_end is not None}
    return [f"run {run_id}: {end.state} — {end.detail}" for run_id, end in ends.items()]


def gaps_command(args: argparse.Namespace) -> int:
    loaded = load_views(args)
    views, where = loaded.views, loaded.where
    spans = {(s.trace_id, s.span_id): s for s in loaded.records}
    listed = 0
    for kind, spec in SERVED_GAPS.items():
        if args.kind and kind != args.kind:
            continue
        hits = [(v, g) for v in views for g in v.gaps if g.kind == kind]
        if not hits:
            continue
        listed += len(hits)
        print(f"{kind} ({len(hits)} call(s), {spec.relation})")
        print(indent(gap_why(hits[0][1], loaded.notes), "  "))
        for view, gap in hits:
            span = spans.get((view.trace_id, view.span_id))
            reported = span.attributes.get("gen_ai.request.model") if span is not None else None
            model = view.model or (reported if isinstance(reported, str) else None) or "—"
            parts = [
                f"run {view.run_id or '—'} epoch {view.epoch}",
                f"span {view.span_id} {view.name!r}",
                f"scope {view.recorded_by or '—'}",
                f"service {view.service or '—'}",
                f"model {model}",
            ]
            if view.same_call:
                parts.append(f"same call as {len(view.same_call)} more span(s)")
            if gap.cause:
                parts.append(f"cause {gap.cause}")
            if gap.detail:
                parts.append(gap.detail)
            print("  - " + " · ".join(parts))
        print()
    if not listed:
        which = f"gap {args.kind}" if args.kind else "gap"
        print(
            f"af-otel gaps: no {which} on any of the {len(views)} LLM call(s) in {where}",
            file=sys.stderr,
        )
    return EXIT_OK


def report_command(args: argparse.Namespace) -> int:
    loaded = load_views(args)
    views = loaded.views
    verdicts = verdicts_or_none(views, key_from_args(args))
    page = render_report(views, verdicts, title=args.title, source=loaded.where, notes=loaded.notes)
    output = Path(args.output)
    output.write_text(page, encoding="utf-8")
    print(f"wrote {output} ({len(views)} LLM call(s), {len(page):,} bytes)")
    return EXIT_OK
