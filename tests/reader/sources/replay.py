"""Backend bodies built from a real recording: an OTLP JSON lines file written by af_otel's own
pipeline, re-shaped the way Tempo, Jaeger and Phoenix serve spans (see fixtures/README.md for
where each shape comes from), so a replay server can answer window queries with them."""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from af_otel import names
from af_otel.reader.sources import ARRAY_KEYS

_KIND_NAMES = {
    0: "SPAN_KIND_UNSPECIFIED",
    1: "SPAN_KIND_INTERNAL",
    2: "SPAN_KIND_SERVER",
    3: "SPAN_KIND_CLIENT",
    4: "SPAN_KIND_PRODUCER",
    5: "SPAN_KIND_CONSUMER",
}
_STATUS_NAMES = {0: "STATUS_CODE_UNSET", 1: "STATUS_CODE_OK", 2: "STATUS_CODE_ERROR"}
_ANY_VALUE_MEMBERS = (
    "string_value",
    "bool_value",
    "int_value",
    "double_value",
    "array_value",
    "kvlist_value",
    "bytes_value",
)


def export_lines(path: Path) -> list[dict[str, Any]]:
    """The export requests of an OTLP JSON lines file, one dict per line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _spans(doc: Mapping[str, Any]) -> Iterable[tuple[dict[str, Any], dict[str, Any], Any]]:
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                yield rs, ss, span


def by_trace(docs: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """One ``{"resourceSpans": [...]}`` per trace id (hex), in order of first appearance."""
    out: dict[str, dict[str, Any]] = {}
    for doc in docs:
        for rs, ss, span in _spans(doc):
            trace = out.setdefault(span["traceId"], {"resourceSpans": []})
            block = {k: v for k, v in ss.items() if k != "spans"} | {"spans": [span]}
            resource = {k: v for k, v in rs.items() if k != "scopeSpans"}
            trace["resourceSpans"].append(resource | {"scopeSpans": [block]})
    return out


def merged(docs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """All requests' ``resourceSpans`` in one document."""
    return {"resourceSpans": [rs for doc in docs for rs in doc.get("resourceSpans", [])]}


def as_jsonpb(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Tempo's gogo jsonpb: base64 ids, enum names (int64 stay decimal strings)."""
    out = copy.deepcopy(dict(doc))
    for _, _, span in _spans(out):
        for key in ("traceId", "spanId", "parentSpanId"):
            if span.get(key):
                span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
        span["kind"] = _KIND_NAMES[int(span.get("kind", 0))]
        status = span.setdefault("status", {})
        if "code" in status:
            status["code"] = _STATUS_NAMES[int(status["code"])]
    return out


def tempo_search(traces: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A Tempo ``/api/search`` SearchResponse listing ``traces`` (hex id -> OTLP doc).

    Trace ids lose their leading zeros, as Tempo prints them; each trace carries a spanSet of
    its first span, as with ``spss=1``.
    """
    found = []
    for trace_id, doc in traces.items():
        _, _, first = next(iter(_spans(doc)))
        start, end = int(first["startTimeUnixNano"]), int(first["endTimeUnixNano"])
        service = next(
            (
                a["value"].get("stringValue")
                for a in doc["resourceSpans"][0].get("resource", {}).get("attributes", [])
                if a["key"] == "service.name"
            ),
            "",
        )
        span_set = {
            "spans": [
                {
                    "spanID": first["spanId"],
                    "startTimeUnixNano": str(start),
                    "durationNanos": str(end - start),
                    "attributes": [
                        {"key": "service.name", "value": {"stringValue": service}},
                    ],
                }
            ],
            "matched": 1,
        }
        found.append(
            {
                "traceID": trace_id.lstrip("0"),
                "rootServiceName": service,
                "rootTraceName": first["name"],
                "startTimeUnixNano": str(start),
                "durationMs": max(1, (end - start) // 1_000_000),
                "spanSet": span_set,
                "spanSets": [span_set],
            }
        )
    return {
        "traces": found,
        "metrics": {"inspectedBytes": "48213", "completedJobs": 1, "totalJobs": 1},
    }


def tempo_v2(doc: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """A Tempo ``/api/v2/traces/<id>`` body for one trace."""
    return {
        "trace": as_jsonpb(doc),
        "metrics": {"inspectedBytes": "9034", "completedJobs": 1, "totalJobs": 1},
        **extra,
    }


def jaeger_v3(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A Jaeger ``/api/v3`` body: pdata through gogo jsonpb (hex ids, enum numbers), roots with
    ``"parentSpanId": ""``, wrapped as ``{"result": ...}``."""
    out = copy.deepcopy(dict(doc))
    for _, _, span in _spans(out):
        span.setdefault("parentSpanId", "")
    return {"result": out}


def _go_json(value: Any) -> str:
    # pcommon Value.AsString: Go's encoding/json of the raw value (compact, maps sorted).
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _raw(value: Mapping[str, Any]) -> Any:
    if "arrayValue" in value:
        return [_raw(v) for v in value["arrayValue"].get("values", [])]
    if "kvlistValue" in value:
        return {kv["key"]: _raw(kv["value"]) for kv in value["kvlistValue"].get("values", [])}
    if "intValue" in value:
        return int(value["intValue"])
    return next(iter(value.values()), None)


def arrays_as_text(doc: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """Every array and map attribute (span and event) as JSON text, as Jaeger 2.x serves them
    from Elasticsearch, OpenSearch, Cassandra or Badger; returns the doc and how many af_otel
    array attributes were turned into text."""
    out = copy.deepcopy(dict(doc))
    changed = 0
    for _, _, span in _spans(out.get("result", out)):
        holders = [span, *span.get("events", [])]
        for holder in holders:
            for attribute in holder.get("attributes", []):
                value = attribute["value"]
                if "arrayValue" in value or "kvlistValue" in value:
                    attribute["value"] = {"stringValue": _go_json(_raw(value))}
                    changed += attribute["key"] in ARRAY_KEYS
    return out, changed


def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def proto_names(node: Any, *, nulls: bool = False) -> Any:
    """Every field under its protobuf name (``trace_id``); with ``nulls`` each AnyValue also
    lists its unset members as ``null``, as Phoenix's span API writes them."""
    if isinstance(node, list):
        return [proto_names(item, nulls=nulls) for item in node]
    if not isinstance(node, dict):
        return node
    out = {_snake(key): proto_names(value, nulls=nulls) for key, value in node.items()}
    if nulls and any(member in out for member in _ANY_VALUE_MEMBERS):
        out = dict.fromkeys(_ANY_VALUE_MEMBERS) | out
    return out


def without_epoch(doc: dict[str, Any], epoch: int) -> dict[str, Any]:
    """``doc`` with the LLM-call spans of ``epoch`` taken out (as a cut trace loses them)."""
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            ss["spans"] = [
                s
                for s in ss["spans"]
                if {"key": names.EPOCH, "value": {"intValue": str(epoch)}} not in s["attributes"]
            ]
    return doc
