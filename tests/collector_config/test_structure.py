"""Structure of the collector-config stack: the checks that stand in for tools not installable here.

The Collector, Jaeger, Tempo and Grafana ship no package in the registries this project can
reach, so these tests read their configuration the way each of them would: every pipeline
names only defined components, every span-metric dimension is an attribute real af_otel spans
carry, every metric and label an alert or a dashboard query reads is one a source of the stack
emits as configured (`stack.collector_source` and the others), ports and paths agree across
files, and images are pinned. Prometheus itself runs for real in test_promtool and
test_prometheus_e2e.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry, generate_latest
from starlette.testclient import TestClient

from af_otel import names
from af_otel.cli.read import count_verdicts
from af_otel.processor import metrics as receipt_metrics
from af_otel.reader.records import SpanRecord
from af_otel.reader.verify import Verdict, VerdictStatus
from af_otel.store import LocalStore
from af_otel.web import Evidence
from af_otel.web.app import create_app
from af_otel.web.command import DEFAULT_PORT
from tests.builders import end_attributes, make_pipeline, start_attributes, user
from tests.web.recorded import Recorded, record

from . import stack

COLLECTOR_FILES = [stack.OTELCOL, stack.OTELCOL_REDACT]
STRIP = "transform/strip_prompt_content"


def _component_type(component_id: str) -> str:
    return component_id.split("/", 1)[0]


def _af_names() -> list[str]:
    """Every public af_otel attribute, event and gap string."""
    return [
        value
        for key, value in vars(names).items()
        if key.isupper() and isinstance(value, str) and value.startswith("af.")
    ]


def _label_value(value: object) -> str:
    """An attribute value as a span-metrics label value (booleans are lower case)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """The attributes of real LLM-call spans made through ReceiptSpanProcessor, as label values:
    one call with its content on record (``minted``) and one without (``absent``)."""
    pipeline = make_pipeline(LocalStore(tmp_path_factory.mktemp("written") / "store"))
    try:
        for state, content in ((names.STATE_MINTED, True), (names.STATE_ABSENT, False)):
            span = pipeline.tracer.start_span(
                state, kind=SpanKind.CLIENT, attributes=start_attributes()
            )
            if content:
                span.set_attributes(end_attributes([user("hi")]))
            span.end()
        return {
            span.name: {k: _label_value(v) for k, v in (span.attributes or {}).items()}
            for span in pipeline.spans()
        }
    finally:
        pipeline.provider.shutdown()


@pytest.fixture(scope="module")
def exposition() -> str:
    """What the real Prometheus exporter serves once af_otel has counted on it: one receipt per
    state (the processor's counting) and one verdict of each kind (af-otel verify's)."""
    registry = CollectorRegistry()
    provider = MeterProvider(metric_readers=[PrometheusMetricReader(registry=registry)])
    verdicts = [
        Verdict(status, "run", epoch, f"{epoch:016x}", "test")
        for epoch, status in enumerate(VerdictStatus, start=1)
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(metrics, "get_meter_provider", lambda: provider)
        patch.setattr(receipt_metrics, "_counter", None)
        try:
            receipt_metrics.count_receipt(names.STATE_ABSENT, names.REASON_NOT_CAPTURED)
            receipt_metrics.count_receipt(names.STATE_MINTED, None)
            count_verdicts(verdicts, provider)
            return generate_latest(registry).decode()
        finally:
            provider.shutdown()


@pytest.fixture(scope="module")
def sources(exposition: str) -> tuple[stack.Source, ...]:
    """Every source of series in the stack's Prometheus, as configured."""
    return (stack.collector_source(), stack.tempo_source(), stack.af_otel_source(exposition))


def _source_of(sources: tuple[stack.Source, ...], metric: str) -> stack.Source:
    """The one source that emits ``metric``; none or several fails the calling test."""
    (found,) = [source for source in sources if metric in source.series]
    return found


def _check_query(sources: tuple[stack.Source, ...], expr: str) -> set[str]:
    """Every metric ``expr`` reads is emitted by a source, every label it matches is one that
    metric's series carry, and every label it groups by is carried by the metrics it reads.
    Returns the names of the sources it reads."""
    selected = stack.selectors(expr)
    assert selected, expr
    carried: set[str] = set()
    read: set[str] = set()
    for selector in selected:
        source = _source_of(sources, selector.metric)
        labels = source.series[selector.metric]
        assert {label for label, _, _ in selector.matchers} <= labels, (selector, labels)
        carried |= labels
        read.add(source.name)
    assert stack.grouping_labels(expr) <= carried, expr
    return read


# --- the collector ------------------------------------------------------------------------


@pytest.fixture(params=COLLECTOR_FILES, ids=lambda p: p.name)
def otelcol(request: pytest.FixtureRequest) -> dict[str, Any]:
    config: dict[str, Any] = stack.load_yaml(request.param)
    return config


class TestCollector:
    def test_pipelines_name_only_defined_components(self, otelcol: dict[str, Any]) -> None:
        """Each pipeline's receivers, processors and exporters are defined, and nothing defined is unused."""
        defined = {
            kind: set(otelcol.get(kind) or {})
            for kind in ("receivers", "processors", "exporters", "connectors")
        }
        used: set[str] = set()
        for pipeline in otelcol["service"]["pipelines"].values():
            assert set(pipeline["receivers"]) <= defined["receivers"] | defined["connectors"]
            assert set(pipeline.get("processors", [])) <= defined["processors"]
            assert set(pipeline["exporters"]) <= defined["exporters"] | defined["connectors"]
            used |= {
                *pipeline["receivers"],
                *pipeline.get("processors", []),
                *pipeline["exporters"],
            }
        assert set().union(*defined.values()) == used

    def test_connector_bridges_traces_to_metrics(self, otelcol: dict[str, Any]) -> None:
        """span_metrics is an exporter of a traces pipeline and a receiver of a metrics pipeline."""
        pipelines = otelcol["service"]["pipelines"]
        fed_by = [pid for pid, p in pipelines.items() if "span_metrics" in p["exporters"]]
        feeds = [pid for pid, p in pipelines.items() if "span_metrics" in p["receivers"]]
        assert [_component_type(p) for p in fed_by] == ["traces"]
        assert [_component_type(p) for p in feeds] == ["metrics"]

    def test_component_types_are_current_contrib_names(self, otelcol: dict[str, Any]) -> None:
        """No deprecated alias (spanmetrics, otlp/otlphttp exporters) that logs a warning on every start."""
        # The names the contrib Collector renamed, each still accepted with a warning.
        deprecated = {"exporters": {"otlp", "otlphttp"}, "connectors": {"spanmetrics"}}
        for kind, old_names in deprecated.items():
            types = {_component_type(c) for c in otelcol.get(kind) or {}}
            assert types, kind
            assert not types & old_names, (kind, types)

    def test_memory_limiter_first_and_batch_last(self, otelcol: dict[str, Any]) -> None:
        """Every pipeline refuses data before memory runs out and batches only at the end."""
        for pipeline in otelcol["service"]["pipelines"].values():
            assert pipeline["processors"][0] == "memory_limiter"
            assert pipeline["processors"][-1] == "batch"

    def test_receivers_listen_where_compose_publishes(self, otelcol: dict[str, Any]) -> None:
        """OTLP gRPC on 4317 and HTTP on 4318, on every interface, published by compose."""
        protocols = otelcol["receivers"]["otlp"]["protocols"]
        assert stack.host_port(protocols["grpc"]["endpoint"]) == ("0.0.0.0", 4317)
        assert stack.host_port(protocols["http"]["endpoint"]) == ("0.0.0.0", 4318)
        published = stack.published_ports("collector")
        assert {published[4317][1], published[4318][1]} == {4317, 4318}

    def test_span_metrics_dimensions_are_attributes_af_otel_writes(
        self, otelcol: dict[str, Any], written: dict[str, dict[str, str]]
    ) -> None:
        """Every dimension the connector splits by is an attribute real LLM-call spans carry, and
        a dimension's default is the value a call with its receipt carries."""
        dimensions = otelcol["connectors"]["span_metrics"]["dimensions"]
        carried = set().union(*written.values())
        assert {d["name"] for d in dimensions} <= carried
        defaults = {d["name"]: d["default"] for d in dimensions if "default" in d}
        assert defaults
        for name, default in defaults.items():
            assert written[names.STATE_MINTED][name] == default

    def test_transform_derives_the_scalar_from_the_array(self, otelcol: dict[str, Any]) -> None:
        """Where only af.gaps is present, the scalar gap is set from it, before any exporter sees the span."""
        (statement,) = otelcol["processors"]["transform/af_gap_scalar"]["trace_statements"]
        pattern = (
            r'set\(span\.attributes\["(?P<scalar>[^"]+)"\], '
            r'ContainsValue\(span\.attributes\["(?P<array>[^"]+)"\], "(?P<kind>[^"]+)"\)\) '
            r'where span\.attributes\["(?P<scalar2>[^"]+)"\] == nil '
            r'and IsList\(span\.attributes\["(?P<array2>[^"]+)"\]\)'
        )
        match = re.fullmatch(pattern, statement)
        assert match, statement
        assert match["scalar"] == match["scalar2"] == names.GAP_NO_RECEIPT_ON_CHART
        assert match["array"] == match["array2"] == names.GAPS
        assert match["kind"] == names.GAP_NO_RECEIPT
        (traces,) = [p for pid, p in otelcol["service"]["pipelines"].items() if pid == "traces"]
        assert "transform/af_gap_scalar" in traces["processors"]

    def test_file_exporter_appends_json_where_compose_mounts_collector_out(
        self, otelcol: dict[str, Any]
    ) -> None:
        """The reader's file is JSON lines, appended across restarts, in the bind-mounted collector-out/."""
        exporter = otelcol["exporters"]["file/af"]
        assert exporter["append"] is True
        assert exporter.get("format", "json") == "json"
        assert "rotation" not in exporter
        assert "compression" not in exporter
        path = Path(exporter["path"])
        assert path.name == "traces.jsonl"
        assert stack.compose_mounts("collector")[str(path.parent)] == "./collector-out"
        assert "collector-out/" in (stack.STACK / ".gitignore").read_text().splitlines()

    def test_trace_exporters_reach_tempo_and_jaeger(self, otelcol: dict[str, Any]) -> None:
        """OTLP gRPC exporters name compose services on the port each receives OTLP gRPC on."""
        tempo_grpc = stack.load_yaml(stack.TEMPO)["distributor"]["receivers"]["otlp"]["protocols"]
        expected = {
            "otlp_grpc/tempo": ("tempo", stack.host_port(tempo_grpc["grpc"]["endpoint"])[1]),
            # Jaeger v2's all-in-one image listens for OTLP gRPC on 4317 (JAEGER_LISTEN_HOST=0.0.0.0).
            "otlp_grpc/jaeger": ("jaeger", 4317),
        }
        for exporter_id, target in expected.items():
            exporter = otelcol["exporters"][exporter_id]
            assert stack.host_port(exporter["endpoint"]) == target
            assert exporter["tls"]["insecure"] is True
            assert target[0] in stack.compose_services()
        (traces,) = [p for pid, p in otelcol["service"]["pipelines"].items() if pid == "traces"]
        assert {
            "otlp_grpc/tempo",
            "otlp_grpc/jaeger",
            "file/af",
            "clickhouse",
            "span_metrics",
        } == set(traces["exporters"])

    def test_prometheus_exporter_is_what_prometheus_scrapes(self, otelcol: dict[str, Any]) -> None:
        """The metrics endpoint's port is the otel-collector scrape target; names are pinned to classic escaping."""
        exporter = otelcol["exporters"]["prometheus"]
        _, port = stack.host_port(exporter["endpoint"])
        assert exporter["translation_strategy"] == "UnderscoreEscapingWithSuffixes"
        jobs = {job["job_name"]: job for job in stack.load_yaml(stack.PROMETHEUS)["scrape_configs"]}
        targets = jobs["otel-collector"]["static_configs"][0]["targets"]
        assert targets == [f"collector:{port}"]
        assert jobs["otel-collector"]["honor_labels"] is True


class TestRedactVariant:
    def test_is_the_main_config_plus_one_processor(self) -> None:
        """otelcol-redact.yaml differs from otelcol.yaml only by the strip step in the traces pipeline."""
        main = stack.load_yaml(stack.OTELCOL)
        redact = stack.load_yaml(stack.OTELCOL_REDACT)
        assert STRIP in redact["processors"]
        del redact["processors"][STRIP]
        traces = redact["service"]["pipelines"]["traces"]["processors"]
        # Just before batch, so nothing reaches an exporter before it.
        assert traces.index(STRIP) == len(traces) - 2
        traces.remove(STRIP)
        assert redact == main

    def test_strips_on_every_traces_pipeline(self) -> None:
        """No traces pipeline bypasses the strip step."""
        pipelines = stack.load_yaml(stack.OTELCOL_REDACT)["service"]["pipelines"]
        for pipeline_id, pipeline in pipelines.items():
            if _component_type(pipeline_id) == "traces":
                assert STRIP in pipeline["processors"]


def _strip_patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """(span-attribute pattern, event-attribute pattern, event-name condition) of the strip step."""
    groups = stack.load_yaml(stack.OTELCOL_REDACT)["processors"][STRIP]["trace_statements"]
    (span_statement,) = groups[0]["statements"]
    (event_statement,) = groups[1]["statements"]
    assert len(groups) == 3  # the third: LiteLLM's raw span (`_raw_span_pattern`)
    span = re.fullmatch(r'delete_matching_keys\(span\.attributes, "(.+)"\)', span_statement)
    event = re.fullmatch(
        r'delete_matching_keys\(spanevent\.attributes, "(.+)"\) '
        r'where IsMatch\(spanevent\.name, "(.+)"\)',
        event_statement,
    )
    assert span
    assert event
    return (
        re.compile(stack.ottl_string(span[1])),
        re.compile(stack.ottl_string(event[1])),
        re.compile(stack.ottl_string(event[2])),
    )


def _raw_span_pattern() -> tuple[re.Pattern[str], str]:
    """(attribute pattern, span name) of the step that empties LiteLLM's raw_gen_ai_request span."""
    groups = stack.load_yaml(stack.OTELCOL_REDACT)["processors"][STRIP]["trace_statements"]
    (statement,) = groups[2]["statements"]
    found = re.fullmatch(
        r'delete_matching_keys\(span\.attributes, "(.+)"\) where span\.name == "(.+)"', statement
    )
    assert found
    return re.compile(stack.ottl_string(found[1])), found[2]


SPAN_PATTERN, EVENT_PATTERN, EVENT_NAME = _strip_patterns()
RAW_PATTERN, RAW_SPAN = _raw_span_pattern()
# LiteLLM's provider names as its callback writes them in `llm.<provider>.<param>`, and keys of
# the bodies it copies there (request and response alike).
_LITELLM_PROVIDERS = st.sampled_from(["openai", "anthropic", "bedrock", "vertex_ai", "Unknown"])
_BODY_KEYS = st.sampled_from(
    ["messages", "model", "tools", "temperature", "system", "choices", "stringified_raw_response"]
)
_index = st.integers(min_value=0, max_value=999).map(str)
_leaf = st.sampled_from(["content", "role", "tool_calls.0.tool_call.function.arguments", "name"])
CONTENT_KEYS = st.one_of(
    st.sampled_from(
        [
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.definitions",
            "input.value",
            "output.value",
        ]
    ),
    st.builds(lambda i, leaf: f"llm.input_messages.{i}.message.{leaf}", _index, _leaf),
    st.builds(lambda i, leaf: f"llm.output_messages.{i}.message.{leaf}", _index, _leaf),
    st.builds(lambda i: f"llm.tools.{i}.tool.json_schema", _index),
    st.builds(lambda i, leaf: f"gen_ai.prompt.{i}.{leaf}", _index, _leaf),
    st.builds(lambda i, leaf: f"gen_ai.completion.{i}.{leaf}", _index, _leaf),
    # pydantic-ai's own content keys; GenAI tool spans' arguments and results
    st.sampled_from(
        [
            "model_request_parameters",
            "pydantic_ai.all_messages",
            "final_result",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        ]
    ),
    # LiteLLM's tool definitions on its litellm_request span
    st.builds(
        lambda i, leaf: f"llm.request.functions.{i}.{leaf}",
        _index,
        st.sampled_from(["name", "description", "parameters"]),
    ),
)
KEPT_METADATA = [
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "gen_ai.input.messages_ref",
    "llm.invocation_parameters",
    "llm.model_name",
    "input.mime_type",
    "gen_ai.tool.call.id",
    "gen_ai.tool.name",
    "llm.token_count.prompt",
    "llm.provider",
    "agent_name",
    "model_name",
]


class TestStripPatterns:
    @settings(max_examples=150)
    @given(CONTENT_KEYS)
    def test_content_keys_are_deleted(self, key: str) -> None:
        """Prompt and response content of every known instrumentation matches the delete pattern."""
        assert SPAN_PATTERN.fullmatch(key)

    @settings(max_examples=150)
    @given(
        st.one_of(st.sampled_from(_af_names()), st.from_regex(r"af\.[a-z_.]{1,30}", fullmatch=True))
    )
    def test_af_keys_are_kept(self, key: str) -> None:
        """No af.* attribute, and no af.* event or its attributes, is touched."""
        assert not SPAN_PATTERN.search(key)
        assert not EVENT_PATTERN.search(key)
        assert not EVENT_NAME.search(key)

    @pytest.mark.parametrize("key", KEPT_METADATA)
    def test_metadata_is_kept(self, key: str) -> None:
        """Operation, model, token counts and content references survive for dashboards."""
        assert not SPAN_PATTERN.search(key)

    @settings(max_examples=100)
    @given(_LITELLM_PROVIDERS, _BODY_KEYS)
    def test_litellms_raw_request_keys_are_deleted_on_its_raw_span_only(
        self, provider: str, key: str
    ) -> None:
        """Every ``llm.<provider>.<param>`` key of LiteLLM's raw_gen_ai_request span goes; on
        other spans the step does not run (OpenInference's ``llm.token_count.*`` stay)."""
        assert RAW_SPAN == "raw_gen_ai_request"
        assert RAW_PATTERN.fullmatch(f"llm.{provider}.{key}")
        assert not RAW_PATTERN.search("llm.model_name")
        assert not RAW_PATTERN.search("af.run.id")

    def test_commit_events_are_untouched(self) -> None:
        """The event step only applies to gen_ai.* events, never to af.commit."""
        assert not EVENT_NAME.search(names.COMMIT_EVENT)
        assert EVENT_NAME.search("gen_ai.user.message")
        assert EVENT_PATTERN.fullmatch("content")
        assert EVENT_PATTERN.fullmatch("gen_ai.prompt")


# --- Tempo and Prometheus -----------------------------------------------------------------


class TestTempo:
    def test_dimensions_match_the_collector(self) -> None:
        """The metrics-generator splits by the same attributes as the collector's connector, so
        its rules and panels read the same labels."""
        tempo = stack.load_yaml(stack.TEMPO)
        split = tempo["metrics_generator"]["processor"]["span_metrics"]["dimensions"]
        connector = stack.load_yaml(stack.OTELCOL)["connectors"]["span_metrics"]
        assert sorted(split) == sorted(d["name"] for d in connector["dimensions"])

    def test_remote_writes_to_the_prometheus_service(self) -> None:
        """Span metrics go to compose's prometheus, which accepts remote write."""
        tempo = stack.load_yaml(stack.TEMPO)
        (target,) = tempo["metrics_generator"]["storage"]["remote_write"]
        assert stack.host_port(target["url"]) == ("prometheus", 9090)
        assert target["url"].endswith("/api/v1/write")
        command = stack.compose_services()["prometheus"]["command"]
        assert "--web.enable-remote-write-receiver" in command
        assert stack.published_ports("prometheus")[9090] == ("127.0.0.1", 9090)

    def test_query_port_is_the_one_grafana_and_compose_use(self) -> None:
        """Tempo's HTTP port is Grafana's Tempo URL and compose's published port."""
        port = stack.load_yaml(stack.TEMPO)["server"]["http_listen_port"]
        sources = {d["uid"]: d for d in stack.load_yaml(stack.GRAFANA_DATASOURCES)["datasources"]}
        assert stack.host_port(sources["tempo"]["url"]) == ("tempo", port)
        assert stack.published_ports("tempo")[port][1] == port


class TestPrometheusConfig:
    def test_loads_the_rules_compose_mounts(self) -> None:
        """rule_files names the container path where compose mounts alerts.yaml."""
        config = stack.load_yaml(stack.PROMETHEUS)
        mounts = stack.compose_mounts("prometheus")
        assert [mounts[path] for path in config["rule_files"]] == ["./alerts.yaml"]
        assert mounts[stack.compose_services()["prometheus"]["command"][0].split("=", 1)[1]] == (
            "./prometheus.yml"
        )


# --- alert rules --------------------------------------------------------------------------


class TestAlertRules:
    def test_every_alert_reads_series_the_stack_emits(
        self, sources: tuple[stack.Source, ...]
    ) -> None:
        """Each alert reads metrics a source of the stack emits as configured, matches only
        labels their series carry, and groups only by such labels."""
        for _, rule in stack.alert_rules():
            _check_query(sources, rule["expr"])

    def test_each_alert_reads_one_source_split_by_its_service_label(
        self, sources: tuple[stack.Source, ...]
    ) -> None:
        """An alert reads one source and groups by the label that names the application there
        (service_name, service, job); the rules of a group read the same source."""
        by_group: dict[str, set[str]] = {}
        for group, rule in stack.alert_rules():
            metrics_read = {s.metric for s in stack.selectors(rule["expr"])}
            (name,) = {_source_of(sources, metric).name for metric in metrics_read}
            (source,) = [source for source in sources if source.name == name]
            assert source.service_label in stack.grouping_labels(rule["expr"]), rule["alert"]
            by_group.setdefault(group, set()).add(name)
        assert all(len(read) == 1 for read in by_group.values()), by_group

    def test_matcher_values_are_af_otel_values(self) -> None:
        """States, reasons, the gap scalar and LLM operations are matched by their real values."""
        states = {names.STATE_MINTED, names.STATE_ABSENT, names.STATE_ERROR}
        reasons = {v for k, v in vars(names).items() if k.startswith("REASON_")}
        checks = {
            names.METRIC_ATTR_STATE: states,
            names.METRIC_ATTR_REASON: reasons,
            stack.prometheus_name(names.RECEIPT_STATE): states | {""},
            stack.prometheus_name(names.RECEIPT_ABSENT_REASON): reasons,
            stack.prometheus_name(names.GAP_NO_RECEIPT_ON_CHART): {"true"},
            "verdict": {"damaged"},
        }
        seen: set[str] = set()
        for _, rule in stack.alert_rules():
            for selector in stack.selectors(rule["expr"]):
                for label, op, value in selector.matchers:
                    seen.add(label)
                    options = value.split("|") if op in ("=~", "!~") else [value]
                    if label == stack.prometheus_name(stack.OPERATION):
                        assert set(options) == stack.LLM_OPERATIONS
                    else:
                        assert set(options) <= checks[label], (rule["alert"], label, value)
        assert set(checks) <= seen

    def test_every_alert_is_labelled_and_explained(self) -> None:
        """Each alert has a unique name, a severity, its source, a summary and a description."""
        seen = stack.alert_names()
        assert len(seen) == len(set(seen))
        for group, rule in stack.alert_rules():
            assert rule["labels"]["severity"] in {"warning", "critical"}
            assert rule["labels"]["source"] in {"af_otel", "collector", "tempo", "reader"}, group
            assert rule["annotations"]["summary"]
            assert rule["annotations"]["description"]


def test_receipts_counter_is_exposed_under_the_name_the_rules_use(exposition: str) -> None:
    """af_otel's own counting, through the real Prometheus exporter, gives af_otel_receipts_total{state,reason}."""
    assert f"# TYPE {stack.RECEIPTS} counter" in exposition
    samples = [line for line in exposition.splitlines() if line.startswith(stack.RECEIPTS + "{")]
    by_state = {
        _label(line, names.METRIC_ATTR_STATE): _label(line, names.METRIC_ATTR_REASON)
        for line in samples
    }
    assert set(by_state) == {names.STATE_ABSENT, names.STATE_MINTED}
    assert by_state[names.STATE_ABSENT] == names.REASON_NOT_CAPTURED


def test_verdict_values_the_alerts_match_are_counted(
    exposition: str, sources: tuple[stack.Source, ...]
) -> None:
    """af-otel verify's counting, through the real Prometheus exporter, gives the `verdict`
    values the verification alerts match."""
    (verdicts,) = [
        metric
        for metric, labels in _source_of(sources, stack.RECEIPTS).series.items()
        if names.METRIC_ATTR_VERDICT in labels and metric.endswith("_total")
    ]
    samples = [line for line in exposition.splitlines() if line.startswith(verdicts + "{")]
    exposed = {_label(line, names.METRIC_ATTR_VERDICT) for line in samples}
    assert exposed == {status.value for status in VerdictStatus}
    matched = {
        value
        for _, rule in stack.alert_rules()
        for selector in stack.selectors(rule["expr"])
        if selector.metric == verdicts
        for label, _, value in selector.matchers
        if label == names.METRIC_ATTR_VERDICT
    }
    assert matched
    assert matched <= exposed


def test_every_source_reaches_prometheus_with_series() -> None:
    """The collector's connector and Tempo's generator each give Prometheus series as configured
    (an empty source would leave its alerts reading nothing)."""
    assert stack.collector_source().series
    assert stack.tempo_source().series


def _label(sample: str, label: str) -> str:
    match = re.search(rf'[{{,]{label}="([^"]*)"', sample)
    assert match, (label, sample)
    return match[1]


# --- Grafana ------------------------------------------------------------------------------


def _dashboard_panels() -> list[dict[str, Any]]:
    panels: list[dict[str, Any]] = stack.load_json(stack.DASHBOARD)["panels"]
    return [p for p in panels if p["type"] != "row"]


def _targets(datasource_type: str) -> list[dict[str, Any]]:
    return [
        target
        for panel in _dashboard_panels()
        for target in panel.get("targets", [])
        if target["datasource"]["type"] == datasource_type
    ]


class TestGrafana:
    def test_datasources_point_at_compose_services(self) -> None:
        """Prometheus, Tempo and Jaeger data sources use the service names and ports compose runs."""
        sources = {d["uid"]: d for d in stack.load_yaml(stack.GRAFANA_DATASOURCES)["datasources"]}
        assert {uid: d["type"] for uid, d in sources.items()} == {
            "prometheus": "prometheus",
            "tempo": "tempo",
            "jaeger": "jaeger",
        }
        assert stack.host_port(sources["prometheus"]["url"]) == ("prometheus", 9090)
        assert stack.host_port(sources["jaeger"]["url"]) == ("jaeger", 16686)
        assert stack.published_ports("jaeger")[16686][1] == 16686
        assert set(sources) <= set(stack.compose_services())

    def test_provisioning_paths_are_mounted(self) -> None:
        """Compose mounts the provisioning tree and the dashboard folder the provider reads."""
        mounts = stack.compose_mounts("grafana")
        assert mounts["/etc/grafana/provisioning"] == "./grafana/provisioning"
        (provider,) = stack.load_yaml(stack.GRAFANA_PROVIDERS)["providers"]
        assert mounts[provider["options"]["path"]] == "./grafana/dashboards"

    def test_panels_use_provisioned_datasources(self) -> None:
        """Every panel and query names a provisioned data source by uid and type."""
        sources = {
            (d["type"], d["uid"]) for d in stack.load_yaml(stack.GRAFANA_DATASOURCES)["datasources"]
        }
        panels = _dashboard_panels()
        assert len({p["id"] for p in panels}) == len(panels)
        for panel in panels:
            assert (panel["datasource"]["type"], panel["datasource"]["uid"]) in sources
            for target in panel["targets"]:
                assert (target["datasource"]["type"], target["datasource"]["uid"]) in sources

    def test_every_query_reads_series_the_stack_emits(
        self, sources: tuple[stack.Source, ...]
    ) -> None:
        """Each Prometheus query of the dashboard reads metrics a source emits as configured, with
        labels their series carry, and matches LLM operations by af_otel's own list."""
        for target in _targets("prometheus"):
            _check_query(sources, target["expr"])
            for selector in stack.selectors(target["expr"]):
                for label, _, value in selector.matchers:
                    if label == stack.prometheus_name(stack.OPERATION):
                        assert set(value.split("|")) == stack.LLM_OPERATIONS

    def test_the_dashboard_charts_what_the_alerts_read(self) -> None:
        """Every metric an alert reads has a panel, and no panel charts a metric no alert reads."""
        alerted = {s.metric for _, r in stack.alert_rules() for s in stack.selectors(r["expr"])}
        charted = {s.metric for t in _targets("prometheus") for s in stack.selectors(t["expr"])}
        assert charted == alerted

    def test_minted_versus_absent_by_service_and_model(self) -> None:
        """A panel splits LLM calls by receipt state, service and model."""
        wanted = {
            "service_name",
            stack.prometheus_name(names.RECEIPT_STATE),
            stack.prometheus_name(stack.MODEL),
        }
        assert any(wanted <= stack.grouping_labels(t["expr"]) for t in _targets("prometheus"))

    def test_traceql_tables_find_spans_without_receipts(self) -> None:
        """TraceQL tables query the gap array and LLM spans missing af.receipt.state, by af_otel's names."""
        queries = {t["query"] for t in _targets("tempo")}
        assert all(t["queryType"] == "traceql" for t in _targets("tempo"))
        gap = f'{{ span.{names.GAPS} = "{names.GAP_NO_RECEIPT}" }}'
        unseen = f'{{ span.{stack.OPERATION} = "chat" && span.{names.RECEIPT_STATE} = nil }}'
        assert any(q.startswith(gap) for q in queries)
        assert unseen in queries


# --- docker compose -----------------------------------------------------------------------


class TestCompose:
    def test_runs_the_services_on_pinned_images(self) -> None:
        """Collector, Jaeger, Tempo, Prometheus, Grafana, ClickHouse and af-otel serve each run an
        image pinned to a release."""
        services = stack.compose_services()
        assert set(services) == {
            "collector",
            "jaeger",
            "tempo",
            "prometheus",
            "grafana",
            "af-otel",
            "clickhouse",
        }
        for name, service in services.items():
            image = service["image"]
            # ClickHouse numbers its releases in four parts (25.8.18.1).
            assert re.fullmatch(
                r"[a-z0-9./-]+:v?\d+\.\d+\.\d+(\.\d+)?(@sha256:[0-9a-f]{64})?", image
            ), name
        assert services["collector"]["image"].startswith("otel/opentelemetry-collector-contrib:")

    def test_bind_mounts_exist(self) -> None:
        """Every file or folder compose mounts is in collector-config/ (collector-out/ is the output)."""
        for service in stack.compose_services():
            for source in stack.compose_mounts(service).values():
                if source != "./collector-out":
                    assert (stack.STACK / source).exists(), (service, source)

    def test_host_ports_are_unique_and_local(self) -> None:
        """No two services publish the same host port, and every port is on 127.0.0.1."""
        published = [p for s in stack.compose_services() for p in stack.published_ports(s).values()]
        assert len({port for _, port in published}) == len(published)
        assert {address for address, _ in published} == {"127.0.0.1"}

    def test_collector_runs_a_mounted_variant(self) -> None:
        """The collector's --config names a mounted file, otelcol.yaml unless OTELCOL_CONFIG says otherwise."""
        (argument,) = stack.compose_services()["collector"]["command"]
        match = re.fullmatch(
            r"--config=(/etc/otelcol)/\$\{OTELCOL_CONFIG:-(otelcol\.yaml)\}", argument
        )
        assert match
        mounts = stack.compose_mounts("collector")
        for variant in COLLECTOR_FILES:
            assert mounts[f"{match[1]}/{variant.name}"] == f"./{variant.name}"
        assert match[2] == stack.OTELCOL.name


# --- documentation ------------------------------------------------------------------------


class TestDocs:
    def test_alerting_doc_explains_every_alert(self, sources: tuple[stack.Source, ...]) -> None:
        """docs/alerting.md names every alert in alerts.yaml, every metric they read and the
        label that names the application in each."""
        text = (stack.ROOT / "docs/alerting.md").read_text(encoding="utf-8")
        for alert in stack.alert_names():
            assert alert in text
        for _, rule in stack.alert_rules():
            for selector in stack.selectors(rule["expr"]):
                assert selector.metric in text
                assert _source_of(sources, selector.metric).service_label in text

    def test_viewing_doc_gives_the_queries_by_af_names(self) -> None:
        """docs/viewing.md shows the Jaeger tag, the TraceQL queries and the reader command."""
        text = (stack.ROOT / "docs/viewing.md").read_text(encoding="utf-8")
        assert f'{{ span.{names.GAPS} = "{names.GAP_NO_RECEIPT}" }}' in text
        assert f'{{ span.{stack.OPERATION} = "chat" && span.{names.RECEIPT_STATE} = nil }}' in text
        assert f"{names.GAP_NO_RECEIPT_ON_CHART}=true" in text
        assert "af-otel verify collector-out/traces.jsonl --store" in text

    def test_readme_shows_the_wrapping_change(self) -> None:
        """The README's stack section wraps an existing processor in one line."""
        text = (stack.ROOT / "README.md").read_text(encoding="utf-8")
        line = (
            "provider.add_span_processor("
            "af_otel.ReceiptSpanProcessor(BatchSpanProcessor(OTLPSpanExporter())))"
        )
        assert line in text
        assert "collector-config/" in text


# --- links from the UIs to af-otel serve ----------------------------------------------------


def _grafana_correlations() -> list[dict[str, Any]]:
    sources = {d["uid"]: d for d in stack.load_yaml(stack.GRAFANA_DATASOURCES)["datasources"]}
    correlations: list[dict[str, Any]] = sources["tempo"]["correlations"]
    return correlations


def _grafana_provisioned(text: str) -> str:
    """A provisioning value as Grafana reads it: ``$$`` is a literal ``$``; a lone ``$NAME``
    would be read from the environment, which these links must not depend on."""
    assert not re.search(r"(?<!\$)\$(?!\$)", text.replace("$$", "")), text
    return text.replace("$$", "$")


def _grafana_tags(span: SpanRecord) -> str:
    """The span's attributes as Grafana's trace view holds them (a list of key/value objects),
    serialized as its regex transformation reads an object field."""
    pairs = [{"key": k, "value": v} for k, v in span.attributes.items()]
    return json.dumps(pairs, separators=(",", ":"), default=list)


def _jaeger_encoded(value: object) -> str:
    """JavaScript's encodeURIComponent, which Jaeger UI applies to each template value."""
    return quote(str(value), safe="-_.!~*'()")


def _jaeger_render(template: str, span: SpanRecord) -> str | None:
    """A link pattern's URL for ``span`` as Jaeger UI renders it, or None where a parameter is
    missing (Jaeger then shows no link)."""
    values: dict[str, object] = {**span.attributes, "trace.traceID": span.trace_id.lstrip("0")}
    names_used = re.findall(r"#\{([^}|]+)\}", template)
    if any(n.strip() not in values for n in names_used):
        return None
    return re.sub(r"#\{([^}|]+)\}", lambda m: _jaeger_encoded(values[m[1].strip()]), template)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[Recorded, TestClient]:
    recorded = record(tmp_path_factory.mktemp("links"))
    evidence = Evidence(file=recorded.traces, store=str(recorded.store))
    return recorded, TestClient(create_app(evidence))


def _serve_base() -> str:
    (port,) = stack.published_ports("af-otel")
    return f"http://127.0.0.1:{stack.published_ports('af-otel')[port][1]}"


def _local(url: str) -> str:
    base = _serve_base()
    assert url.startswith(base + "/"), url
    return url[len(base) :]


class TestLinks:
    def test_grafana_span_link_opens_each_llm_call(
        self, served: tuple[Recorded, TestClient]
    ) -> None:
        """The Tempo data source's correlation, rendered with a real span's ids and attributes
        as Grafana would, is a URL af-otel serve answers with that span's epoch; a span without
        af.receipt.state leaves the link's variable undefined, so Grafana shows no link."""
        recorded, client = served
        (link,) = _grafana_correlations()
        assert link["type"] == "external"
        config = link["config"]
        assert config["field"] == "traceID"
        url = _grafana_provisioned(config["target"]["url"])
        (transformation,) = config["transformations"]
        assert transformation["type"] == "regex"
        assert transformation["field"] == "tags"
        pattern = re.compile(transformation["expression"], re.IGNORECASE)
        rendered = 0
        for span in recorded.spans:
            found = pattern.search(_grafana_tags(span))
            if names.RECEIPT_STATE not in span.attributes:
                assert found is None, span.name
                continue
            assert found is not None
            assert found[1] == span.attributes[names.RECEIPT_STATE]
            values = {
                "traceID": span.trace_id,
                "spanID": span.span_id,
                transformation["mapValue"]: found[1],
            }
            target = re.sub(r"\$\{(\w+)\}", lambda m, v=values: str(v[m[1]]), url)
            response = client.get(_local(target))
            assert response.status_code == 200, target
            view = next(v for v in recorded.views if v.span_id == span.span_id)
            assert f'data-epoch="{view.epoch}"' in response.text
            rendered += 1
        assert rendered == len(recorded.views)

    def test_jaeger_link_patterns_open_each_epoch(
        self, served: tuple[Recorded, TestClient]
    ) -> None:
        """Each link pattern on af.run.id and af.epoch, rendered with a real span's attributes
        and Jaeger's shortened trace id, is a URL af-otel serve answers with that epoch."""
        recorded, client = served
        patterns = stack.load_json(stack.JAEGER_UI)["linkPatterns"]
        assert {(p["type"], p["key"]) for p in patterns} == {
            ("tags", names.RUN_ID),
            ("tags", names.EPOCH),
        }
        for pattern in patterns:
            opened = 0
            for span in recorded.spans:
                # A run's close record names a run and no epoch: Jaeger shows no link whose
                # template it cannot fill.
                if pattern["key"] not in span.attributes or span.name == names.RUN_CLOSE:
                    continue
                target = _jaeger_render(pattern["url"], span)
                assert target is not None
                response = client.get(_local(target))
                assert response.status_code == 200, target
                assert f'data-epoch="{span.attributes[names.EPOCH]}"' in response.text
                assert f"trace <code>{span.trace_id}</code>" in response.text
                assert _jaeger_render(pattern["text"], span)
                opened += 1
            assert opened == len(recorded.views)

    def test_jaeger_loads_the_ui_config_compose_mounts(self) -> None:
        """Jaeger runs the mounted config, whose query service reads the mounted UI file and
        listens where the collector and Grafana reach it."""
        config = stack.load_yaml(stack.JAEGER)
        mounts = stack.compose_mounts("jaeger")
        (argument,) = stack.compose_services()["jaeger"]["command"]
        assert mounts[argument.split("=", 1)[1]] == "./" + stack.JAEGER.name
        query = config["extensions"]["jaeger_query"]
        assert mounts[query["ui"]["config_file"]] == "./" + stack.JAEGER_UI.name
        assert stack.host_port(query["http"]["endpoint"]) == ("0.0.0.0", 16686)
        assert stack.host_port(config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]) == (
            "0.0.0.0",
            4317,
        )
        storage = query["storage"]["traces"]
        assert storage in config["extensions"]["jaeger_storage"]["backends"]
        (pipeline,) = config["service"]["pipelines"].values()
        assert set(pipeline["receivers"]) <= set(config["receivers"])
        assert set(pipeline["processors"]) <= set(config["processors"])
        assert set(pipeline["exporters"]) <= set(config["exporters"])
        assert config["exporters"]["jaeger_storage_exporter"]["trace_storage"] == storage
        assert set(config["service"]["extensions"]) == set(config["extensions"])

    def test_serve_runs_where_the_links_point(self) -> None:
        """af-otel serve fetches from compose's Tempo and listens on the port both links use,
        published on loopback only."""
        command = " ".join(stack.compose_services()["af-otel"]["command"])
        tempo_port = stack.load_yaml(stack.TEMPO)["server"]["http_listen_port"]
        assert f"--tempo http://tempo:{tempo_port}" in command
        (port,) = stack.published_ports("af-otel")
        assert f"--port {port}" in command
        assert port == DEFAULT_PORT
        assert stack.published_ports("af-otel")[port] == ("127.0.0.1", port)
        base = _serve_base()
        assert _grafana_provisioned(
            _grafana_correlations()[0]["config"]["target"]["url"]
        ).startswith(base + "/traces/")
        for pattern in stack.load_json(stack.JAEGER_UI)["linkPatterns"]:
            assert pattern["url"].startswith(base + "/runs/")
        assert "/store" in stack.compose_services()["af-otel"]["volumes"][1]


def test_viewing_doc_shows_the_click_path() -> None:
    """docs/viewing.md says how a span link reaches af-otel serve in Grafana and in Jaeger."""
    text = (stack.ROOT / "docs/viewing.md").read_text(encoding="utf-8")
    for needle in ("af-otel serve", "/traces/", "/runs/", "AF_OTEL_STORE_DIR", "jaeger-ui.json"):
        assert needle in text
