"""The collector-config stack as the tests see it: its files parsed, and the names they must use.

Every expected name is derived from `af_otel.names` (and the GenAI semconv package for the
`gen_ai.*` keys), so a rename there breaks the structural tests instead of drifting silently.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_OPERATION_NAME,
    GEN_AI_REQUEST_MODEL,
)

from af_otel import names
from af_otel.semconv import genai

ROOT = Path(__file__).resolve().parents[2]
STACK = ROOT / "collector-config"
OTELCOL = STACK / "otelcol.yaml"
OTELCOL_REDACT = STACK / "otelcol-redact.yaml"
TEMPO = STACK / "tempo.yaml"
PROMETHEUS = STACK / "prometheus.yml"
ALERTS = STACK / "alerts.yaml"
COMPOSE = STACK / "docker-compose.yaml"
JAEGER = STACK / "jaeger.yaml"
JAEGER_UI = STACK / "jaeger-ui.json"
GRAFANA_DATASOURCES = STACK / "grafana/provisioning/datasources/datasources.yaml"
GRAFANA_PROVIDERS = STACK / "grafana/provisioning/dashboards/dashboards.yaml"
DASHBOARD = STACK / "grafana/dashboards/af-otel-receipts.json"
UNIT_TESTS = Path(__file__).with_name("alerts_test.yaml")

# Span attributes that become span-metric dimensions, in the order both configs list them.
DIMENSIONS: tuple[str, ...] = (
    names.RECEIPT_STATE,
    names.GAP_NO_RECEIPT_ON_CHART,
    names.RECEIPT_ABSENT_REASON,
    GEN_AI_OPERATION_NAME,
    GEN_AI_REQUEST_MODEL,
)

# The operations whose spans are LLM calls: those af_otel mints receipts for.
LLM_OPERATIONS: frozenset[str] = genai.LLM_OPERATIONS


def prometheus_name(otel_name: str) -> str:
    """Prometheus's classic escaping of an OTel name: every character outside [A-Za-z0-9_] is `_`."""
    return re.sub(r"[^A-Za-z0-9_]", "_", otel_name)


# Metric names as each source exposes them to Prometheus.
# span_metrics connector (default namespace traces.span.metrics) through the prometheus exporter
COLLECTOR_CALLS = "traces_span_metrics_calls_total"
TEMPO_CALLS = "traces_spanmetrics_calls_total"  # Tempo metrics-generator, fixed name
RECEIPTS = prometheus_name(names.METRIC_RECEIPTS) + "_total"  # counter -> _total suffix
# The reader's verdict counter, as Prometheus names it (af-otel verify adds to it).
VERDICTS = names.METRIC_VERDICTS.replace(".", "_") + "_total"

# The service label each source puts on its series, by alerts.yaml group.
GROUPS: dict[str, tuple[str, str]] = {
    "af-otel-receipts": (RECEIPTS, "job"),
    "af-otel-collector-spans": (COLLECTOR_CALLS, "service_name"),
    "af-otel-tempo-spans": (TEMPO_CALLS, "service"),
    "af-otel-verification": (VERDICTS, "job"),
}


def load_yaml(path: Path) -> Any:
    """The parsed YAML file; a missing or empty file fails the calling test."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert data, f"{path} is empty"
    return data


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def alert_rules() -> Iterator[tuple[str, dict[str, Any]]]:
    """(group name, rule) for every alerting rule in alerts.yaml."""
    for group in load_yaml(ALERTS)["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                yield group["name"], rule


def alert_names() -> list[str]:
    return [rule["alert"] for _, rule in alert_rules()]


@dataclass(frozen=True, slots=True)
class Selector:
    """One metric reference in a PromQL expression: `name{label op "value", ...}`."""

    metric: str
    matchers: tuple[tuple[str, str, str], ...]


# A metric reference is an identifier followed by `{` or `[`; functions are followed by `(`,
# grouping labels by `,` or `)`.
_REF = re.compile(
    r"(?P<metric>[A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{(?P<matchers>[^}]*)\})?\s*(?=[\[{)]|$)"
)
_MATCHER = re.compile(
    r'\s*(?P<label>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<op>=~|!~|!=|=)\s*"(?P<value>[^"]*)"\s*,?'
)
_BY = re.compile(r"\b(?:by|without)\s*\((?P<labels>[^)]*)\)")
_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "offset"})


def selectors(expr: str) -> list[Selector]:
    """Every metric selector in a PromQL expression (enough PromQL for the stack's own rules)."""
    found: list[Selector] = []
    for match in _REF.finditer(expr):
        metric = match.group("metric")
        body = match.group("matchers")
        if body is None and not expr[match.end() :].lstrip().startswith("["):
            continue
        if metric in _KEYWORDS:
            continue
        matchers: list[tuple[str, str, str]] = []
        if body:
            consumed = 0
            for m in _MATCHER.finditer(body):
                assert m.start() == consumed, f"unparsed matcher text in {body!r}"
                matchers.append((m.group("label"), m.group("op"), m.group("value")))
                consumed = m.end()
            assert consumed == len(body), f"unparsed matcher text in {body!r}"
        found.append(Selector(metric, tuple(matchers)))
    return found


def grouping_labels(expr: str) -> set[str]:
    """Labels named in `by (...)` / `without (...)` clauses."""
    return {
        label.strip()
        for clause in _BY.finditer(expr)
        for label in clause.group("labels").split(",")
        if label.strip()
    }


def ottl_string(literal: str) -> str:
    """The value of an OTTL string literal body (backslash escapes resolved)."""
    return re.sub(r"\\(.)", r"\1", literal)


def host_port(address: str) -> tuple[str, int]:
    """`host:port` or `scheme://host:port/path` split into host and port."""
    rest = address.split("://", 1)[-1].split("/", 1)[0]
    host, _, port = rest.rpartition(":")
    return host, int(port)


def compose_services() -> dict[str, Any]:
    services: dict[str, Any] = load_yaml(COMPOSE)["services"]
    return services


def compose_mounts(service: str) -> dict[str, str]:
    """Bind mounts of a compose service: container path -> host path (relative to STACK)."""
    mounts: dict[str, str] = {}
    for volume in compose_services()[service].get("volumes", []):
        source, target, *_ = volume.split(":")
        if source.startswith("./"):
            mounts[target] = source
    return mounts


def published_ports(service: str) -> dict[int, tuple[str, int]]:
    """Container port -> (host address, host port) for a compose service."""
    published: dict[int, tuple[str, int]] = {}
    for entry in compose_services()[service].get("ports", []):
        address, host, container = str(entry).split(":")
        published[int(container)] = (address, int(host))
    return published
