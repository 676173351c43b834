"""``--results TABLE``: one row a call in a ClickHouse table, where dashboards and alerts look.

The table is a ``ReplacingMergeTree`` keyed on the call (service, run, trace id, span id) with
the audit time as its version: auditing a window again inserts the calls again, and ClickHouse
keeps the newest row of each call when it merges parts. Reading ``FROM t FINAL`` (or after
``OPTIMIZE TABLE t FINAL``) shows one row a call however often a window was audited, and the
newest verdict (a store that has since received a missing blob changes it). Delete-then-insert
was not chosen: a lightweight DELETE per window is a mutation on every replica, where inserting
is what ClickHouse does best. Partitioned by day as the exporter's table is, so that a window's
rows stay in its day's partition and the TTL a user adds drops whole days.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from af_otel.audit.calls import CallResult
from af_otel.audit.clickhouse import Table
from af_otel.errors import SourceError

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

__all__ = ["RESULT_COLUMNS", "ResultsWriter", "create_results_table"]

RESULT_COLUMNS: Final = (
    "Timestamp",
    "ServiceName",
    "RunId",
    "Lane",
    "Epoch",
    "TraceId",
    "SpanId",
    "Model",
    "Status",
    "GapKinds",
    "Reason",
    "Source",
    "AuditedAt",
)

_DDL: Final = """
CREATE TABLE IF NOT EXISTS {table} (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    RunId String CODEC(ZSTD(1)),
    Lane String CODEC(ZSTD(1)),
    Epoch UInt32 CODEC(ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    Model LowCardinality(String) CODEC(ZSTD(1)),
    Status LowCardinality(String) CODEC(ZSTD(1)),
    GapKinds Array(LowCardinality(String)) CODEC(ZSTD(1)),
    Reason String CODEC(ZSTD(1)),
    Source String CODEC(ZSTD(1)),
    AuditedAt DateTime64(9) CODEC(Delta, ZSTD(1))
) ENGINE = ReplacingMergeTree(AuditedAt)
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, RunId, TraceId, SpanId)
"""
# Rows sent in one INSERT: ClickHouse prefers few large inserts to many small ones.
INSERT_ROWS: Final = 10_000


def create_results_table(client: Client, table: Table) -> None:
    """Create the results table ``table`` if it does not exist (the audit's own DDL above)."""
    try:
        client.command(_DDL.format(table=table.qualified))
    except Exception as exc:
        raise SourceError(f"--results {table.database}.{table.table}: {exc}") from exc


class ResultsWriter:
    """Buffers results and inserts them ``INSERT_ROWS`` at a time; `close` sends the rest. One
    audit time for the whole run, so that every row it wrote carries the same version."""

    def __init__(self, client: Client, table: Table) -> None:
        create_results_table(client, table)
        self.client, self.table = client, table
        self.audited_at = time.time_ns()
        self.rows: list[list[object]] = []
        self.written = 0

    def add(self, results: Sequence[CallResult]) -> None:
        for r in results:
            self.rows.append(
                [
                    r.time_ns,
                    r.service,
                    r.run_id,
                    r.lane,
                    r.epoch,
                    r.trace_id,
                    r.span_id,
                    r.model,
                    r.status,
                    list(r.gaps),
                    r.reason,
                    r.source,
                    self.audited_at,
                ]
            )
        if len(self.rows) >= INSERT_ROWS:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        try:
            self.client.insert(
                self.table.table,
                self.rows,
                column_names=list(RESULT_COLUMNS),
                database=self.table.database,
            )
        except Exception as exc:
            raise SourceError(f"--results {self.table.database}.{self.table.table}: {exc}") from exc
        self.written += len(self.rows)
        self.rows = []

    def close(self) -> None:
        self.flush()
