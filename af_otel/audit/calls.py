"""One result a call: each run's rows read into spans, rebuilt and verified by the reader itself.

A run is handed to `served_views` and `verify`, the functions ``af-otel verify`` calls, so a call's
verdict here is the verdict ``verify`` gives it by construction; what is added is only where the
call was (time, service, run, lane, trace, span) and its model. A run never depends on another,
so runs are verified apart: in this process, or on ``workers`` processes fed from the one stream
with a bounded number of batches in flight (memory stays that of a few runs, not of the day).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Final

from af_otel import forksafe, names
from af_otel.audit.clickhouse import JsonTable, RunRows, Table, row_of
from af_otel.audit.files import Files, span_from_otlp_row
from af_otel.audit.tempo import TempoBlocks, span_from_tempo_row
from af_otel.errors import SourceError
from af_otel.reader.records import SpanRecord
from af_otel.reader.sources.clickhouse_rows import span_from_json_row, span_from_row
from af_otel.reader.sources.decoders import Problem
from af_otel.reader.verify import KeyArg, Verdict, verify
from af_otel.reader.view import ServedView, served_views
from af_otel.store import Store, open_store

__all__ = ["Batch", "CallResult", "audit_batches", "audit_run", "batched", "run_records"]

# Rows a batch sent to a worker holds (a run larger than this goes alone): enough that pickling
# and the round trip are a small part of a batch's work.
BATCH_ROWS: Final = 256
# Batches in flight per worker: one being verified, the others waiting, so that no worker idles
# while the stream waits on ClickHouse. Each range query of the stream (`stream_runs`) sends its
# first row only once the engine has sorted the range (and, where the temporary table is refused,
# scanned the window: some 0.3 s at 1M spans on the 2-core machine, in which two workers verify
# about 2,000 calls, some ten batches).
# A batch in flight is its rows' JSON (about 1 MB), so six a worker hold a few MiB, not the day.
IN_FLIGHT: Final = 6


@dataclass(frozen=True, slots=True)
class CallResult:
    """What the audit says of one LLM call: the row ``--results`` writes and ``--json`` prints."""

    time_ns: int
    service: str
    run_id: str
    lane: str
    epoch: int
    trace_id: str
    span_id: str
    model: str
    status: str
    gaps: tuple[str, ...]
    reason: str
    source: str

    def as_json(self) -> dict[str, Any]:
        return {
            "time_ns": self.time_ns,
            "service": self.service,
            "run_id": self.run_id,
            "lane": self.lane,
            "epoch": self.epoch,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "model": self.model,
            "status": self.status,
            "gaps": list(self.gaps),
            "reason": self.reason,
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class Batch:
    """What one batch of runs gave: its results, and the rows skipped as unreadable (lenient)."""

    results: tuple[CallResult, ...]
    skipped: int = 0
    problems: tuple[str, ...] = ()
    runs: int = 0


# How each scan's rows decode (`af_otel.audit.clickhouse.Scan.kind`).
_DECODERS: Final = {
    Table.kind: span_from_row,
    JsonTable.kind: span_from_json_row,
    Files.kind: span_from_otlp_row,
    TempoBlocks.kind: span_from_tempo_row,
}


def run_records(
    run: RunRows, source: str, lenient: bool = False
) -> tuple[list[SpanRecord], list[str]]:
    """The spans of one run's rows, decoded from the lines ClickHouse wrote, and what could not
    be read: strict, the first unreadable row raises `SourceError` naming its trace and span;
    ``lenient``, it is skipped and described."""
    records, problems = [], []
    decode = _DECODERS[run.kind]
    for line in run.split():
        where = f"{source} run {run.key}"
        try:
            row = row_of(line)
            where = f"{source} trace {row[3]} span {row[4]}"
            records.append(decode(row, where))
        except (Problem, ValueError, IndexError) as exc:
            if not lenient:
                raise SourceError(f"{where}: {exc}") from exc
            problems.append(f"{where}: {exc}")
    return records, problems


def _result(view: ServedView, verdict: Verdict, span: SpanRecord | None, source: str) -> CallResult:
    attributes = span.attributes if span is not None else {}
    lane = attributes.get(names.EPOCH_LANE)
    reported = attributes.get("gen_ai.request.model")
    model = view.model or (reported if isinstance(reported, str) else None) or ""
    return CallResult(
        time_ns=span.start_ns if span is not None else 0,
        service=view.service or "",
        run_id=view.run_id or "",
        lane=lane if isinstance(lane, str) else "",
        epoch=view.epoch,
        trace_id=view.trace_id,
        span_id=view.span_id,
        model=model,
        status=verdict.status.value,
        gaps=view.gap_kinds,
        reason=verdict.reason,
        source=source,
    )


def audit_run(
    records: Sequence[SpanRecord], store: Store, key: KeyArg, source: str
) -> list[CallResult]:
    """The result of every LLM call among ``records`` (one run's spans, or any spans: they are
    grouped as the reader groups them), in the order ``verify`` lists them."""
    views = served_views(records, store=store)
    spans = {(s.trace_id, s.span_id): s for s in records}
    return [
        _result(view, verdict, spans.get((view.trace_id, view.span_id)), source)
        for view, verdict in zip(views, verify(views, key=key), strict=True)
    ]


def batched(runs: Iterable[RunRows], rows: int = BATCH_ROWS) -> Iterator[tuple[RunRows, ...]]:
    """Consecutive runs, grouped until a group holds ``rows`` rows (a larger run goes alone)."""
    group: list[RunRows] = []
    held = 0
    for run in runs:
        if group and held + run.count > rows:
            yield tuple(group)
            group, held = [], 0
        group.append(run)
        held += run.count
    if group:
        yield tuple(group)


def _audit_batch(
    runs: tuple[RunRows, ...], store: Store, key: KeyArg, source: str, lenient: bool
) -> Batch:
    results: list[CallResult] = []
    problems: list[str] = []
    for run in runs:
        records, skipped = run_records(run, source, lenient)
        problems += skipped
        results += audit_run(records, store, key, source)
    return Batch(tuple(results), len(problems), tuple(problems[:5]), len(runs))


# Each worker process opens the store once, from its URL (a store object is not sent across).
_WORKER: dict[str, Any] = {}


def _start_worker(store_url: str, key: KeyArg, source: str, lenient: bool) -> None:
    _WORKER.update(store=open_store(store_url), key=key, source=source, lenient=lenient)


def _ready() -> None:
    """Nothing: what a worker is given first, so that it starts before the stream's first batch."""


def _worker_batch(runs: tuple[RunRows, ...]) -> Batch:
    return _audit_batch(
        runs, _WORKER["store"], _WORKER["key"], _WORKER["source"], _WORKER["lenient"]
    )


def audit_batches(
    runs: Iterable[RunRows],
    store: Store,
    *,
    key: KeyArg = None,
    source: str,
    workers: int = 1,
    lenient: bool = False,
) -> Iterator[Batch]:
    """The results of ``runs``, batch by batch in stream order, verified here (``workers`` 1) or
    on ``workers`` processes. Workers are forked from a fork server, never from this process:
    the engine's threads here must not be copied mid-flight into a child."""
    if workers <= 1:
        for group in batched(runs):
            yield _audit_batch(group, store, key, source, lenient)
        return
    # The fork server is a fresh interpreter (no engine threads to copy) that imports the reader
    # once; each worker forks from it ready to verify, instead of importing it again.
    with forksafe.process_pool(
        workers,
        preload=[__name__],
        initializer=_start_worker,
        initargs=(store.url, key, source, lenient),
    ) as pool:
        # Each worker starts now (the fork server boots, imports the reader, forks), while this
        # process sorts the run keys and reads the first runs: not after, with the stream waiting.
        for _ in range(workers):
            pool.submit(_ready)
        pending: deque[Future[Batch]] = deque()
        for group in batched(runs):
            pending.append(pool.submit(_worker_batch, group))
            if len(pending) >= workers * IN_FLIGHT:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
