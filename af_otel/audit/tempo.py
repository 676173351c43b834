"""Tempo vParquet4 blocks audited through chDB: each block's ``data.parquet`` read by ClickHouse's
``file()``, its traces unnested to spans, and each span rebuilt as Tempo itself rebuilds it.

A block is a directory holding ``meta.json`` (``"format": "vParquet4"``) and ``data.parquet``, one
row a trace: resource spans, scope spans, spans, each attribute in the generic
``Key``/``IsArray``/``Value``/``ValueInt``/``ValueDouble``/``ValueBool``/``ValueUnsupported``
columns, except those Tempo moves out of them: ``service.name`` and a few Kubernetes names on the
resource, ``http.method``/``http.url``/``http.status_code`` on the span, and the block's
*dedicated columns*, the attributes ``meta.json`` names (``dedicatedColumns``), each in a spare
``DedicatedAttributes.StringNN`` column in the order listed per scope. Event times are kept
relative to the span's start. The query names the dedicated columns per block (blocks may differ),
so the run key, the LLM-call filter and the decoder see every attribute wherever Tempo put it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import orjson

from af_otel import names
from af_otel.audit.files import span_rows_sql
from af_otel.errors import SourceError
from af_otel.reader.records import (
    AttrValue,
    EventRecord,
    SpanKind,
    SpanRecord,
    StatusCode,
    freeze_attributes,
)
from af_otel.reader.sources.clickhouse import Shard
from af_otel.reader.sources.decoders import (
    Problem,
    any_value,
    enum_value,
    id_hex,
    optional_id_hex,
)
from af_otel.reader.sources.window import Window

__all__ = ["Block", "TempoBlocks", "find_blocks", "span_from_tempo_row"]

FORMAT: Final = "vParquet4"
# Spare columns per scope (``DedicatedAttributes.String01`` to ``String10``).
SPARE_COLUMNS: Final = 10
# Attributes Tempo keeps in columns of their own, by column (string values only, except the
# status code, an int): read back under their attribute names.
RESOURCE_COLUMNS: Final = (
    ("ServiceName", "service.name"),
    ("Cluster", "cluster"),
    ("Namespace", "namespace"),
    ("Pod", "pod"),
    ("Container", "container"),
    ("K8sClusterName", "k8s.cluster.name"),
    ("K8sNamespaceName", "k8s.namespace.name"),
    ("K8sPodName", "k8s.pod.name"),
    ("K8sContainerName", "k8s.container.name"),
)
SPAN_COLUMNS: Final = (
    ("HttpMethod", "http.method"),
    ("HttpUrl", "http.url"),
    ("HttpStatusCode", "http.status_code"),
)


@dataclass(frozen=True, slots=True)
class Block:
    """One block directory and the attributes its dedicated columns hold, per scope in order."""

    path: str
    span_columns: tuple[str, ...] = ()
    resource_columns: tuple[str, ...] = ()

    @classmethod
    def read(cls, path: str) -> Block:
        """The block at ``path`` from its ``meta.json``; raises `SourceError` naming the file."""
        meta_path = os.path.join(path, "meta.json")
        try:
            with open(meta_path, "rb") as file:
                meta = orjson.loads(file.read())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise SourceError(f"{meta_path}: cannot read the block's meta ({exc})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            found = meta.get("format") if isinstance(meta, dict) else None
            raise SourceError(f"{meta_path}: format {found!r}, the audit reads {FORMAT} blocks")
        columns: dict[str, list[str]] = {"span": [], "resource": []}
        for column in meta.get("dedicatedColumns") or ():
            # Tempo leaves out the defaults: scope "span", type "string" (the only type here).
            if not isinstance(column, dict) or column.get("t", "string") != "string":
                continue
            scope = columns.get(str(column.get("s", "span")))
            name = column.get("n")
            if scope is not None and isinstance(name, str) and len(scope) < SPARE_COLUMNS:
                scope.append(name)
        return cls(path, tuple(columns["span"]), tuple(columns["resource"]))


def find_blocks(directory: str) -> list[Block]:
    """Every block at or under ``directory`` (a block, a tenant's folder, a bucket's copy)."""
    found = [
        Block.read(root)
        for root, _dirs, files in sorted(os.walk(directory))
        if "meta.json" in files and "data.parquet" in files
    ]
    return sorted(found, key=lambda block: block.path)


def _spare(scope_column: str, index: int) -> str:
    return f"{scope_column}.DedicatedAttributes.String{index + 1:02d}"


def _array(texts: Sequence[str]) -> str:
    return "[" + ", ".join(f"'{_quoted(text)}'" for text in texts) + "]::Array(String)"


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _block_sql(block: Block) -> str:
    """The spans of one block with what the filter, the window, the shard and the decoder need."""
    present = [
        f"if({_spare('span', i)} IS NULL, '', '{_quoted(name)}')"
        for i, name in enumerate(block.span_columns)
    ]
    keys = "arrayMap(a -> a.Key, span.Attrs)"
    if present:
        keys = f"arrayConcat({keys}, arrayFilter(k -> k != '', [{', '.join(present)}]))"
    if names.RUN_ID in block.span_columns:
        run = f"ifNull({_spare('span', block.span_columns.index(names.RUN_ID))}, '')"
    else:
        run = f"arrayFirst(a -> a.Key = '{names.RUN_ID}', span.Attrs).Value[1]"
    path = _quoted(os.path.abspath(os.path.join(block.path, "data.parquet")))
    return f"""
SELECT
    lower(hex(TraceID)) AS trace_id,
    lower(hex(span.SpanID)) AS span_id,
    toInt64(span.StartTimeUnixNano) AS start_ns,
    {run} AS run_id,
    {keys} AS keys,
    arrayMap(e -> e.Name, span.Events) AS events,
    lower(hex(span.ParentSpanID)) AS parent_id,
    span.Name AS name, span.Kind AS kind, span.DurationNano AS duration,
    span.StatusCode AS status, span.Attrs AS attrs, span.Events AS span_events,
    span.DroppedAttributesCount AS dropped_attributes,
    span.DroppedEventsCount AS dropped_events,
    span.HttpMethod AS http_method, span.HttpUrl AS http_url,
    span.HttpStatusCode AS http_status, span.DedicatedAttributes AS spare,
    rs.Resource AS resource, ss.Scope.Name AS scope,
    {_array(block.span_columns)} AS span_columns,
    {_array(block.resource_columns)} AS resource_columns
FROM file('{path}', 'Parquet')
ARRAY JOIN rs ARRAY JOIN rs.ss AS ss ARRAY JOIN ss.Spans AS span"""


@dataclass(frozen=True, slots=True)
class TempoBlocks:
    """The vParquet4 blocks at or under ``directory``, read by ClickHouse's ``file()``."""

    directory: str
    blocks: tuple[Block, ...]
    kind: ClassVar[str] = "tempo"
    run_key: ClassVar[str] = "run_key"
    row_columns: ClassVar[str] = (
        "run_key, start_ns, 0, trace_id, span_id, parent_id, name, kind, duration, status,"
        " attrs, span_events, dropped_attributes, dropped_events, http_method, http_url,"
        " http_status, spare, resource, scope, span_columns, resource_columns"
    )
    order: ClassVar[str] = "run_key, start_ns, span_id"
    refers: ClassVar[str] = (
        f"(has(keys, '{names.RUN_BASE}') OR arrayExists(e -> arrayExists("
        f"a -> a.Key = '{names.COMMIT_REF}', e.Attrs), span_events))"
    )

    def sql(
        self, window: Window | None, shard: Shard | None, select: str, tail: str = ""
    ) -> tuple[str, dict[str, Any]]:
        inner = " UNION ALL ".join(_block_sql(block) for block in self.blocks)
        return span_rows_sql(inner, window, shard, select, tail)

    def __str__(self) -> str:
        return self.directory


def _value(attribute: Mapping[str, Any], what: str) -> AttrValue | None:
    """One generic attribute column as Tempo reads it back (``parquetToProtoAttrs``): the first
    filled list wins; an array its whole list; a value of no column type is its OTLP JSON."""
    lists = [attribute.get(k) or [] for k in ("Value", "ValueInt", "ValueDouble", "ValueBool")]
    # The audit's rows come as JSON, which writes a double that is no number as text ("nan").
    lists[2] = [float(v) if isinstance(v, str) else v for v in lists[2]]
    if attribute.get("IsArray"):
        return next((tuple(values) for values in lists if values), ())
    for values in lists:
        if values:
            return values[0]  # type: ignore[no-any-return]
    unsupported = attribute.get("ValueUnsupported")
    if unsupported is None:
        return None
    try:
        return any_value(json.loads(unsupported), what)
    except ValueError:
        raise Problem(f"{what} holds no OTLP JSON value") from None


def _attributes(
    generic: Sequence[Mapping[str, Any]],
    own: Mapping[str, Any],
    dedicated: Sequence[str],
    columns: Sequence[tuple[str, str]],
    what: str,
) -> Mapping[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    for attribute in generic:
        key = str(attribute["Key"])
        value = _value(attribute, f"{what} {key!r}")
        if value is not None:
            out[key] = value
    spare = own.get("DedicatedAttributes") or {}
    for index, name in enumerate(dedicated):
        value = spare.get(f"String{index + 1:02d}")
        if value is not None:
            out[name] = value
    for column, name in columns:
        value = own.get(column)
        # Tempo reads back a service name only when it is not empty, the others when set.
        if value is None or (column == "ServiceName" and value == ""):
            continue
        out[name] = value
    return freeze_attributes(out, owned=True)


def span_from_tempo_row(row: Sequence[Any], origin: str) -> SpanRecord:
    """The span of one row `TempoBlocks` selects, with its resource and scope. Raises
    `Problem` naming the field that cannot be read."""
    (_run, start, _, trace_id, span_id, parent_id, name, kind, duration, status, attrs, events,
     dropped_attributes, dropped_events, http_method, http_url, http_status, spare, resource,
     scope, span_columns, resource_columns) = row  # fmt: skip
    own = {
        "HttpMethod": http_method,
        "HttpUrl": http_url,
        "HttpStatusCode": http_status,
        "DedicatedAttributes": spare,
    }
    return SpanRecord(
        trace_id=id_hex(trace_id, 16, "TraceID"),
        span_id=id_hex(span_id, 8, "SpanID"),
        parent_span_id=optional_id_hex(parent_id or None, 8, "ParentSpanID"),
        name=str(name),
        kind=enum_value(kind, SpanKind, "Kind"),
        start_ns=start,
        end_ns=start + int(duration),
        attributes=_attributes(attrs, own, span_columns, SPAN_COLUMNS, "Attrs"),
        events=tuple(
            EventRecord(
                name=str(event["Name"]),
                time_ns=start + int(event["TimeSinceStartNano"]),  # kept relative to the start
                attributes=_attributes(event["Attrs"], {}, (), (), f"Events[{k}].Attrs"),
                dropped_attributes_count=int(event["DroppedAttributesCount"]),
            )
            for k, event in enumerate(events)
        ),
        resource=_attributes(
            resource["Attrs"], resource, resource_columns, RESOURCE_COLUMNS, "Resource.Attrs"
        ),
        scope=str(scope),
        status_code=enum_value(status, StatusCode, "StatusCode"),
        dropped_attributes_count=int(dropped_attributes),
        dropped_events_count=int(dropped_events),
        origin=origin,
    )
