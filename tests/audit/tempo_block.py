"""A fixture writer: OTLP JSON lines into a Tempo vParquet4 block (``meta.json`` and
``data.parquet``), written as Tempo's ``traceToParquet`` writes a trace (fixtures/README.md names
the upstream files this restates).

One row a trace, sorted by trace id: its resource spans (one a batch read from the file, the
spans of one trace from each line), each with its scope spans and spans. An attribute goes where
Tempo puts it: ``service.name`` and the Kubernetes names (string values) into the resource's own
columns; ``http.method``/``http.url`` (strings) and ``http.status_code`` (an int) into the span's;
an attribute that ``dedicated`` names (a string value) into the next spare
``DedicatedAttributes.StringNN`` column of its scope; every other one into the generic columns
(``Value``, ``ValueInt``, ``ValueDouble``, ``ValueBool``, one element, or all of a homogeneous array
with ``IsArray``; anything else as its JSON in ``ValueUnsupported``). Event times are written
relative to the span's start. The nested-set numbers Tempo computes later are left 0.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

RESOURCE_OWN = {
    "service.name": "ServiceName",
    "cluster": "Cluster",
    "namespace": "Namespace",
    "pod": "Pod",
    "container": "Container",
    "k8s.cluster.name": "K8sClusterName",
    "k8s.namespace.name": "K8sNamespaceName",
    "k8s.pod.name": "K8sPodName",
    "k8s.container.name": "K8sContainerName",
}
SPAN_OWN = {"http.method": "HttpMethod", "http.url": "HttpUrl"}
SPARE = [f"String{i:02d}" for i in range(1, 11)]


def _req(name: str, kind: pa.DataType) -> pa.Field:
    return pa.field(name, kind, nullable=False)


def _opt(name: str, kind: pa.DataType) -> pa.Field:
    return pa.field(name, kind, nullable=True)


def _list(name: str, element: pa.DataType) -> pa.Field:
    return _req(name, pa.list_(_req("element", element)))


ATTRIBUTE = pa.struct(
    [
        _req("Key", pa.string()),
        _req("IsArray", pa.bool_()),
        _list("Value", pa.string()),
        _list("ValueInt", pa.int64()),
        _list("ValueDouble", pa.float64()),
        _list("ValueBool", pa.bool_()),
        _opt("ValueUnsupported", pa.string()),
    ]
)
DEDICATED = pa.struct([_opt(name, pa.string()) for name in SPARE])
EVENT = pa.struct(
    [
        _req("TimeSinceStartNano", pa.uint64()),
        _req("Name", pa.string()),
        _list("Attrs", ATTRIBUTE),
        _req("DroppedAttributesCount", pa.int32()),
    ]
)
LINK = pa.struct(
    [
        _req("TraceID", pa.binary()),
        _req("SpanID", pa.binary()),
        _req("TraceState", pa.string()),
        _list("Attrs", ATTRIBUTE),
        _req("DroppedAttributesCount", pa.int32()),
    ]
)
SPAN = pa.struct(
    [
        _req("SpanID", pa.binary()),
        _req("ParentSpanID", pa.binary()),
        _req("ParentID", pa.int32()),
        _req("NestedSetLeft", pa.int32()),
        _req("NestedSetRight", pa.int32()),
        _req("Name", pa.string()),
        _req("Kind", pa.int64()),
        _req("TraceState", pa.string()),
        _req("StartTimeUnixNano", pa.uint64()),
        _req("DurationNano", pa.uint64()),
        _req("StatusCode", pa.int64()),
        _req("StatusMessage", pa.string()),
        _list("Attrs", ATTRIBUTE),
        _req("DroppedAttributesCount", pa.int32()),
        _list("Events", EVENT),
        _req("DroppedEventsCount", pa.int32()),
        _list("Links", LINK),
        _req("DroppedLinksCount", pa.int32()),
        _opt("HttpMethod", pa.string()),
        _opt("HttpUrl", pa.string()),
        _opt("HttpStatusCode", pa.int64()),
        _req("DedicatedAttributes", DEDICATED),
    ]
)
SCOPE = pa.struct(
    [
        _req("Name", pa.string()),
        _req("Version", pa.string()),
        _list("Attrs", ATTRIBUTE),
        _req("DroppedAttributesCount", pa.int32()),
    ]
)
RESOURCE = pa.struct(
    [
        _list("Attrs", ATTRIBUTE),
        _req("DroppedAttributesCount", pa.int32()),
        _req("ServiceName", pa.string()),
        *(_opt(column, pa.string()) for column in list(RESOURCE_OWN.values())[1:]),
        _req("DedicatedAttributes", DEDICATED),
    ]
)
SCOPE_SPANS = pa.struct([_req("Scope", SCOPE), _list("Spans", SPAN)])
RESOURCE_SPANS = pa.struct([_req("Resource", RESOURCE), _list("ss", SCOPE_SPANS)])
STATS = pa.struct([_req("SpanCount", pa.uint32()), _req("ErrorCount", pa.uint32())])
SCHEMA = pa.schema(
    [
        _req("TraceID", pa.binary()),
        _req("TraceIDText", pa.string()),
        _req("StartTimeUnixNano", pa.uint64()),
        _req("EndTimeUnixNano", pa.uint64()),
        _req("DurationNano", pa.uint64()),
        _req("RootServiceName", pa.string()),
        _req("RootSpanName", pa.string()),
        _req("ServiceStats", pa.map_(pa.string(), pa.field("value", STATS, nullable=False))),
        _list("rs", RESOURCE_SPANS),
    ]
)
KINDS = ["SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT"]
KINDS += ["SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"]
STATUSES = ["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"]


def _scalar(value: Mapping[str, Any]) -> tuple[str, Any] | None:
    for key, column in (
        ("stringValue", "Value"),
        ("intValue", "ValueInt"),
        ("doubleValue", "ValueDouble"),
        ("boolValue", "ValueBool"),
    ):
        if key in value:
            raw = value[key]
            return column, int(raw) if column == "ValueInt" else raw
    return None


def attribute(key: str, value: Mapping[str, Any]) -> dict[str, Any]:
    """An OTLP JSON attribute in Tempo's generic columns (``attrToParquet``)."""
    row: dict[str, Any] = {"Key": key, "IsArray": False, "ValueUnsupported": None}
    row.update(Value=[], ValueInt=[], ValueDouble=[], ValueBool=[])
    scalar = _scalar(value)
    if scalar is not None:
        row[scalar[0]].append(scalar[1])
        return row
    if "arrayValue" in value:
        items = [_scalar(item) for item in (value["arrayValue"].get("values") or [])]
        columns = {item[0] if item else None for item in items}
        if not items or (len(columns) == 1 and None not in columns):
            row["IsArray"] = True
            for column, element in (item for item in items if item):
                row[column].append(element)
            return row
    row["ValueUnsupported"] = json.dumps(value, separators=(",", ":"))
    return row


def _text(value: Mapping[str, Any]) -> str | None:
    text = value.get("stringValue")
    return text if isinstance(text, str) else None


def _own(
    items: Iterable[Mapping[str, Any]],
    columns: Mapping[str, str],
    dedicated: Sequence[str],
    status_code: bool = False,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Attributes split into their own columns, the spare ones and the generic ones."""
    own: dict[str, Any] = dict.fromkeys(columns.values())
    spare: dict[str, Any] = dict.fromkeys(SPARE)
    generic = []
    for item in items:
        key, value = item["key"], item.get("value") or {}
        text = _text(value)
        if key in columns and text is not None:
            own[columns[key]] = text
        elif status_code and key == "http.status_code" and "intValue" in value:
            own["HttpStatusCode"] = int(value["intValue"])
        elif key in dedicated and text is not None:
            spare[SPARE[dedicated.index(key)]] = text
        else:
            generic.append(attribute(key, value))
    own["DedicatedAttributes"] = spare
    return own, generic


def _span(span: Mapping[str, Any], dedicated: Sequence[str]) -> dict[str, Any]:
    start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
    own, generic = _own(span.get("attributes") or (), SPAN_OWN, dedicated, status_code=True)
    own.setdefault("HttpStatusCode", None)
    status = span.get("status") or {}
    code = status.get("code", 0)
    return {
        "SpanID": bytes.fromhex(span["spanId"]),
        "ParentSpanID": bytes.fromhex(span.get("parentSpanId") or ""),
        "ParentID": 0,
        "NestedSetLeft": 0,
        "NestedSetRight": 0,
        "Name": span.get("name", ""),
        "Kind": KINDS.index(span["kind"]) if isinstance(span.get("kind"), str) else span["kind"],
        "TraceState": span.get("traceState", ""),
        "StartTimeUnixNano": start,
        "DurationNano": end - start,
        "StatusCode": STATUSES.index(code) if isinstance(code, str) else code,
        "StatusMessage": status.get("message", ""),
        "Attrs": generic,
        "DroppedAttributesCount": span.get("droppedAttributesCount", 0),
        "Events": [
            {
                "TimeSinceStartNano": int(event["timeUnixNano"]) - start,
                "Name": event.get("name", ""),
                "Attrs": [
                    attribute(a["key"], a.get("value") or {}) for a in event.get("attributes") or ()
                ],
                "DroppedAttributesCount": event.get("droppedAttributesCount", 0),
            }
            for event in span.get("events") or ()
        ],
        "DroppedEventsCount": span.get("droppedEventsCount", 0),
        "Links": [],
        "DroppedLinksCount": span.get("droppedLinksCount", 0),
        **own,
    }


def _trace(trace_id: str, batches: list[dict[str, Any]]) -> dict[str, Any]:
    spans = [s for b in batches for ss in b["ss"] for s in ss["Spans"]]
    start = min(s["StartTimeUnixNano"] for s in spans)
    end = max(s["StartTimeUnixNano"] + s["DurationNano"] for s in spans)
    root = next(
        ((s, b) for b in batches for ss in b["ss"] for s in ss["Spans"] if not s["ParentSpanID"]),
        None,
    )
    stats: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for batch in batches:
        for ss in batch["ss"]:
            for span in ss["Spans"]:
                counts = stats[batch["Resource"]["ServiceName"]]
                counts[0] += 1
                counts[1] += span["StatusCode"] == 2
    return {
        "TraceID": bytes.fromhex(trace_id),
        "TraceIDText": trace_id.lstrip("0"),  # Tempo's TraceIDToHexString drops leading zeros
        "StartTimeUnixNano": start,
        "EndTimeUnixNano": end,
        "DurationNano": end - start,
        "RootServiceName": root[1]["Resource"]["ServiceName"] if root else "",
        "RootSpanName": root[0]["Name"] if root else "",
        "ServiceStats": [(k, {"SpanCount": a, "ErrorCount": e}) for k, (a, e) in stats.items()],
        "rs": batches,
    }


def write_block(
    lines: Path,
    folder: Path,
    *,
    span_columns: Sequence[str] = (),
    resource_columns: Sequence[str] = (),
    tenant: str = "single-tenant",
) -> Path:
    """Write the spans of the OTLP JSON lines file ``lines`` as one block under
    ``folder/tenant/<block id>/``, with these dedicated columns; returns the block's folder."""
    traces: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in lines.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for batch in json.loads(line).get("resourceSpans") or ():
            resource_own, resource_attrs = _own(
                (batch.get("resource") or {}).get("attributes") or (),
                RESOURCE_OWN,
                resource_columns,
            )
            resource_own["ServiceName"] = resource_own["ServiceName"] or ""
            by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for block in batch.get("scopeSpans") or ():
                scope = block.get("scope") or {}
                for span in block.get("spans") or ():
                    scope_spans = by_trace[span["traceId"]]
                    if not scope_spans or scope_spans[-1]["Scope"]["Name"] != scope.get("name", ""):
                        scope_spans.append(
                            {
                                "Scope": {
                                    "Name": scope.get("name", ""),
                                    "Version": scope.get("version", ""),
                                    "Attrs": [],
                                    "DroppedAttributesCount": 0,
                                },
                                "Spans": [],
                            }
                        )
                    scope_spans[-1]["Spans"].append(_span(span, span_columns))
            for trace_id, scope_spans in by_trace.items():
                resource = {"Attrs": resource_attrs, "DroppedAttributesCount": 0, **resource_own}
                traces[trace_id].append({"Resource": resource, "ss": scope_spans})
    rows = [_trace(trace_id, traces[trace_id]) for trace_id in sorted(traces)]
    block_id = str(uuid.uuid4())
    block = folder / tenant / block_id
    block.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), block / "data.parquet")
    start = min(r["StartTimeUnixNano"] for r in rows) // 10**9
    end = max(r["EndTimeUnixNano"] for r in rows) // 10**9
    columns = [{"n": name} for name in span_columns]
    columns += [{"s": "resource", "n": name} for name in resource_columns]
    meta = {
        "format": "vParquet4",
        "blockID": block_id,
        "tenantID": tenant,
        "startTime": datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "endTime": datetime.fromtimestamp(end, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "totalObjects": len(rows),
        "size": (block / "data.parquet").stat().st_size,
        "compactionLevel": 0,
        "encoding": "none",
        "indexPageSize": 0,
        "totalRecords": 1,
        "dataEncoding": "",
        "bloomShards": 1,
        "footerSize": 0,
        "dedicatedColumns": columns,
    }
    (block / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return block
