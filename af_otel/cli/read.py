"""``af-otel served | verify | gaps | report``: the reading commands, thin over `served_views`,
`verify` and `render_report`.

Every command reads spans from a file (any format `read_spans` knows) or fetches one trace from
Tempo or Jaeger, and takes ``--store URL`` (default ``$AF_OTEL_STORE``, else ``./.af_otel/store``).
What the source itself reported (a partial trace, backend warnings) goes to stderr. Long reads
report progress on stderr when it is a terminal. Every command exits by `EXIT_CODES`, so that
``verify`` can gate a pipeline.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn, TextIO, TypeVar

import orjson
from opentelemetry import metrics

from af_otel import names
from af_otel.cli import EXIT_PIPE
from af_otel.cli.report import FOLD_CHARS, held_shown, json_text, render_report, show_part
from af_otel.cli.request import print_requests
from af_otel.errors import AfOtelError, ReaderError, StoreError
from af_otel.keys import KeyProblem, KeyRing, find_keys
from af_otel.reader.blobs import referenced_blobs
from af_otel.reader.gaps import SERVED_GAPS, gap_why
from af_otel.reader.gc_pause import collector_paused
from af_otel.reader.policy import (
    EXIT_DAMAGED,
    EXIT_PASSED,
    EXIT_POLICY,
    Outcome,
    Policy,
    judge,
    parse_fail_on,
    parse_percent,
)
from af_otel.reader.records import SpanRecord
from af_otel.reader.sources import (
    JaegerSource,
    PhoenixSource,
    SourceFormat,
    SourceNote,
    SpanStream,
    TempoSource,
    Window,
    read_spans,
)
from af_otel.reader.sources.tempo import DEFAULT_QUERY as TEMPO_QUERY
from af_otel.reader.sources.window import DEFAULT_SEARCH_LIMIT as SEARCH_LIMIT
from af_otel.reader.verdict_json import SCHEMA, summary_json, verdict_json
from af_otel.reader.verify import KeyArg, Verdict, VerdictStatus, verify
from af_otel.reader.view import ServedView, served_views
from af_otel.store import Store, open_store

__all__ = [
    "add_key_options",
    "add_policy_options",
    "add_store_options",
    "count_verdicts",
    "demo_readback",
    "key_from_args",
    "open_checked_store",
    "policy_from_args",
    "print_outcome",
    "register",
    "summary_line",
    "verdicts_or_none",
]

_T = TypeVar("_T")
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


class NothingToRead(Exception):
    """The input holds no LLM call af_otel enriched: exit `EXIT_NOTHING`, not success."""


class Progress:
    """A one-line counter on stderr, only when stderr is a terminal, at most five times a second."""

    def __init__(self, what: str, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty()
        self.what = what
        self.last = 0.0
        self.shown = False

    def tick(self, done: int, total: int | None = None) -> None:
        now = time.monotonic()
        if not self.live or now - self.last < 0.2:
            return
        self.last = now
        self.shown = True
        of = f"/{total:,}" if total else ""
        self.stream.write(f"\r{self.what} {done:,}{of}")
        self.stream.flush()

    def done(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def over(self, items: Iterable[_T], total: int | None = None) -> Iterator[_T]:
        """``items``, counted as they are handed on (``total``: how many there are, if known)."""
        try:
            for index, item in enumerate(items, start=1):
                yield item
                self.tick(index, total)
        finally:
            self.done()


# -- arguments ---------------------------------------------------------------------------------


def _add_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", nargs="?", help="spans to read (OTLP JSON lines, JSON, protobuf, ...)"
    )
    add_backend_options(parser, parser.add_mutually_exclusive_group())
    parser.add_argument("--trace", metavar="ID", help="one trace id to fetch from the backend")
    parser.add_argument(
        "--since", metavar="DURATION", help="every trace of the last DURATION (90s, 15m, 1h, 2d)"
    )
    parser.add_argument(
        "--start", metavar="TIME", help="window start, ISO 8601 or Unix seconds (with --end)"
    )
    parser.add_argument("--end", metavar="TIME", help="window end (default now; with --start)")
    parser.add_argument(
        "--service", metavar="NAME", help="the service whose traces a --jaeger window searches"
    )
    parser.add_argument(
        "--query",
        metavar="TRACEQL",
        help=f"the TraceQL a --tempo window searches (default {TEMPO_QUERY})",
    )
    parser.add_argument(
        "--limit",
        metavar="N",
        type=int,
        help=f"most traces one --tempo/--jaeger search returns (default {SEARCH_LIMIT})",
    )
    parser.set_defaults(source_parser=parser)
    add_store_options(parser)
    parser.add_argument("--run", metavar="R", help="only this run")
    parser.add_argument("--epoch", metavar="K", type=int, help="only this epoch (with --run)")


def add_backend_options(parser: argparse.ArgumentParser, urls: Any) -> None:
    """``--tempo``, ``--jaeger``, ``--phoenix`` (added to ``urls``: the parser or a group of
    options that exclude each other) and ``--project``, as `backend_source` reads them."""
    for flag, backend in (("--tempo", "Tempo"), ("--jaeger", "Jaeger"), ("--phoenix", "Phoenix")):
        urls.add_argument(flag, metavar="URL", help=f"read traces from {backend} at URL")
    parser.add_argument(
        "--project", metavar="NAME", help="the Phoenix project (default 'default'; --phoenix)"
    )


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """``--store`` and ``--lenient``: how every command that reads spans finds and reads them."""
    parser.add_argument(
        "--store",
        metavar="URL",
        help=f"the store holding bases and payloads (default ${names.ENV_STORE}, else {names.DEFAULT_STORE})",
    )
    parser.add_argument(
        "--lenient", action="store_true", help="skip unreadable lines and spans and say how many"
    )


def _option_type(parse: Callable[[str], _T]) -> Callable[[str], _T]:
    """``parse`` as an argparse type: its ValueError becomes a usage error naming the option."""

    def convert(text: str) -> _T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    convert.__name__ = parse.__name__
    return convert


def add_policy_options(parser: argparse.ArgumentParser) -> None:
    """``--require``, ``--fail-on`` and ``--max-reconstructed``: a gate's `Policy`, as
    `policy_from_args` reads them; a bad value is a usage error naming the option."""
    parser.add_argument(
        "--require",
        choices=[VerdictStatus.VERIFIED.value, VerdictStatus.RECONSTRUCTED.value],
        help="fail (exit 4) unless every call has at least this verdict (default reconstructed: "
        "nothing damaged)",
    )
    parser.add_argument(
        "--fail-on",
        metavar="KIND,...",
        type=_option_type(parse_fail_on),
        help="fail (exit 4) when any call carries one of these gap kinds (af-otel gaps lists them)",
    )
    parser.add_argument(
        "--max-reconstructed",
        metavar="N%",
        type=_option_type(parse_percent),
        help="fail (exit 4) when more than N%% of the calls are reconstructed",
    )


def policy_from_args(args: argparse.Namespace) -> Policy:
    """The `Policy` the options of `add_policy_options` give (none given: nothing damaged)."""
    return Policy(
        require=VerdictStatus(args.require or VerdictStatus.RECONSTRUCTED.value),
        fail_on=args.fail_on or frozenset(),
        max_reconstructed=args.max_reconstructed,
    )


def add_key_options(parser: argparse.ArgumentParser) -> None:
    """``--key-file``: the option every command that checks keyed receipts takes (repeat it for
    keys rotated over time: each af-2 receipt names its key's id)."""
    parser.add_argument(
        "--key-file",
        metavar="PATH",
        action="append",
        help=f"secret of keyed receipts, repeatable (default ${names.ENV_KEY} or "
        f"${names.ENV_KEY_FILE}; ${names.ENV_KEY_RING}: a file of secrets, one a line)",
    )


_EXITS: Final[dict[str, Any]] = {
    "epilog": EXIT_CODES,
    "formatter_class": argparse.RawDescriptionHelpFormatter,
}


def register(subparsers: Any) -> None:
    """Add ``served``, ``verify``, ``gaps`` and ``report`` to the ``af-otel`` command."""
    served = subparsers.add_parser("served", help="print what each LLM call was served", **_EXITS)
    _add_source(served)
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
    _add_source(check)
    add_key_options(check)
    add_policy_options(check)
    check.add_argument(
        "--json",
        action="store_true",
        help=f"JSON lines ({SCHEMA}, docs/verdict.schema.json): one object per call, then a summary",
    )
    check.set_defaults(func=_guarded(verify_command))

    gaps = subparsers.add_parser("gaps", help="list LLM calls by gap kind", **_EXITS)
    _add_source(gaps)
    gaps.add_argument("--kind", choices=list(SERVED_GAPS), help="only this kind")
    gaps.set_defaults(func=_guarded(gaps_command))

    report = subparsers.add_parser("report", help="write one self-contained HTML report", **_EXITS)
    _add_source(report)
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


# -- reading -----------------------------------------------------------------------------------


def key_from_args(args: argparse.Namespace) -> KeyRing | None:
    """The keys of keyed receipts (`af_otel.keys.find_keys`): each ``--key-file``, else
    ``$AF_OTEL_KEY``, else the file ``$AF_OTEL_KEY_FILE`` names; with the secrets of
    ``$AF_OTEL_KEY_RING``; None when none is given. Raises `ReaderError` naming the option or
    variable when a named file cannot be read."""
    found = find_keys(getattr(args, "key_file", None) or ())
    if isinstance(found, KeyProblem):
        raise ReaderError(str(found))
    return found


def _spans(args: argparse.Namespace) -> tuple[Iterable[SpanRecord], str, SpanStream]:
    """The records the arguments name, counted on a terminal by one progress line (a window's
    counts traces fetched, `_fetching`), where they come from, and the stream for its notes."""
    fail: Callable[[str], NoReturn] = args.source_parser.error  # usage, message, exit 2
    backend = next(
        (flag for flag in ("tempo", "jaeger", "phoenix") if getattr(args, flag, None)), None
    )
    window = _window(args, backend, fail)
    for option, owner in (("project", "phoenix"), ("service", "jaeger"), ("query", "tempo")):
        if getattr(args, option) is not None and backend != owner:
            fail(f"--{option} goes with --{owner}")
    if args.limit is not None and (backend not in ("tempo", "jaeger") or window is None):
        fail("--limit goes with a --tempo or --jaeger window (--since, or --start/--end)")
    if args.limit is not None and args.limit < 1:
        fail(f"--limit must be at least 1, got {args.limit}")
    if backend is None:
        if args.trace:
            fail("--trace needs --tempo, --jaeger or --phoenix URL")
        if not args.file:
            fail(
                "give a FILE to read, or --tempo/--jaeger/--phoenix URL with --trace ID or --since"
            )
        stream = read_spans(args.file, lenient=args.lenient)
        return Progress("reading spans").over(stream), args.file, stream
    if args.file:
        fail(f"give a FILE or --{backend} URL, not both")
    if args.trace and window is not None:
        fail("--trace fetches one trace; leave out --since/--start/--end, or --trace")
    if not args.trace and window is None:
        fail(f"--{backend} needs --trace ID or a window (--since DURATION, or --start/--end)")
    source = backend_source(args, backend)
    if args.trace:
        stream = source.trace(args.trace, lenient=args.lenient)
        return Progress("reading spans").over(stream), stream.source, stream
    assert window is not None
    stream = _window_stream(args, source, window, fail)
    return _fetching(stream), stream.source, stream


def _window(
    args: argparse.Namespace, backend: str | None, fail: Callable[[str], NoReturn]
) -> Window | None:
    """The time window the options name, or None; a bad option is an argparse error."""
    if args.since is None and args.start is None and args.end is None:
        return None
    if backend is None:
        option = "--since" if args.since is not None else ("--start" if args.start else "--end")
        fail(f"{option} reads a window from a backend: add --tempo, --jaeger or --phoenix URL")
    if args.since is not None and (args.start is not None or args.end is not None):
        fail("--since and --start/--end are two ways to give a window; use one")
    if args.since is None and args.start is None:
        fail("--end needs --start")
    try:
        if args.since is not None:
            return Window.since(args.since)
        return Window.between(args.start, args.end)
    except ValueError as exc:
        option = "--since" if args.since is not None else "--start/--end"
        fail(f"{option}: {exc}")


def backend_source(
    args: argparse.Namespace, backend: str
) -> TempoSource | JaegerSource | PhoenixSource:
    """The source of ``backend`` (``tempo``, ``jaeger`` or ``phoenix``) at the URL its option gives."""
    if backend == "tempo":
        return TempoSource(args.tempo)
    if backend == "jaeger":
        return JaegerSource(args.jaeger)
    return PhoenixSource(args.phoenix, project=args.project or "default")


def _window_stream(
    args: argparse.Namespace,
    source: TempoSource | JaegerSource | PhoenixSource,
    window: Window,
    fail: Callable[[str], NoReturn],
) -> SpanStream:
    limit = args.limit or SEARCH_LIMIT
    if isinstance(source, TempoSource):
        query = args.query or TEMPO_QUERY
        return source.window(window, query=query, limit=limit, lenient=args.lenient)
    if isinstance(source, JaegerSource):
        if not args.service:
            fail("a --jaeger window needs --service NAME (Jaeger searches one service)")
        return source.window(window, args.service, limit=limit, lenient=args.lenient)
    return source.window(window, lenient=args.lenient)


def _fetching(stream: SpanStream, out: TextIO | None = None) -> Iterator[SpanRecord]:
    """The window's records, with a count on stderr when it is a terminal: traces done of those
    found, or spans for a source that pages through spans (Phoenix)."""
    by_span = stream.format is SourceFormat.PHOENIX
    progress = Progress("fetching spans" if by_span else "fetching traces", out)
    try:
        for count, record in enumerate(stream, start=1):
            if by_span:
                progress.tick(count)
            else:
                progress.tick(stream.traces_read, stream.traces_expected)
            yield record
    finally:
        progress.done()


def print_notes(stream: SpanStream, where: str, command: str) -> None:
    """What the source reported about its own completeness (a partial trace, backend warnings,
    a cut response), one stderr line each: a verdict on a cut trace must not read as complete."""
    for note in stream.notes:
        print(f"af-otel {command}: {where}: {note}", file=sys.stderr)


def _store_named(given: str | None) -> tuple[str, str | None]:
    """The store URL ``--store`` (``given``) names, else the environment or the default, and
    what named it (None for the built-in default)."""
    if given is not None:
        return given, "--store"
    env = os.environ.get(names.ENV_STORE)
    if env:
        return env, f"${names.ENV_STORE}"
    return names.DEFAULT_STORE, None


def _store_refused(url: str, named_by: str | None, exc: StoreError) -> StoreError:
    """A store refusal naming the option (or variable, or default) that chose the store."""
    option = f"{named_by} {url}" if named_by else f"the default store {url} (no --store given)"
    hint = "" if named_by == "--store" else "; name the store with --store"
    return StoreError(f"{option}: {exc}{hint}")


def open_checked_store(
    given: str | None,
    records: Sequence[SpanRecord],
    warn: Callable[[str], None] | None = None,
) -> Store:
    """The store ``--store`` (``given``; None: ``$AF_OTEL_STORE``, else the default) names, to
    read ``records`` with; refused (StoreError naming the option) when the trace refers to stored
    blobs and the store cannot be theirs: it does not exist (`open_store` with ``must_exist``),
    or holds none of them. A named store that is not there while the trace needs no blob is only
    passed to ``warn``: no verdict depends on it."""
    url, named_by = _store_named(given)
    refs = referenced_blobs(records)
    try:
        store = open_store(url)
        if named_by is None and not refs:
            return store
        try:
            open_store(url, must_exist=True)
        except StoreError as exc:
            if refs:
                raise
            if warn is not None:
                warn(
                    f"{_store_refused(url, named_by, exc)} (the trace refers to no stored "
                    "blob, so none is needed)"
                )
        if refs and not any(store.has(address) for address in refs):
            raise StoreError(
                f"it holds none of the {len(refs)} blob(s) the trace refers to "
                f"(e.g. {refs[0]}): give the store the spans were written with"
            )
    except StoreError as exc:
        raise _store_refused(url, named_by, exc) from exc
    return store


@dataclass(frozen=True, slots=True)
class Loaded:
    """What one read gave: the views asked for, every span record, where they were read, the
    store the views were rebuilt with, and what the source noted about its own answer."""

    views: tuple[ServedView, ...]
    records: tuple[SpanRecord, ...]
    where: str
    store: Store
    notes: tuple[SourceNote, ...]


def load_views(args: argparse.Namespace) -> Loaded:
    """Read the spans the arguments name and rebuild the views they ask for. Raises
    `NothingToRead` when no span is an LLM call af_otel enriched."""
    spans, where, stream = _spans(args)
    records = tuple(spans)
    print_notes(stream, where, args.command)
    skipped = stream.skipped
    if skipped:
        print(
            f"af-otel: skipped {skipped} unreadable line(s) or span(s) in {where}", file=sys.stderr
        )
        for problem in stream.problems[:5]:
            print(f"  {problem}", file=sys.stderr)
    store = open_checked_store(
        args.store,
        records,
        warn=lambda text: print(f"af-otel {args.command}: {text}", file=sys.stderr),
    )
    views = served_views(records, store=store)
    if not views:
        if skipped:  # what could not be read may have held the calls: not "nothing"
            raise ReaderError(
                f"no LLM call left in {where} after skipping {skipped} unreadable line(s) or "
                "span(s)"
            )
        what = "nothing to verify" if args.command == "verify" else "no LLM call to show"
        if not records:
            raise NothingToRead(f"read no spans from {where} (empty input): {what}")
        raise NothingToRead(
            f"read {len(records)} span(s) from {where}, none carries af.* attributes: {what}"
        )
    if args.run is not None:
        views = tuple(v for v in views if v.run_id == args.run)
        if not views:
            raise ReaderError(f"no LLM call of run {args.run!r} in {where}")
    if args.epoch is not None:
        views = tuple(v for v in views if v.epoch == args.epoch)
        if not views:
            raise ReaderError(
                f"no epoch {args.epoch} in {where}" + (f" run {args.run!r}" if args.run else "")
            )
    return Loaded(views, records, where, store, tuple(stream.notes))


def verify_all(views: Sequence[ServedView], key: KeyArg) -> list[Verdict]:
    return list(verify(Progress("verifying").over(views, len(views)), key=key))


# -- printing ----------------------------------------------------------------------------------


def _json_line(value: Any) -> str:
    """One line of ``--json`` output: strict JSON, never a repr (`json_text` is for people)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _part_text(part: Any, full: bool) -> str:
    shown = show_part(part, None if full else FOLD_CHARS)
    text = shown.head
    if shown.cut:
        text += f"… ({shown.cut:,} more characters; --full shows all)"
    return f"[{shown.label}] {text}" if shown.label else text


def _indent(text: str, by: str) -> str:
    return "\n".join(by + line for line in text.splitlines()) or by


def print_view(
    view: ServedView,
    verdict: Verdict | None,
    full: bool,
    out: TextIO,
    notes: Sequence[SourceNote] = (),
) -> None:
    """One view as text; ``notes`` (the source's) may be named as a gap's cause (`gap_why`)."""
    head = f"run {view.run_id} · epoch {view.epoch} (parent {view.parent})"
    where = f"span {view.span_id} · trace {view.trace_id}" + (
        f" · service {view.service}" if view.service else ""
    )
    print(head, file=out)
    print(f"  {where}", file=out)
    print(f"  {_recorded_by(view)}", file=out)
    if verdict is not None:
        print(f"  verdict: {verdict.status.value} — {verdict.reason}", file=out)
    print(f"  model {view.model or '—'} · provider {view.provider or '—'}", file=out)
    params = (
        "not on record"
        if view.params is None
        else (json_text(view.params) if view.params else "none set")
    )
    print(f"  params {params}", file=out)
    unrecorded = [name for name in view.unrecorded if name != "tools"]
    if unrecorded:
        by = view.recorded_by or "the instrumentation"
        print(f"  not recorded by {by}: {', '.join(unrecorded)}", file=out)
    if view.source == names.SOURCE_WIRE:
        print("  request: the body the client sent (wire tap)", file=out)
    if view.record_differs:
        by = view.recorded_by or "the instrumentation"
        print(f"  {by} recorded otherwise than sent: {', '.join(view.record_differs)}", file=out)
    for gap in view.gaps:
        cause = f" ({gap.cause})" if gap.cause else ""
        print(f"  gap {gap.kind}{cause}: {gap_why(gap, notes)}", file=out)
        if gap.detail:
            print(f"      found: {gap.detail}", file=out)
    if view.system is None:
        print("  system: not on record", file=out)
    elif not view.system:
        print("  system: none", file=out)
    else:
        print(f"  system ({len(view.system)} part(s)):", file=out)
        for part in view.system:
            print(_indent(_part_text(part, full), "    "), file=out)
    if view.tools is None:
        print("  tools: not on record", file=out)
    elif not view.is_recorded("tools"):
        print(f"  tools: not recorded by {view.recorded_by or 'the instrumentation'}", file=out)
    else:
        choice = view.params.get("tool_choice") if view.params else None
        forbidden = choice == "none" or (
            isinstance(choice, Mapping) and choice.get("type") == "none"
        )
        print(
            f"  tools ({len(view.tools)}): {', '.join(str(t.get('name')) for t in view.tools) or '—'}"
            + (" (tool_choice none: the model could use none of them)" if forbidden else ""),
            file=out,
        )
    if view.held:
        print("  held by the server (seen before this request's own items; no receipt):", file=out)
        for call in view.held:
            print(f"    {held_shown(call)}", file=out)
    own = ", this request's own items" if view.held else ""
    if view.messages is None:
        print(f"  messages{own}: not on record", file=out)
    else:
        print(f"  messages ({len(view.messages)}){own}:", file=out)
        for index, message in enumerate(view.messages):
            print(f"    #{index} {message.get('role')}:", file=out)
            for part in message.get("parts", ()):
                print(_indent(_part_text(part, full), "      "), file=out)
    print(file=out)


def _listed(items: Sequence[Any] | None) -> list[Any] | None:
    return None if items is None else list(items)


def view_json(view: ServedView, verdict: Verdict | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "run_id": view.run_id,
        "epoch": view.epoch,
        "parent": view.parent,
        "span_id": view.span_id,
        "trace_id": view.trace_id,
        "service": view.service,
        "base": view.base,
        "system": _listed(view.system),
        "messages": _listed(view.messages),
        "tools": _listed(view.tools),
        "params": view.params,
        "model": view.model,
        "provider": view.provider,
        "gaps": [{"kind": g.kind, "cause": g.cause, "detail": g.detail} for g in view.gaps],
        "name": view.name,
        "scope": view.recorded_by,
        "same_call": [
            {"span_id": c.span_id, "trace_id": c.trace_id, "name": c.name, "scope": c.scope}
            for c in view.same_call
        ],
        "held": [
            {
                "response_id": h.response_id,
                "epoch": h.epoch,
                "messages": h.messages,
                "gaps": list(h.gaps),
                "minted": h.minted,
            }
            for h in view.held
        ],
    }
    if verdict is not None:
        out["verdict"] = verdict_json(verdict)
    return out


def _recorded_by(view: ServedView) -> str:
    """The span's name and scope, and the spans folded into it (the same model call)."""
    text = f"span name {view.name!r} · scope {view.recorded_by or '—'}"
    for call in view.same_call:
        text += f"\n  same call: span {call.span_id} {call.name!r} · scope {call.scope or '—'}"
    return text


# -- commands ----------------------------------------------------------------------------------


def served_command(args: argparse.Namespace) -> int:
    loaded = load_views(args)
    if getattr(args, "request", False):
        return print_requests(loaded.views, key_from_args(args))
    verdicts = verdicts_or_none(loaded.views, key_from_args(args))
    for view, verdict in zip(loaded.views, verdicts, strict=True):
        if args.json:
            sys.stdout.write(_json_line(view_json(view, verdict)) + "\n")
        else:
            print_view(view, verdict, args.full, sys.stdout, loaded.notes)
    return EXIT_OK


def verdicts_or_none(views: Sequence[ServedView], key: KeyArg) -> list[Verdict | None]:
    """Verdicts where they can be had: a keyed receipt without its key is left unchecked."""
    out: list[Verdict | None] = []
    with collector_paused():
        for view in views:
            try:
                out.append(verify(view, key=key))
            except ReaderError:
                out.append(None)
    return out


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
            print(_verdict_line(verdict))
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


def _verdict_line(verdict: Verdict) -> str:
    line = f"{verdict.run_id} epoch {verdict.epoch}: {verdict.status.value}"
    if verdict.status is VerdictStatus.VERIFIED:
        return line
    return f"{line} — {verdict.reason}"


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
        print(_indent(gap_why(hits[0][1], loaded.notes), "  "))
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
        print(f"  {_verdict_line(verdict)}", file=target)
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
            print(f"  {_verdict_line(verdict)}", file=target)
        damaged = [v for v in altered if v.status is VerdictStatus.DAMAGED]
    print("next, try:", file=target)
    for line in next_commands(folder, damaged[0] if damaged else None):
        print(f"  {line}", file=target)
    return EXIT_OK if clean and (damaged or not tampered.exists()) else EXIT_DAMAGED


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
