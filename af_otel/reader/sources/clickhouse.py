"""ClickHouse as a `Source`: the OpenTelemetry Collector clickhouseexporter's ``otel_traces`` table.

``url`` is a clickhouse-connect URL: ``chdb:///dir`` opens the embedded engine (chDB) on a
directory, ``http(s)://host:8123`` a server or a cluster; both go through the same client, so the
SQL is the same text either way. An ask becomes one query: every row of the table (`AllSpans`),
the rows of one trace (`OneTrace`, found through the exporter's bloom index on ``TraceId``), or
the rows of the traces in which an LLM call af_otel enriched started inside a window
(`InWindow`, which the day partitions and the index on attribute keys narrow). Rows come in blocks
and are decoded by `clickhouse_rows`, the decoder ``af-otel audit`` reads the same table with, so
a span read here is the span read from the OTLP file it was exported from.

clickhouse-connect (and chDB, for ``chdb://``) come with the ``audit`` extra and are imported only
when a source connects; without them the read fails naming ``--clickhouse`` and the extra.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from af_otel.errors import AfOtelError, SourceError, TraceNotFoundError
from af_otel.reader.records import SpanRecord
from af_otel.reader.sources.clickhouse_rows import (
    COLUMNS,
    JSON_COLUMNS,
    LLM_SPANS,
    LLM_SPANS_JSON,
    RUN_KEY,
    RUN_KEY_JSON,
    span_from_json_row,
    span_from_row,
)
from af_otel.reader.sources.decoders import Problem
from af_otel.reader.sources.fetch import TRACE_NOT_FOUND, trace_id_for_url
from af_otel.reader.sources.source import AllSpans, Ask, InWindow, OneTrace, refused
from af_otel.reader.sources.stream import NoteKind, SourceFormat, SpanStream

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

__all__ = [
    "BLOCK_ROWS",
    "DEFAULT_DATABASE",
    "DEFAULT_TABLE",
    "ClickHouseSource",
    "Shard",
    "check_identifiers",
    "connect",
    "is_json_table",
    "shard_clause",
]

DEFAULT_DATABASE: Final = "default"
DEFAULT_TABLE: Final = "otel_traces"
# A block of rows as ClickHouse sends it: an LLM span's row is about 2.5 KB in the table and
# several times that decoded, so 512 rows are a few MiB on each side (2,048 were some 50 MiB of
# Python objects), and per-block overhead still vanishes.
BLOCK_ROWS: Final = 512
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXTRA: Final = "pip install 'af-otel[audit]'"


@dataclass(frozen=True, slots=True)
class Shard:
    """``K/N``: the runs whose ``cityHash64`` of the run key is K modulo N."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index}/{self.count}: need 0 <= K < N and N >= 1")

    @classmethod
    def parse(cls, text: str) -> Shard:
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if match is None:
            raise ValueError(f"{text!r} is not K/N (e.g. 0/4)")
        return cls(int(match[1]), int(match[2]))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def shard_clause(shard: Shard | None, run_key: str, parameters: dict[str, Any]) -> list[str]:
    """The condition that keeps ``shard``'s runs (none for the whole), its parameters added."""
    if shard is None or shard.count == 1:
        return []
    parameters.update(count=shard.count, index=shard.index)
    return [f"cityHash64({run_key}) % {{count:UInt64}} = {{index:UInt64}}"]


def check_identifiers(database: str, table: str) -> None:
    """Raise ValueError naming the option when ``database`` or ``table`` is not a plain
    ClickHouse identifier (they are written into the SQL, never bound as parameters)."""
    for what, name in (("--database", database), ("--table", table)):
        if not _IDENTIFIER.fullmatch(name):
            raise ValueError(f"{what} {name!r} is not a plain ClickHouse identifier")


def connect(url: str, database: str | None = None) -> Client:
    """A clickhouse-connect client for ``url`` (``chdb:///dir`` or ``http(s)://...``). Raises
    `SourceError` naming ``--clickhouse`` when the URL is of another kind or cannot be opened,
    or when the extra it needs is not installed."""
    if url.startswith("chdb://"):
        if not url.removeprefix("chdb://"):
            raise SourceError(f"--clickhouse {url}: name the directory (chdb:///path/to/dir)")
    elif not url.startswith(("http://", "https://")):
        raise SourceError(
            f"--clickhouse {url}: expected chdb:///dir (embedded) or http(s)://host:8123"
        )
    try:
        import clickhouse_connect  # noqa: PLC0415 - the optional audit extra
    except ImportError as exc:
        raise SourceError(
            f"--clickhouse {url}: reading ClickHouse needs clickhouse-connect ({_EXTRA}): {exc}"
        ) from exc
    try:
        return clickhouse_connect.get_client(dsn=url, database=database)
    except ImportError as exc:  # chdb:// without chDB installed
        raise SourceError(
            f"--clickhouse {url}: the embedded engine needs the chdb package ({_EXTRA}): {exc}"
        ) from exc
    except Exception as exc:  # the client's errors have no common root with ours
        raise SourceError(f"--clickhouse {url}: {exc}") from exc


def is_json_table(client: Client, database: str, table: str) -> bool:
    """Whether ``database.table`` is the exporter's JSON variant (its ``json`` option: the
    attribute columns of type ``JSON``); False for the plain table and for a table that does not
    exist (named when it is queried)."""
    sql = (
        "SELECT type FROM system.columns WHERE database = {database:String}"
        " AND table = {table:String} AND name = 'SpanAttributes'"
    )
    found = client.query(sql, parameters={"database": database, "table": table}).result_rows
    return bool(found) and str(found[0][0]).startswith("JSON")


@dataclass(frozen=True, slots=True)
class _Variant:
    """How rows of one variant of the table are selected, filtered and decoded."""

    columns: str
    llm: str
    run_key: str
    decode: Callable[[Sequence[Any], str], SpanRecord]


_PLAIN: Final = _Variant(", ".join(COLUMNS), LLM_SPANS, RUN_KEY, span_from_row)
_JSON: Final = _Variant(", ".join(JSON_COLUMNS), LLM_SPANS_JSON, RUN_KEY_JSON, span_from_json_row)


@dataclass(frozen=True, slots=True)
class ClickHouseSource:
    """The spans of ``database.table`` at ``url``, plain or the JSON variant (asked of ClickHouse).

    Every span of the table, as a file of the same spans holds them; one trace (all of its
    spans, fetched now; a trace with none raises `TraceNotFoundError`); or a window: the traces
    in which an LLM call started in it, at most ``limit`` of them (more is noted as truncated),
    each read whole. A ``shard`` keeps only the LLM-call spans of its runs, as
    ``af-otel audit --shard`` reads them. Rows are decoded as the stream is read, strict or
    lenient (an unreadable row is a skipped span).
    """

    url: str
    database: str = DEFAULT_DATABASE
    table: str = DEFAULT_TABLE
    shard: Shard | None = None

    def __post_init__(self) -> None:
        check_identifiers(self.database, self.table)

    @property
    def label(self) -> str:
        return f"ClickHouse at {self.url} ({self.database}.{self.table})"

    @property
    def where(self) -> str:
        """What the stream's ``source`` says: the URL and the table, as the audit names them."""
        return f"{self.url} {self.database}.{self.table}"

    def read(self, ask: Ask, *, lenient: bool = False) -> SpanStream:
        """`Source.read`: every span, one trace by id, or a window without a search (the table
        is narrowed by SQL, not by a backend's query language)."""
        stream = SpanStream(self.where, SourceFormat.CLICKHOUSE, lenient=lenient)
        if isinstance(ask, AllSpans):
            return stream.feed(self._every_span(stream))
        if isinstance(ask, OneTrace):
            return stream.feed(self._trace(ask.trace_id, stream))
        if ask.search is None:
            return stream.feed(self._window(ask, stream))
        raise refused(self, ask, "every span, one trace by id, or a window without a search")

    def _every_span(self, stream: SpanStream) -> Iterator[SpanRecord]:
        """The table's rows, streamed from a connection opened when the stream is first read."""
        with closing(connect(self.url, self.database)) as client:
            variant = self._variant(client)
            sql, parameters = self._select(variant, [])
            yield from self._streamed(client, variant, sql, parameters, stream)

    def _trace(self, trace_id: str, stream: SpanStream) -> Iterator[SpanRecord]:
        """One trace's rows, fetched now (a trace is small, and a missing one raises here)."""
        hex_id = trace_id_for_url(self.url, trace_id)
        parameters: dict[str, Any] = {"trace": hex_id}
        with closing(connect(self.url, self.database)) as client:
            variant = self._variant(client)
            sql, parameters = self._select(variant, ["TraceId = {trace:String}"], parameters)
            rows = self._query(client, sql, parameters)
        if not rows:
            raise TraceNotFoundError(f"{self.label}: {TRACE_NOT_FOUND} ({hex_id})")
        stream.traces_expected = 1
        return self._decoded(variant, rows, stream, by_trace=True)

    def _window(self, ask: InWindow, stream: SpanStream) -> Iterator[SpanRecord]:
        """The window's trace ids, found now (the oldest first, at most ``ask.limit``); their
        rows streamed, one trace after another, as the stream is read."""
        window = ask.window
        parameters: dict[str, Any] = {
            "start": window.start_ns,
            "end": window.end_ns,
            "limit": ask.limit,
        }
        with closing(connect(self.url, self.database)) as client:
            variant = self._variant(client)
            started = (
                f"{variant.llm} AND Timestamp >= fromUnixTimestamp64Nano({{start:Int64}})"
                " AND Timestamp < fromUnixTimestamp64Nano({end:Int64})"
            )
            sql, parameters = self._select(
                variant,
                [started],
                parameters,
                "TraceId",
                "GROUP BY TraceId ORDER BY min(Timestamp), TraceId LIMIT {limit:UInt64}",
            )
            ids = [str(row[0]) for row in self._query(client, sql, parameters)]
        stream.traces_expected = len(ids)
        if len(ids) >= ask.limit:
            stream.note(
                f"{self.where}: {len(ids)} traces, the limit; traces beyond it in {window} "
                "were not read (narrow the window or raise the limit)",
                NoteKind.TRUNCATED,
            )
        return self._traces(ids, stream) if ids else iter(())

    def _traces(self, ids: list[str], stream: SpanStream) -> Iterator[SpanRecord]:
        with closing(connect(self.url, self.database)) as client:
            variant = self._variant(client)
            sql, parameters = self._select(
                variant, ["TraceId IN {ids:Array(String)}"], {"ids": ids}, tail="ORDER BY TraceId"
            )
            yield from self._streamed(client, variant, sql, parameters, stream, by_trace=True)

    def _variant(self, client: Client) -> _Variant:
        try:
            return _JSON if is_json_table(client, self.database, self.table) else _PLAIN
        except Exception as exc:
            raise self._failed(exc) from exc

    def _select(
        self,
        variant: _Variant,
        clauses: list[str],
        parameters: dict[str, Any] | None = None,
        select: str | None = None,
        tail: str = "",
    ) -> tuple[str, dict[str, Any]]:
        """``SELECT`` (the variant's columns by default) over the rows ``clauses`` keep, of the
        shard's runs when there is one."""
        parameters = dict(parameters or {})
        if self.shard is not None:
            clauses = [
                *clauses,
                variant.llm,
                *shard_clause(self.shard, variant.run_key, parameters),
            ]
        where = " AND ".join(clauses) or "1"
        table = f"`{self.database}`.`{self.table}`"
        return f"SELECT {select or variant.columns} FROM {table} WHERE {where} {tail}", parameters

    def _query(self, client: Client, sql: str, parameters: dict[str, Any]) -> list[Any]:
        try:
            return list(client.query(sql, parameters=parameters).result_rows)
        except Exception as exc:
            raise self._failed(exc) from exc

    def _streamed(
        self,
        client: Client,
        variant: _Variant,
        sql: str,
        parameters: dict[str, Any],
        stream: SpanStream,
        *,
        by_trace: bool = False,
    ) -> Iterator[SpanRecord]:
        """The query's rows, decoded as they arrive a block at a time."""
        settings = {"max_block_size": BLOCK_ROWS}
        try:
            with client.query_row_block_stream(
                sql, parameters=parameters, settings=settings
            ) as blocks:
                rows = (row for block in blocks for row in block)
                yield from self._decoded(variant, rows, stream, by_trace=by_trace)
        except AfOtelError:
            raise
        except Exception as exc:
            raise self._failed(exc) from exc

    def _decoded(
        self,
        variant: _Variant,
        rows: Iterable[Sequence[Any]],
        stream: SpanStream,
        *,
        by_trace: bool = False,
    ) -> Iterator[SpanRecord]:
        """The spans of ``rows``; an unreadable row is a problem of the stream, named by its
        trace and span. ``by_trace``: the rows come trace by trace, and ``traces_read`` counts
        the traces begun."""
        last = None
        for row in rows:
            if by_trace and row[3] != last:
                stream.traces_read += 1
                last = row[3]
            where = f"{self.where} trace {row[3]} span {row[4]}"
            try:
                yield variant.decode(row, where)
            except (Problem, ValueError) as exc:
                stream.problem(f"{where}: {exc}", unit="span")

    def _failed(self, exc: Exception) -> SourceError:
        return SourceError(f"--clickhouse {self.where}: {exc}")
