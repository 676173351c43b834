"""The collector-config stack as the tests see it: its files parsed, and the series each source
of metrics makes from its configuration (`collector_source`, `tempo_source`, `af_otel_source`).

Names are derived from the configuration and from `af_otel.names` (and the GenAI semconv package
for the `gen_ai.*` keys), so a rename on either side breaks the structural tests instead of
drifting silently.
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
from af_otel.semconv.conventions import genai

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

# The operations whose spans are LLM calls: those af_otel mints receipts for.
LLM_OPERATIONS: frozenset[str] = genai.LLM_OPERATIONS
OPERATION = GEN_AI_OPERATION_NAME
MODEL = GEN_AI_REQUEST_MODEL


def prometheus_name(otel_name: str) -> str:
    """Prometheus's classic escaping of an OTel name: every character outside [A-Za-z0-9_] is `_`."""
    return re.sub(r"[^A-Za-z0-9_]", "_", otel_name)


# af_otel's receipt counter as Prometheus names it (a counter gets the _total suffix).
RECEIPTS = prometheus_name(names.METRIC_RECEIPTS) + "_total"
# Labels Prometheus adds to every series it scrapes.
SCRAPE_LABELS = frozenset({"job", "instance"})
# What the span_metrics connector puts on every series besides the configured dimensions.
_CONNECTOR_LABELS = ("service.name", "span.name", "span.kind", "status.code")
_CONNECTOR_NAMESPACE = "traces.span.metrics"  # the connector's default
_UNIT_WORDS = {"s": "seconds", "ms": "milliseconds"}  # the exporter's unit suffixes
# Tempo's metrics-generator names its span-metrics series itself, whatever its configuration,
# and puts these labels on each besides the configured dimensions.
_TEMPO_SERIES = (
    "traces_spanmetrics_calls_total",
    "traces_spanmetrics_latency_bucket",
    "traces_spanmetrics_latency_sum",
    "traces_spanmetrics_latency_count",
    "traces_spanmetrics_size_total",
)
_TEMPO_LABELS = ("service", "span_name", "span_kind", "status_code")


@dataclass(frozen=True, slots=True)
class Source:
    """One source of series in the stack's Prometheus, as its configuration makes it: each metric
    it emits with the labels its series can carry, and the label that names the application."""

    name: str
    series: dict[str, frozenset[str]]
    service_label: str


def _type(component_id: str) -> str:
    return component_id.split("/", 1)[0]


def collector_source() -> Source:
    """The series otelcol.yaml's span_metrics connectors reach Prometheus with: only through a
    metrics pipeline that exports to a prometheus exporter, named by that exporter."""
    config = load_yaml(OTELCOL)
    series: dict[str, frozenset[str]] = {}
    for connector_id, connector in (config.get("connectors") or {}).items():
        if _type(connector_id) != "span_metrics":
            continue
        dimensions = [d["name"] for d in connector.get("dimensions", [])]
        labels = SCRAPE_LABELS | {prometheus_name(n) for n in (*_CONNECTOR_LABELS, *dimensions)}
        namespace = connector.get("namespace", _CONNECTOR_NAMESPACE)
        unit = _UNIT_WORDS[(connector.get("histogram") or {}).get("unit", "ms")]
        duration = f"{prometheus_name(namespace + '.duration')}_{unit}"
        for pipeline in config["service"]["pipelines"].values():
            if connector_id not in pipeline["receivers"]:
                continue
            for exporter_id in pipeline["exporters"]:
                if _type(exporter_id) != "prometheus":
                    continue
                # The naming modelled here: classic escaping plus unit and type suffixes.
                strategy = config["exporters"][exporter_id]["translation_strategy"]
                assert strategy == "UnderscoreEscapingWithSuffixes", strategy
                series[prometheus_name(namespace + ".calls") + "_total"] = labels
                series[duration + "_bucket"] = labels | {"le"}
                series[duration + "_sum"] = series[duration + "_count"] = labels
    return Source("collector", series, prometheus_name("service.name"))


def tempo_source() -> Source:
    """The series tempo.yaml's metrics-generator remote-writes to compose's Prometheus."""
    tempo = load_yaml(TEMPO)
    generator = tempo["metrics_generator"]
    overrides = tempo["overrides"]["defaults"]["metrics_generator"]
    enabled = "span-metrics" in overrides["processors"]
    writes = [host_port(w["url"])[0] for w in generator["storage"].get("remote_write", [])]
    if not enabled or "prometheus" not in writes:
        return Source("tempo", {}, "service")
    dimensions = generator["processor"]["span_metrics"]["dimensions"]
    external = (generator.get("registry") or {}).get("external_labels") or {}
    labels = frozenset({*_TEMPO_LABELS, *external, *map(prometheus_name, dimensions)})
    series = {
        name: labels | ({"le"} if name.endswith("_bucket") else set()) for name in _TEMPO_SERIES
    }
    return Source("tempo", series, "service")


def af_otel_source(exposition: str) -> Source:
    """af_otel's own counters as ``exposition`` (what the real Prometheus exporter served after
    af_otel counted on it) shows them, with the labels a scrape adds."""
    series: dict[str, set[str]] = {}
    for line in exposition.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition("{")
        labels = set(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="', rest.partition("}")[0]))
        series.setdefault(name.split()[0], set()).update(labels)
    series.pop("target_info", None)  # the resource, not a metric af_otel counts on
    return Source("af_otel", {n: frozenset(ls) | SCRAPE_LABELS for n, ls in series.items()}, "job")


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
