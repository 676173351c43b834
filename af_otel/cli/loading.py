"""What a reading command reads: the spans its options name (a file, or a backend's trace or
window), the store checked against them, and the views and verdicts rebuilt from them.

What the source itself reported (a partial trace, backend warnings) goes to stderr, and long reads
report progress there when it is a terminal.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final, NoReturn, TextIO

from af_otel import names
from af_otel.cli.progress import Progress
from af_otel.errors import ReaderError, StoreError
from af_otel.reader import upload_refs
from af_otel.reader.blobs import referenced_blobs
from af_otel.reader.gc_pause import collector_paused
from af_otel.reader.records import SpanRecord
from af_otel.reader.sources import (
    AllSpans,
    Ask,
    ClickHouseSource,
    FileSource,
    InWindow,
    JaegerSource,
    OneTrace,
    PhoenixSource,
    Source,
    SourceFormat,
    SourceNote,
    SpanStream,
    TempoSource,
    Window,
)
from af_otel.reader.sources.clickhouse import DEFAULT_DATABASE, DEFAULT_TABLE
from af_otel.reader.sources.window import DEFAULT_SEARCH_LIMIT as SEARCH_LIMIT
from af_otel.reader.verify import KeyArg, Verdict, verify
from af_otel.reader.view import ServedView, served_views
from af_otel.store import Store, open_store

__all__ = [
    "BACKENDS",
    "Loaded",
    "NothingToRead",
    "backend_source",
    "load_views",
    "open_checked_store",
    "print_notes",
    "verdicts_or_none",
    "verify_all",
]


class NothingToRead(Exception):
    """The input holds no LLM call af_otel enriched: exit `EXIT_NOTHING`, not success."""


def _spans(args: argparse.Namespace) -> tuple[Iterable[SpanRecord], str, SpanStream]:
    """The records the arguments name, counted on a terminal by one progress line (a window's
    counts traces fetched, `_fetching`), where they come from, and the stream for its notes."""
    source, ask = _asked(args)
    stream = source.read(ask, lenient=args.lenient)
    if isinstance(ask, InWindow):
        return _fetching(stream), stream.source, stream
    return Progress("reading spans").over(stream), stream.source, stream


# The backends, by option; a window needs the one of these that has a search limit.
BACKENDS: Final = ("tempo", "jaeger", "phoenix", "clickhouse")
_LIMITED: Final = ("tempo", "jaeger", "clickhouse")
# Options that belong to one backend.
_OWNED: Final = (
    ("project", "phoenix"),
    ("service", "jaeger"),
    ("query", "tempo"),
    ("database", "clickhouse"),
    ("table", "clickhouse"),
)


def _asked(args: argparse.Namespace) -> tuple[Source, Ask]:
    """The source the arguments name and what they ask of it; options that do not go together
    are a usage error (argparse's: usage, message, exit 2) before anything is read."""
    fail: Callable[[str], NoReturn] = args.source_parser.error
    backend = next((flag for flag in BACKENDS if getattr(args, flag, None)), None)
    window = _window(args, backend, fail)
    for option, owner in _OWNED:
        if getattr(args, option, None) is not None and backend != owner:
            fail(f"--{option} goes with --{owner}")
    if args.limit is not None and (backend not in _LIMITED or window is None):
        fail(
            "--limit goes with a --tempo, --jaeger or --clickhouse window "
            "(--since, or --start/--end)"
        )
    if args.limit is not None and args.limit < 1:
        fail(f"--limit must be at least 1, got {args.limit}")
    if backend is None:
        if args.trace:
            fail("--trace needs --tempo, --jaeger, --phoenix or --clickhouse URL")
        if not args.file:
            fail(
                "give a FILE to read, --tempo/--jaeger/--phoenix URL with --trace ID or "
                "--since, or --clickhouse URL"
            )
        return FileSource(args.file), AllSpans()
    if args.file:
        fail(f"give a FILE or --{backend} URL, not both")
    if args.trace and window is not None:
        fail("--trace fetches one trace; leave out --since/--start/--end, or --trace")
    try:
        source = backend_source(args, backend)
    except ReaderError as exc:
        fail(str(exc))
    if args.trace:
        return source, OneTrace(args.trace)
    if window is None:
        if backend == "clickhouse":  # a table, like a file, can be read whole
            return source, AllSpans()
        fail(f"--{backend} needs --trace ID or a window (--since DURATION, or --start/--end)")
    if backend == "jaeger" and not args.service:
        fail("a --jaeger window needs --service NAME (Jaeger searches one service)")
    search = {"tempo": args.query, "jaeger": args.service}.get(backend)
    return source, InWindow(window, search, args.limit or SEARCH_LIMIT)


def _window(
    args: argparse.Namespace, backend: str | None, fail: Callable[[str], NoReturn]
) -> Window | None:
    """The time window the options name, or None; a bad option is an argparse error."""
    if args.since is None and args.start is None and args.end is None:
        return None
    if backend is None:
        option = "--since" if args.since is not None else ("--start" if args.start else "--end")
        fail(
            f"{option} reads a window from a backend: add --tempo, --jaeger, --phoenix or "
            "--clickhouse URL"
        )
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


def backend_source(args: argparse.Namespace, backend: str) -> Source:
    """The source of ``backend`` (``tempo``, ``jaeger``, ``phoenix`` or ``clickhouse``) at the
    URL its option gives. Raises `ReaderError` naming the option a value is wrong for."""
    if backend == "tempo":
        return TempoSource(args.tempo)
    if backend == "jaeger":
        return JaegerSource(args.jaeger)
    if backend == "clickhouse":
        try:
            return ClickHouseSource(
                args.clickhouse,
                args.database or DEFAULT_DATABASE,
                args.table or DEFAULT_TABLE,
            )
        except ValueError as exc:
            raise ReaderError(str(exc)) from None
    return PhoenixSource(args.phoenix, project=args.project or "default")


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
    if getattr(args, "upload_base", None):
        views = upload_refs.checked(views, records, args.upload_base)
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
