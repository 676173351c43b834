"""A fixture writer: OTLP JSON lines into the `otel_traces` table, row by row as the OpenTelemetry
Collector's ClickHouse exporter writes them (fixtures/README.md names the upstream files).

The exporter's mapping, restated: the span's start time is ``Timestamp`` and ``Duration`` is end
minus start in nanoseconds; ids are lowercase hex, an absent parent the empty string; ``SpanKind``
and ``StatusCode`` are pdata's names (``Client``, ``Ok``); ``ServiceName`` is the resource's
``service.name``; ``ScopeName``/``ScopeVersion`` the scope's; every attribute value, on the
resource, the span, its events and links, is pdata's ``Value.AsString()``: a string as is, an
int in decimal, a bool ``true``/``false``, a double in ECMAScript's shortest form, bytes in
standard base64, an array or a map as Go's ``encoding/json`` of the raw value (compact, keys
sorted, ``<``, ``>``, ``&`` escaped); events and links become the ``Events.*``/``Links.*``
arrays, one element each. Dropped counts are not kept.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

# pdata's SpanKind.String() and StatusCode.String(), by OTLP number.
KINDS = ("Unspecified", "Internal", "Server", "Client", "Producer", "Consumer")
STATUSES = ("Unset", "Ok", "Error")

COLUMNS = (
    "Timestamp",
    "TraceId",
    "SpanId",
    "ParentSpanId",
    "TraceState",
    "SpanName",
    "SpanKind",
    "ServiceName",
    "ResourceAttributes",
    "ScopeName",
    "ScopeVersion",
    "SpanAttributes",
    "Duration",
    "StatusCode",
    "StatusMessage",
    "Events.Timestamp",
    "Events.Name",
    "Events.Attributes",
    "Links.TraceId",
    "Links.SpanId",
    "Links.TraceState",
    "Links.Attributes",
)


def go_float(number: float) -> str:
    """A double as pdata writes it (Go's ES6-style ``float64AsString``)."""
    if math.isinf(number) or math.isnan(number):
        return "json: unsupported value: " + (
            "NaN" if math.isnan(number) else ("+Inf" if number > 0 else "-Inf")
        )
    size = abs(number)
    if size != 0 and (size < 1e-6 or size >= 1e21):
        text = repr(number)  # shortest digits, exponent form
        mantissa, _, exponent = text.partition("e")
        sign, digits = exponent[0], exponent[1:].lstrip("0") or "0"
        return f"{mantissa}e{sign}{digits}"
    text = format(Decimal(repr(number)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _raw(value: Mapping[str, Any]) -> Any:
    """An OTLP JSON AnyValue as pdata's ``AsRaw()``: the plain value."""
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "bytesValue" in value:
        return base64.b64decode(value["bytesValue"])
    if "arrayValue" in value:
        return [_raw(item) for item in value["arrayValue"].get("values", [])]
    if "kvlistValue" in value:
        return {
            kv["key"]: _raw(kv.get("value", {})) for kv in value["kvlistValue"].get("values", [])
        }
    return None


def go_json(value: Any) -> str:
    """Go's ``json.Marshal`` of a raw value: compact, map keys sorted, HTML characters escaped."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, bytes):
        return go_json(base64.b64encode(value).decode("ascii"))
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
            text = text.replace(char, escape)
        return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    if isinstance(value, list):
        return "[" + ",".join(go_json(item) for item in value) + "]"
    return "{" + ",".join(f"{go_json(k)}:{go_json(value[k])}" for k in sorted(value)) + "}"


def as_string(value: Mapping[str, Any]) -> str:
    """pdata's ``Value.AsString()`` of an OTLP JSON AnyValue."""
    raw = _raw(value)
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, int):
        return str(raw)
    if isinstance(raw, float):
        return go_float(raw)
    if isinstance(raw, bytes):
        return base64.b64encode(raw).decode("ascii")
    return go_json(raw)


def _map(items: Sequence[Mapping[str, Any]] | None) -> dict[str, str]:
    return {kv["key"]: as_string(kv.get("value", {})) for kv in items or ()}


def _json_raw(value: Any) -> Any:
    # The JSON variant's ValueToJSON: bytes as base64 text, everything else as its raw value.
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list):
        return [_json_raw(item) for item in value]
    if isinstance(value, dict):
        return {k: _json_raw(v) for k, v in value.items()}
    return value


def _json_map(items: Sequence[Mapping[str, Any]] | None) -> str:
    """The JSON variant's attributes (``chjson.AttributesToJSON``): one object, the attribute
    keys as they are (dots and all), each value typed: strings, ints, doubles, bools, arrays,
    maps as objects, bytes as base64."""
    return json.dumps({kv["key"]: _json_raw(_raw(kv.get("value", {}))) for kv in items or ()})


def exporter_rows(lines: Sequence[str], *, json_variant: bool = False) -> Iterator[list[Any]]:
    """Each span of the OTLP JSON lines as the exporter's row, in `COLUMNS` order; with
    ``json_variant`` as its ``json`` option writes it (attribute columns as JSON text)."""
    attrs = _json_map if json_variant else _map
    for line in lines:
        if not line.strip():
            continue
        for resource_spans in json.loads(line).get("resourceSpans", []):
            resource_items = resource_spans.get("resource", {}).get("attributes")
            resource = attrs(resource_items)
            service = _map(resource_items).get("service.name", "")
            for scope_spans in resource_spans.get("scopeSpans", []):
                scope = scope_spans.get("scope", {})
                for span in scope_spans.get("spans", []):
                    start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
                    events = span.get("events", [])
                    links = span.get("links", [])
                    status = span.get("status", {})
                    yield [
                        start,
                        span["traceId"].lower(),
                        span["spanId"].lower(),
                        (span.get("parentSpanId") or "").lower(),
                        span.get("traceState", ""),
                        span.get("name", ""),
                        KINDS[int(span.get("kind", 0))],
                        service,
                        resource,
                        scope.get("name", ""),
                        scope.get("version", ""),
                        attrs(span.get("attributes")),
                        end - start,
                        STATUSES[int(status.get("code", 0))],
                        status.get("message", ""),
                        [int(e["timeUnixNano"]) for e in events],
                        [e.get("name", "") for e in events],
                        [attrs(e.get("attributes")) for e in events],
                        [link["traceId"].lower() for link in links],
                        [link["spanId"].lower() for link in links],
                        [link.get("traceState", "") for link in links],
                        [attrs(link.get("attributes")) for link in links],
                    ]


DDL = Path(__file__).parent / "fixtures" / "otel_traces.sql"
JSON_DDL = Path(__file__).parent / "fixtures" / "otel_traces_json.sql"


def load_table(
    client: Any,
    traces: Path,
    *,
    database: str = "default",
    table: str = "otel_traces",
    json_variant: bool = False,
) -> int:
    """Create ``database.table`` with the exporter's DDL (of its JSON variant with
    ``json_variant``) and insert ``traces`` as the exporter would; the number of rows written."""
    client.command(f"CREATE DATABASE IF NOT EXISTS `{database}`")
    ddl = (
        (JSON_DDL if json_variant else DDL)
        .read_text(encoding="utf-8")
        .replace(
            "CREATE TABLE IF NOT EXISTS otel_traces",
            f"CREATE TABLE IF NOT EXISTS `{database}`.`{table}`",
        )
    )
    client.command(ddl)
    rows = list(
        exporter_rows(traces.read_text(encoding="utf-8").splitlines(), json_variant=json_variant)
    )
    client.insert(table, rows, column_names=list(COLUMNS), database=database)
    return len(rows)
