"""Span files audited through chDB: OTLP JSON lines (the Collector's file exporter, af_otel's own
JSON lines provider), plain or compressed (``.gz``, ``.zst``, ... as ClickHouse infers from the
name), one path or a glob.

ClickHouse's ``file()`` reads each line as text; the query unnests ``resourceSpans``,
``scopeSpans`` and ``spans``, keeps the spans af_otel enriched (the same rule as for the table),
and sorts them by run, so the stream is the table's: one run at a time. Each span travels as its
own OTLP JSON and is decoded by the reader's OTLP decoder (`span_record`), so a span read here
is the span ``verify`` reads from the same file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import orjson

from af_otel import names
from af_otel.reader.records import SpanRecord, freeze_attributes
from af_otel.reader.sources.clickhouse import Shard, shard_clause
from af_otel.reader.sources.decoders import Problem, attributes
from af_otel.reader.sources.otlp import span_record
from af_otel.reader.sources.window import Window

__all__ = ["Files", "span_from_otlp_row"]

_KEY: Final = "if(run_id != '', run_id, concat('span:', trace_id, ':', span_id))"
# Each span of each line, with what the filter, the window, the shard and the decoder need. An
# int64 is a JSON string in OTLP JSON and a number in some writers': both read.
_SPANS: Final = """
SELECT
    JSONExtractRaw(rs, 'resource', 'attributes') AS resource,
    JSONExtractString(ss, 'scope', 'name') AS scope,
    span,
    arrayMap(kv -> JSONExtractString(kv, 'key'), JSONExtractArrayRaw(span, 'attributes')) AS keys,
    arrayMap(kv -> JSONExtractRaw(kv, 'value'), JSONExtractArrayRaw(span, 'attributes')) AS values,
    JSONExtractString(values[indexOf(keys, '{run}')], 'stringValue') AS run_id,
    lower(JSONExtractString(span, 'traceId')) AS trace_id,
    lower(JSONExtractString(span, 'spanId')) AS span_id,
    toInt64OrZero(trim(BOTH '"' FROM JSONExtractRaw(span, 'startTimeUnixNano'))) AS start_ns,
    arrayMap(e -> JSONExtractString(e, 'name'), JSONExtractArrayRaw(span, 'events')) AS events
FROM file('{path}', 'JSONAsString')
ARRAY JOIN JSONExtractArrayRaw(json, 'resourceSpans') AS rs
ARRAY JOIN JSONExtractArrayRaw(rs, 'scopeSpans') AS ss
ARRAY JOIN JSONExtractArrayRaw(ss, 'spans') AS span
"""
_LLM: Final = (
    f"(has(keys, '{names.RECEIPT_STATE}') OR has(keys, '{names.RUN_ID}')"
    f" OR has(keys, '{names.EPOCH}') OR has(events, '{names.COMMIT_EVENT}')"
    " OR arrayExists(k -> startsWith(k, 'af.receipt.'), keys))"
)


def span_rows_sql(
    inner: str, window: Window | None, shard: Shard | None, select: str, tail: str = ""
) -> tuple[str, dict[str, Any]]:
    """The query over ``inner``'s span rows (``run_id``, ``trace_id``, ``span_id``, ``keys``,
    ``events``, ``start_ns``: span files here, Tempo blocks in `af_otel.audit.tempo`) that keeps
    the spans af_otel enriched, in the window and the shard, with the run key they group by."""
    clauses: list[str] = [_LLM]
    parameters: dict[str, Any] = {}
    if window is not None:
        clauses.append("start_ns >= {start:Int64} AND start_ns < {end:Int64}")
        parameters.update(start=window.start_ns, end=window.end_ns)
    clauses += shard_clause(shard, "run_key", parameters)
    sql = (
        f"SELECT {select} FROM (SELECT *, {_KEY} AS run_key FROM ({inner}))"
        f" WHERE {' AND '.join(clauses)} {tail}"
    )
    return sql, parameters


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


@dataclass(frozen=True, slots=True)
class Files:
    """OTLP JSON lines at ``pattern`` (a path or a glob), read by ClickHouse's ``file()``; or, when
    ``paths`` are given, the files at those paths (globs too), shown as ``pattern``."""

    pattern: str
    paths: tuple[str, ...] = ()
    kind: ClassVar[str] = "otlp"
    run_key: ClassVar[str] = "run_key"
    row_columns: ClassVar[str] = "run_key, start_ns, 0, trace_id, span_id, resource, scope, span"
    order: ClassVar[str] = "run_key, start_ns, span_id"
    refers: ClassVar[str] = (
        f"(has(keys, '{names.RUN_BASE}') OR position(span, '\"{names.COMMIT_REF}\"') > 0)"
    )

    def sql(
        self, window: Window | None, shard: Shard | None, select: str, tail: str = ""
    ) -> tuple[str, dict[str, Any]]:
        inner = " UNION ALL ".join(
            _SPANS.format(run=names.RUN_ID, path=_quoted(os.path.abspath(path)))
            for path in self.paths or (self.pattern,)
        )
        return span_rows_sql(inner, window, shard, select, tail)

    def __str__(self) -> str:
        return self.pattern


def span_from_otlp_row(row: Sequence[Any], origin: str) -> SpanRecord:
    """The span of one row `Files` selects: its own OTLP JSON, its resource's attributes and
    its scope's name, decoded as the reader decodes an OTLP file. Raises `Problem`."""
    _run, _start, _, _trace, _span, resource, scope, span = row
    try:
        resource_items = orjson.loads(resource) if resource else None
        decoded = orjson.loads(span)
    except orjson.JSONDecodeError as exc:
        raise Problem(f"not JSON: {exc}") from None
    frozen = freeze_attributes(attributes(resource_items, "resource"), owned=True)
    return span_record(decoded, frozen, str(scope), origin)
