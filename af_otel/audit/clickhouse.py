"""The ClickHouse side of the audit: one connection, one query, and the runs it streams.

``--clickhouse URL`` is a clickhouse-connect URL: ``chdb:///dir`` opens the embedded engine
(clickhouse-connect's chDB backend) on a directory, ``http(s)://host:8123`` a server or a cluster.
Both go through the same client, so the query is the same text either way. ClickHouse does the
scan (the exporter's day partitions and its index on the attribute keys), the filter (the spans
af_otel enriched) and the grouping: the window is scanned once into a temporary table keyed on
the run, its run keys are sorted alone, then each range of runs comes ordered by run, and is
handed on one run at a time, so the Python side holds one run (and one chunk of the stream) and
the engine one insert block or one range's sort, never the day.

The rows come as ClickHouse encodes them, one JSON object a row (`ROW_FORMAT`), and are cut into
runs here by the hex of the run key each line opens with, without being decoded: this process
only splits bytes, and whoever verifies a run (a worker, or this process on one) decodes its
lines (`RunRows.rows`). Decoding is what a row costs on the Python side; kept off the stream, it
is spread over the workers instead of holding them all up behind one process.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Generator, Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol, cast

import orjson

from af_otel import names
from af_otel.errors import SourceError
from af_otel.reader.sources.clickhouse import (
    BLOCK_ROWS,
    DEFAULT_TABLE,
    Shard,
    check_identifiers,
    connect,
    is_json_table,
    shard_clause,
)
from af_otel.reader.sources.clickhouse_rows import (
    COLUMNS,
    JSON_COLUMNS,
    LLM_SPANS,
    LLM_SPANS_JSON,
    RUN_KEY,
    RUN_KEY_JSON,
)
from af_otel.reader.sources.window import Window

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

__all__ = [
    "JsonTable",
    "RunRows",
    "Scan",
    "Table",
    "connect",
    "connect_embedded",
    "count_runs",
    "referencing_rows",
    "row_of",
    "run_ranges",
    "stream_runs",
    "table_scan",
]

# How the rows of `stream_runs` and `referencing_rows` travel: JSON lines (a format every
# ClickHouse streams, chDB included, with no header or footer), each ``{"k": hex of the run key,
# "r": [the row's columns]}``, 64-bit integers as numbers, a float that is no number as text
# ("nan", "inf"), and a string that is not UTF-8 with its bad bytes replaced (U+FFFD), so that
# every line is JSON. The settings ride in the query's text: per-call settings make chDB's
# client hold the whole result.
ROW_FORMAT: Final = "JSONEachRow"
_ROW_SETTINGS: Final = (
    " SETTINGS output_format_json_quote_64bit_integers = 0,"
    " output_format_json_quote_denormals = 1, output_format_json_validate_utf8 = 1,"
    " output_format_json_named_tuples_as_objects = 1, optimize_read_in_order = 0,"
    " max_block_size = "
)
# The start of each line, before the run key's hex (``{"k":"``).
_KEY_START: Final = 6
# Bytes read from the stream at a time.
_CHUNK: Final = 1 << 20

# The connection, the table's names, its shards and the decoding of its rows are the reader's
# (`af_otel.reader.sources.clickhouse`, whose `ClickHouseSource` reads the same table for
# `verify`); `connect` is named here too, as the audit's way in. What is the audit's own is how a
# day is cut into runs and streamed.

# Rows one query of `stream_runs` sorts (ClickHouse holds them while it sorts): some 25 MB of the
# exporter's rows. On the temporary table a range's query reads its own granules; without it
# (`_copied` refused), each is a scan of the window (some 8% of a one-worker audit at 1M spans).
SORT_ROWS: Final = 10_000


@dataclass(frozen=True, slots=True)
class Table:
    """Where the spans are: the URL given, the database and the table, checked as identifiers."""

    url: str
    database: str
    table: str = DEFAULT_TABLE

    def __post_init__(self) -> None:
        check_identifiers(self.database, self.table)

    kind: ClassVar[str] = "table"
    llm: ClassVar[str] = LLM_SPANS
    run_key: ClassVar[str] = RUN_KEY
    row_columns: ClassVar[str] = ", ".join(COLUMNS)
    order: ClassVar[str] = "run_key, start_ns, SpanId"
    # Rows that refer to stored blobs: a run base, a commit payload.
    refers: ClassVar[str] = (
        f"(mapContains(SpanAttributes, '{names.RUN_BASE}')"
        f" OR arrayExists(a -> mapContains(a, '{names.COMMIT_REF}'), `Events.Attributes`))"
    )

    @property
    def qualified(self) -> str:
        return f"`{self.database}`.`{self.table}`"

    def sql(
        self, window: Window | None, shard: Shard | None, select: str, tail: str = ""
    ) -> tuple[str, dict[str, Any]]:
        """``SELECT select`` over the LLM-call rows of the window and shard, then ``tail``."""
        clauses: list[str] = [self.llm]
        parameters: dict[str, Any] = {}
        if window is not None:
            clauses.append(
                "Timestamp >= fromUnixTimestamp64Nano({start:Int64})"
                " AND Timestamp < fromUnixTimestamp64Nano({end:Int64})"
            )
            parameters.update(start=window.start_ns, end=window.end_ns)
        clauses += shard_clause(shard, self.run_key, parameters)
        return (
            f"SELECT {select} FROM {self.qualified} WHERE {' AND '.join(clauses)} {tail}",
            parameters,
        )

    def __str__(self) -> str:
        return f"{self.url} {self.database}.{self.table}"


@dataclass(frozen=True, slots=True)
class JsonTable(Table):
    """The exporter's JSON variant of the table (its ``json`` option): the same columns, with
    the attribute columns of ClickHouse type ``JSON`` (typed values, keys as paths)."""

    kind: ClassVar[str] = "table-json"
    llm: ClassVar[str] = LLM_SPANS_JSON
    run_key: ClassVar[str] = RUN_KEY_JSON
    row_columns: ClassVar[str] = ", ".join(JSON_COLUMNS)
    refers: ClassVar[str] = (
        f"(has(JSONAllPaths(SpanAttributes), '{names.RUN_BASE}')"
        f" OR arrayExists(a -> has(JSONAllPaths(a), '{names.COMMIT_REF}'), `Events.Attributes`))"
    )


def table_scan(client: Client, url: str, database: str, table: str) -> Table:
    """The scan of ``database.table``: `JsonTable` when its ``SpanAttributes`` is of type
    ``JSON``, else `Table` (a table that does not exist is named when the audit queries it)."""
    plain = Table(url, database, table)
    try:
        json_typed = is_json_table(client, database, table)
    except Exception as exc:
        raise _failed(plain, exc) from exc
    return JsonTable(url, database, table) if json_typed else plain


class Scan(Protocol):
    """What the audit reads: the exporter's table (`Table`) or span files (`af_otel.audit.files`).
    ``kind`` names how its rows decode (`af_otel.audit.calls.run_records`); every row shape holds
    the run key first, the start time in ns second, the trace id fourth and the span id fifth."""

    kind: ClassVar[str]
    run_key: ClassVar[str]
    row_columns: ClassVar[str]
    order: ClassVar[str]
    refers: ClassVar[str]

    def sql(
        self, window: Window | None, shard: Shard | None, select: str, tail: str = ""
    ) -> tuple[str, dict[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class RunRows:
    """The rows of one run (or of one call that names no run), in start order, as ClickHouse
    wrote them (`ROW_FORMAT`): ``lines`` holds ``count`` lines of the run ``key``.
    Bytes are what crosses to a worker, cheap to send; `rows` decodes them."""

    key: str
    lines: bytes
    count: int
    kind: str = Table.kind

    def split(self) -> list[bytes]:
        """The run's lines, one a row."""
        return self.lines.split(b"\n") if self.count else []

    @property
    def rows(self) -> list[list[Any]]:
        """Each row's columns, decoded (`row_of`)."""
        return [row_of(line) for line in self.split()]


def row_of(line: bytes) -> list[Any]:
    """The columns of one row from its line (`ROW_FORMAT`); raises `ValueError` on a line that is
    not what ClickHouse writes."""
    decoded = orjson.loads(line)
    row = decoded.get("r") if isinstance(decoded, dict) else None
    if not isinstance(row, list):
        raise ValueError('the line holds no row (a JSON array under "r")')
    return row


def connect_embedded() -> Client:
    """An in-memory chDB engine, to read files with (nothing is written anywhere)."""
    import clickhouse_connect  # noqa: PLC0415 - the optional audit extra

    try:
        return clickhouse_connect.get_client(interface="chdb")
    except Exception as exc:
        raise SourceError(f"audit: the embedded chDB engine could not start: {exc}") from exc


def _failed(scan: Scan, exc: Exception) -> SourceError:
    what = "--clickhouse" if type(scan) in (Table, JsonTable) else "audit"
    return SourceError(f"{what} {scan}: {exc}")


def count_runs(
    client: Client, scan: Scan, window: Window | None, shard: Shard | None
) -> tuple[int, int]:
    """How many runs and LLM-call spans the audit will read (for progress and its ETA)."""
    sql, parameters = scan.sql(window, shard, f"uniqExact({scan.run_key}), count()")
    try:
        runs, spans = client.query(sql, parameters=parameters).result_rows[0]
    except Exception as exc:
        raise _failed(scan, exc) from exc
    return int(runs), int(spans)


# Rows read to check the store before the audit starts (`referencing_rows`).
STORE_SAMPLE: Final = 100


def referencing_rows(
    client: Client, scan: Scan, window: Window | None, shard: Shard | None
) -> RunRows:
    """Up to `STORE_SAMPLE` rows of the window that refer to stored blobs (a run base, a commit
    payload; `af_otel.reader.blobs.referenced_blobs`), for the store check ``verify`` makes on
    the whole trace: a store holding none of their blobs cannot be the one they were written
    with."""
    sql, parameters = scan.sql(
        window, shard, _row_select(scan), f"AND {scan.refers} LIMIT {STORE_SAMPLE}"
    )
    lines = list(_row_lines(client, scan, sql, parameters, BLOCK_ROWS))
    return RunRows("", b"\n".join(lines), len(lines), scan.kind)


def run_ranges(
    client: Client,
    scan: Scan,
    window: Window | None,
    shard: Shard | None,
    rows: int = SORT_ROWS,
) -> list[tuple[str, str]]:
    """The run keys of the window (of the shard) cut into consecutive ranges in key order, each
    of whole runs holding at most ``rows`` rows (a larger run alone), as the hex of their first
    and last keys (a key's bytes go back to ClickHouse as they came, whatever they are).

    ClickHouse sorts only the keys, one row a run; what is held here is one pair a range."""
    sql, parameters = scan.sql(
        window, shard, f"hex({scan.run_key}), count()", "GROUP BY 1 ORDER BY 1"
    )
    ranges: list[tuple[str, str]] = []
    first = last = ""
    held = 0
    try:
        with client.query_row_block_stream(
            sql, parameters=parameters, settings={"max_block_size": BLOCK_ROWS}
        ) as blocks:
            for block in blocks:
                for key, count in block:
                    if held and held + count > rows:
                        ranges.append((first, last))
                        held = 0
                    if not held:
                        first = key
                    last, held = key, held + int(count)
    except Exception as exc:
        raise _failed(scan, exc) from exc
    if held:
        ranges.append((first, last))
    return ranges


def stream_runs(
    client: Client,
    scan: Scan,
    window: Window | None,
    shard: Shard | None,
    block_rows: int = BLOCK_ROWS,
    sort_rows: int = SORT_ROWS,
    warn: Callable[[str], None] | None = None,
) -> Generator[RunRows, None, None]:
    """Every run of the window (of the shard), one at a time in key order, its rows in start
    order; rows arrive in blocks of ``block_rows``, so a block and a run are what is held here.

    ClickHouse holds what it sorts: one query sorting the day's rows by run peaks with the day.
    So the day is read once into a temporary table ordered by run (`_copied`), and each range
    of runs (`run_ranges`, about ``sort_rows`` rows) is a query of its own on that table, which
    its primary index prunes to the range's rows; a run is complete when the next row names
    another. Where the table cannot be made (a server's read-only user), each range is a query
    on the scan itself, which scans the window again (the exporter's table has no index on the
    run): a cost of one scan per ``sort_rows`` rows, said once through ``warn`` (stderr)."""
    with _merges_held(client, scan), _copied(client, scan, window, shard, warn) as copy:
        source, where, within = (scan, window, shard) if copy is None else (copy, None, None)
        order = f"ORDER BY {source.order}"
        between = f"AND {source.run_key} BETWEEN unhex({{low:String}}) AND unhex({{high:String}})"
        for low, high in run_ranges(client, source, where, within, sort_rows):
            sql, parameters = source.sql(where, within, _row_select(source), f"{between} {order}")
            parameters.update(low=low, high=high)
            # Closed however the stream ends, so that the merges can be started again after.
            with closing(_row_lines(client, source, sql, parameters, block_rows)) as lines:
                yield from _runs(lines, scan.kind)


# The one pass's insert (`_copied`): blocks of some 2,500 rows and at most 8 MiB formed on one
# thread, small read buffers, the table's merges stopped, so that what the engine holds while it
# writes does not grow with the day. Measured at 1M spans (120,000 rows), the engine's peak over
# its rest: 440 MiB with the default blocks (up to 1,048,449 rows or 256 MiB) and the merges of
# the parts as they come, 200 MiB with the merges stopped, some 60 MiB with both bounded. The
# parts stay unmerged (33 at 1M spans): merging them after cost 80 MiB and 2.6 CPU-seconds.
_COPY_SETTINGS: Final = (
    f" SETTINGS max_insert_threads = 1, max_threads = 1, max_block_size = {BLOCK_ROWS},"
    f" min_insert_block_size_rows = 2500, min_insert_block_size_bytes = {8 << 20},"
    " max_read_buffer_size = 65536"
)
# Rows per index mark of the temporary table: a range's query reads its runs' granules in each
# part, and at most a granule of other runs at each end (64 read no less and cost more CPU).
_COPY_GRANULE: Final = 256


@dataclass(frozen=True, slots=True)
class Copy:
    """The temporary table of one audit (`_copied`): each row the scan's row (``r``) and its run
    key (``key``), the table's primary key. A range's rows are sorted by its query (run key,
    start, span id: the row's first, second and fifth columns): the table sorted by those three
    held some 150 MiB more while written at 1M spans, the run key alone some 15 MiB."""

    database: str
    kind: ClassVar[str] = "copy"
    run_key: ClassVar[str] = "key"
    row_columns: ClassVar[str] = "r"
    order: ClassVar[str] = "key, tupleElement(r, 2), tupleElement(r, 5)"
    refers: ClassVar[str] = "1"

    @property
    def qualified(self) -> str:
        return f"`{self.database}`.`runs`"

    def sql(
        self, window: Window | None, shard: Shard | None, select: str, tail: str = ""
    ) -> tuple[str, dict[str, Any]]:
        """``SELECT select`` over every row of the copy (made of one window and shard already)."""
        return f"SELECT {select} FROM {self.qualified} WHERE 1 {tail}", {}

    def __str__(self) -> str:
        return f"the audit's temporary table {self.database}.runs"


@contextmanager
def _copied(
    client: Client,
    scan: Scan,
    window: Window | None,
    shard: Shard | None,
    warn: Callable[[str], None] | None,
) -> Iterator[Copy | None]:
    """The scan's rows of the window and shard copied, in one pass, into a MergeTree table
    ordered by run, in a database of its own, dropped when the stream ends (however it ends);
    None, said through ``warn``, when ClickHouse refuses to make it (a read-only user)."""
    copy = Copy(f"af_otel_audit_{uuid.uuid4().hex}")
    select, parameters = scan.sql(
        window, shard, f"{scan.run_key} AS key, ({scan.row_columns}) AS r"
    )
    refused: str | None = None
    try:
        client.command(f"CREATE DATABASE `{copy.database}`")
    except Exception as exc:
        refused = _first_line(exc)
    if refused is not None:  # outside the handler: the runs stream from here
        (warn or _stderr)(
            f"{scan}: the temporary table {copy.qualified} could not be made ({refused});"
            " reading one range of runs a query instead, each a scan of the window (a cost"
            " that grows as the square of the day; docs/audit.md, Speed)"
        )
        yield None
        return
    try:
        # Made of the scan's own query: an error here is the scan's (a table that does not
        # exist), named as the ranges' query would name it.
        _command(
            client,
            scan,
            f"CREATE TABLE {copy.qualified} ENGINE = MergeTree ORDER BY key"
            f" SETTINGS index_granularity = {_COPY_GRANULE} EMPTY AS {select}",
            parameters,
        )
        # A server merges in its own process, and may not grant this: nothing lost then.
        with suppress(Exception):
            client.command(f"SYSTEM STOP MERGES {copy.qualified}")
        _command(client, scan, f"INSERT INTO {copy.qualified} {select}{_COPY_SETTINGS}", parameters)
        yield copy
    finally:
        # An audit that failed or closed early reports that, not a drop that failed after it.
        with suppress(Exception):
            client.command(f"DROP DATABASE IF EXISTS `{copy.database}` SYNC")


def _stderr(text: str) -> None:
    print(f"af-otel audit: {text}", file=sys.stderr)


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


@contextmanager
def _merges_held(client: Client, scan: Scan) -> Iterator[None]:
    """An embedded table's merges held off while its runs stream, started again after.

    The embedded engine merges a table's parts in the process that opened it: a day just written
    (the exporter inserts in batches) is merged by the audit that reads it, at a cost that grows
    with the day (some 150 MiB of peak memory at 1M spans of six fresh parts, the audit's own
    being about 540 MiB). Reading needs no merge; the parts are merged by whoever opens the
    directory next. A server merges in its own process: nothing is asked of it."""
    if not (isinstance(scan, Table) and scan.url.startswith("chdb://")):
        yield
        return
    try:
        client.command(f"SYSTEM STOP MERGES {scan.qualified}")
    except Exception:  # a read-only session: the audit reads all the same, merges and all
        yield
        return
    start = f"SYSTEM START MERGES {scan.qualified}"
    try:
        yield
    except BaseException:
        # The stream closed early or failed: that is what to report, not a client closed since.
        with suppress(Exception):
            client.command(start)
        raise
    _command(client, scan, start)


def _command(
    client: Client, scan: Scan, sql: str, parameters: dict[str, Any] | None = None
) -> None:
    try:
        client.command(sql, parameters=parameters)
    except Exception as exc:
        raise _failed(scan, exc) from exc


def _row_select(scan: Scan) -> str:
    """The columns of a streamed row: the run key's hex, then the row (`ROW_FORMAT`)."""
    return f"hex({scan.run_key}) AS k, ({scan.row_columns}) AS r"


def _runs(lines: Iterator[bytes], kind: str) -> Iterator[RunRows]:
    """The runs of lines ordered by run key: each line's key is read from where it opens, the
    rest of the line is not looked at."""
    key: bytes | None = None
    held: list[bytes] = []
    for line in lines:
        line_key = line[_KEY_START : line.index(b'"', _KEY_START)]
        if line_key != key:
            if key is not None:
                yield RunRows(_text(key), b"\n".join(held), len(held), kind)
            key, held = line_key, []
        held.append(line)
    if key is not None:
        yield RunRows(_text(key), b"\n".join(held), len(held), kind)


def _text(key_hex: bytes) -> str:
    return bytes.fromhex(key_hex.decode("ascii")).decode("utf-8", "replace")


def _row_lines(
    client: Client, scan: Scan, sql: str, parameters: dict[str, Any], block_rows: int
) -> Generator[bytes, None, None]:
    """The lines of one query's rows (`ROW_FORMAT`), read a chunk at a time."""
    sql += f"{_ROW_SETTINGS}{int(block_rows)}"
    try:
        with client.raw_stream(sql, parameters=parameters, fmt=ROW_FORMAT) as out:
            yield from _lines(cast(_Readable, out))
    except Exception as exc:
        raise _failed(scan, exc) from exc


class _Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...


def _lines(stream: _Readable) -> Iterator[bytes]:
    """The lines of ``stream`` without their newlines (a JSON line holds none of its own)."""
    pieces: list[bytes] = []
    while chunk := stream.read(_CHUNK):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if pieces:
                pieces.append(chunk[start:end])
                yield b"".join(pieces)
                pieces = []
            elif end > start:
                yield chunk[start:end]
            start = end + 1
        if start < len(chunk):
            pieces.append(chunk[start:])
    if pieces:
        yield b"".join(pieces)
