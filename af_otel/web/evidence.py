"""What ``af-otel serve`` shows, found and cached: the views and verdicts of one trace fetched
from a backend, or of a whole trace file, looked up by span or by run and epoch.

Errors keep the read path's types so the app can answer each with its HTTP status: an id that
names nothing is a `ReaderError`, a backend that failed a `SourceError`, a store that cannot be
read a `StoreError`. A trace the backend does not have is the first kind, not the second.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from af_otel import forksafe
from af_otel.cli.loading import open_checked_store, verdicts_or_none
from af_otel.errors import ReaderError, SourceError, TraceNotFoundError
from af_otel.reader import upload_refs
from af_otel.reader.records import SpanRecord
from af_otel.reader.sources import AllSpans, FileSource, OneTrace, Source, SourceNote, SpanStream
from af_otel.reader.verify import KeyArg, Verdict
from af_otel.reader.view import ServedView, served_views

__all__ = ["TRACES_KEPT", "Evidence", "Shown", "check_ids"]

# Traces kept after a fetch: a person clicking through spans revisits a handful; each entry holds
# one trace's views (every message of every LLM call), so the bound is small.
TRACES_KEPT: Final = 32
# Up to 32 (16) hex digits: Jaeger writes a 128-bit trace id without the high half's leading
# zeros, and some Tempo views shorten ids the same way; they are padded back.
_TRACE_ID: Final = re.compile(r"[0-9a-f]{1,32}")
_SPAN_ID: Final = re.compile(r"[0-9a-f]{1,16}")


@dataclass(frozen=True, slots=True)
class Shown:
    """One epoch to show, with its verdict (None: a keyed receipt and no key), the epochs of its
    run as far as the record holds them, where they were read, and what the backend noted (its
    ``SourceNote`` values, which a gap's sentence may name as its cause) and what the reader
    skipped (text)."""

    view: ServedView
    verdict: Verdict | None
    run: tuple[tuple[ServedView, Verdict | None], ...]
    source: str
    notes: tuple[SourceNote | str, ...]


@dataclass(frozen=True, slots=True)
class _Loaded:
    views: tuple[ServedView, ...]
    verdicts: tuple[Verdict | None, ...]
    source: str
    notes: tuple[SourceNote | str, ...]

    def shown(self, index: int) -> Shown:
        view = self.views[index]
        run = tuple(
            (v, d)
            for v, d in zip(self.views, self.verdicts, strict=True)
            if view.run_id and v.run_id == view.run_id
        )
        return Shown(view, self.verdicts[index], run, self.source, self.notes)

    def find_epoch(self, run_id: str, epoch: int) -> int | None:
        return next(
            (i for i, v in enumerate(self.views) if v.run_id == run_id and v.epoch == epoch),
            None,
        )


def check_ids(trace_id: str, span_id: str | None = None) -> tuple[str, str | None]:
    """Trace and span ids as 32 and 16 lowercase hex digits, or `ValueError` saying which one is
    not an id."""
    trace = trace_id.lower()
    if not _TRACE_ID.fullmatch(trace):
        raise ValueError(f"{trace_id!r} is not a trace id (up to 32 hex digits)")
    if span_id is None:
        return trace.rjust(32, "0"), None
    span = span_id.lower()
    if not _SPAN_ID.fullmatch(span):
        raise ValueError(f"{span_id!r} is not a span id (up to 16 hex digits)")
    return trace.rjust(32, "0"), span.rjust(16, "0")


class Evidence:
    """Views and verdicts for the pages, from a trace ``file`` or any other `Source`.

    A trace file (``file``, or a `FileSource`) is read whole, as a run may span several traces,
    and read again when it changes (the collector's file grows); any other source is asked for one
    trace per click and the last `TRACES_KEPT` traces are kept. ``label`` names the source on the
    pages (default: its own). ``store`` is the ``--store`` argument (None: the default); ``key``
    checks keyed receipts and is never shown; ``upload_base`` is ``--upload-base`` (docs/reader.md,
    Upload refs)."""

    def __init__(
        self,
        *,
        store: str | None,
        key: KeyArg = None,
        file: str | os.PathLike[str] | None = None,
        source: Source | None = None,
        label: str = "",
        lenient: bool = False,
        traces_kept: int = TRACES_KEPT,
        upload_base: str | None = None,
    ) -> None:
        if file is not None and source is None:
            source = FileSource(os.fspath(file))
        elif (file is None) == (source is None):
            raise ValueError("give either a trace file or a backend source")
        assert source is not None
        self.source = source
        self.file = source.path if isinstance(source, FileSource) else None
        self.label = label or source.label
        self.store = store
        self._key = key
        self.lenient = lenient
        self.traces_kept = traces_kept
        self.upload_base = upload_base  # util-genai's uploads (`upload_refs`), when given
        self._lock = forksafe.lock(self)
        self._traces: OrderedDict[str, _Loaded] = OrderedDict()
        self._file: tuple[tuple[int, int], _Loaded] | None = None

    def __repr__(self) -> str:  # the key stays out of every rendering of this object
        return f"Evidence({self.label!r}, store={self.store!r})"

    # -- lookups ---------------------------------------------------------------------------

    def span(self, trace_id: str, span_id: str) -> Shown:
        """The epoch of LLM-call span ``span_id`` in trace ``trace_id``."""
        trace, span = check_ids(trace_id, span_id)
        loaded = self._read_file() if self.file else self._fetch(trace)
        index = next(
            (
                i
                for i, v in enumerate(loaded.views)
                if v.span_id == span and (self.file is None or v.trace_id == trace)
            ),
            None,
        )
        if index is None:
            if self.file and not any(v.trace_id == trace for v in loaded.views):
                raise ReaderError(f"no LLM call of trace {trace} in {self.label}")
            raise ReaderError(
                f"span {span} of trace {trace} is not an LLM call af_otel can show "
                f"({len(loaded.views)} LLM call(s) in that trace)"
            )
        return loaded.shown(index)

    def epoch(self, run_id: str, epoch: int, *, trace_id: str | None = None) -> Shown:
        """Epoch ``epoch`` of run ``run_id``; with a backend, from trace ``trace_id``, else from
        the traces fetched so far."""
        if self.file:
            candidates = [self._read_file()]
        elif trace_id is not None:
            candidates = [self._fetch(check_ids(trace_id)[0])]
        else:
            with self._lock:
                candidates = list(reversed(self._traces.values()))
        for loaded in candidates:
            index = loaded.find_epoch(run_id, epoch)
            if index is not None:
                return loaded.shown(index)
        if any(v.run_id == run_id for loaded in candidates for v in loaded.views):
            raise ReaderError(f"run {run_id!r} has no epoch {epoch} in {self.label}")
        if self.file or trace_id is not None:
            raise ReaderError(f"no LLM call of run {run_id!r} in {self.label}")
        raise ReaderError(
            f"run {run_id!r} is in none of the traces fetched so far from {self.label}; "
            "open it from a span, or add ?trace=<trace id> to this address"
        )

    # -- reading ---------------------------------------------------------------------------

    def _read_file(self) -> _Loaded:
        assert self.file is not None
        try:
            info = os.stat(self.file)
        except OSError as exc:
            raise SourceError(f"{self.file}: {exc.strerror or exc}") from None
        stamp = (info.st_mtime_ns, info.st_size)
        with self._lock:
            if self._file is not None and self._file[0] == stamp:
                return self._file[1]
        loaded = self._load(self.source.read(AllSpans(), lenient=self.lenient))
        with self._lock:
            self._file = (stamp, loaded)
        return loaded

    def _fetch(self, trace_id: str) -> _Loaded:
        with self._lock:
            found = self._traces.get(trace_id)
            if found is not None:
                self._traces.move_to_end(trace_id)
                return found
        try:
            loaded = self._load(self.source.read(OneTrace(trace_id), lenient=self.lenient))
        except TraceNotFoundError:  # an id that names nothing, not a failed backend
            raise ReaderError(f"{self.label} has no trace {trace_id}") from None
        with self._lock:
            self._traces[trace_id] = loaded
            self._traces.move_to_end(trace_id)
            while len(self._traces) > self.traces_kept:
                self._traces.popitem(last=False)
        return loaded

    def _load(self, stream: SpanStream) -> _Loaded:
        with stream:
            records: Sequence[SpanRecord] = tuple(stream)
        if not records and self.file is None:
            raise ReaderError(f"{self.label} returned no span for that trace ({stream.source})")
        views = served_views(records, store=open_checked_store(self.store, records))
        if self.upload_base:
            views = upload_refs.checked(views, records, self.upload_base)
        verdicts = verdicts_or_none(views, self._key)
        notes: list[SourceNote | str] = list(stream.notes)
        if stream.skipped:
            notes.append(f"{stream.skipped} unreadable line(s) or span(s) skipped")
        return _Loaded(tuple(views), tuple(verdicts), stream.source, tuple(notes))
