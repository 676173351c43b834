"""The "af_otel audit" dashboard and alert rule on af-otel audit's results table: their structure
(the provisioned ClickHouse data source, the stack's ClickHouse, the plugin Grafana installs),
and their SQL run for real. A day recorded by the real processor is written into chDB as the
Collector's ClickHouse exporter writes it, audited with ``--results af_audit`` (the clean day,
and its tampered copy in a database of its own), and the panels' and the rule's queries run on
that table after the Grafana ClickHouse plugin's macro expansion (``$__timeFilter(c)`` is ``c >=
toDateTime(from) AND c <= toDateTime(to)``, ``$__timeInterval(c)`` is ``toStartOfInterval(
toDateTime(c), INTERVAL n second)``): the panel counts what the audit counted, and the rule
returns a row (fires) for the damaged call's service and none (no data: OK) on the clean day.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import clickhouse_connect
import pytest

from af_otel.audit.results import RESULT_COLUMNS
from af_otel.cli import main
from tests.audit.day import TAMPERED_RUN, record_day
from tests.audit.exporter import load_table

from . import stack

PLUGIN = "grafana-clickhouse-datasource"
CLICKHOUSE_SOURCES = stack.STACK / "grafana/provisioning/datasources/clickhouse.yaml"
AUDIT_DASHBOARD = stack.STACK / "grafana/dashboards/af-otel-audit.json"
AUDIT_RULES = stack.STACK / "grafana/provisioning/alerting/af-otel-audit.yaml"
RESULTS = "af_audit"
INTERVAL_S = 60


@dataclass(frozen=True, slots=True)
class Audited:
    url: str
    rows: dict[str, list[dict[str, Any]]]  # the audit's --json rows, per database


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Audited:
    """The day and its tampered copy in chDB, each audited once into ``af_audit``."""
    folder = tmp_path_factory.mktemp("audit-grafana")
    day = record_day(folder)
    url = f"chdb://{folder / 'clickhouse'}"
    client = clickhouse_connect.get_client(dsn=url)
    try:
        load_table(client, day.traces)
        load_table(client, day.tampered, database="tampered")
    finally:
        client.close()
    rows: dict[str, list[dict[str, Any]]] = {}
    for database in ("default", "tampered"):
        out = io.StringIO()
        with redirect_stdout(out), redirect_stderr(io.StringIO()):
            main(
                [
                    "audit", "--clickhouse", url, "--database", database, "--store",
                    str(day.store), "--results", RESULTS, "--json",
                ]
            )  # fmt: skip
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        rows[database] = [line for line in lines if line.get("type") is None]
    return Audited(url, rows)


def grafana_sql(raw: str, start: int, end: int, interval_s: int = INTERVAL_S) -> str:
    """``raw`` with the ClickHouse plugin's macros expanded for the range ``start``..``end``."""
    sql = re.sub(
        r"\$__timeFilter\(([^)]+)\)",
        lambda m: f"{m[1]} >= toDateTime({start}) AND {m[1]} <= toDateTime({end})",
        raw,
    )
    sql = re.sub(
        r"\$__timeInterval\(([^)]+)\)",
        lambda m: f"toStartOfInterval(toDateTime({m[1]}), INTERVAL {interval_s} second)",
        sql,
    )
    assert "$__" not in sql, sql  # a macro this test does not expand
    return sql


@pytest.fixture
def query(audited: Audited) -> Iterator[Any]:
    """Run a query on one database's engine, the client closed after the test."""
    clients: list[Any] = []

    def run(sql: str, database: str) -> list[tuple[Any, ...]]:
        client = clickhouse_connect.get_client(dsn=audited.url, database=database)
        clients.append(client)
        return [tuple(row) for row in client.query(sql).result_rows]

    try:
        yield run
    finally:
        for client in clients:
            client.close()


def _panels() -> list[dict[str, Any]]:
    panels: list[dict[str, Any]] = stack.load_json(AUDIT_DASHBOARD)["panels"]
    return panels


def _rule() -> dict[str, Any]:
    (group,) = stack.load_yaml(AUDIT_RULES)["groups"]
    (rule,) = group["rules"]
    return dict(rule)


def _rule_query() -> dict[str, Any]:
    (query,) = [d for d in _rule()["data"] if d["datasourceUid"] != "__expr__"]
    return dict(query)


def _day_range() -> tuple[int, int]:
    now = int(time.time())
    return now - 86_400, now + 1


class TestStructure:
    def test_the_datasource_is_the_stack_clickhouse(self) -> None:
        """The ClickHouse data source talks HTTP to the compose service, whose image is pinned,
        and Grafana installs the plugin it names, pinned to a version."""
        (source,) = stack.load_yaml(CLICKHOUSE_SOURCES)["datasources"]
        assert (source["type"], source["uid"]) == (PLUGIN, "clickhouse")
        assert source["jsonData"]["protocol"] == "http"
        services = stack.compose_services()
        assert source["jsonData"]["host"] == "clickhouse"
        assert services["clickhouse"]["image"].startswith("clickhouse/clickhouse-server:")
        assert stack.published_ports("clickhouse")[source["jsonData"]["port"]][0] == "127.0.0.1"
        env = dict(item.split("=", 1) for item in services["grafana"]["environment"])
        plugin, _, version = env["GF_PLUGINS_PREINSTALL_SYNC"].partition("@")
        assert plugin == PLUGIN
        assert re.fullmatch(r"\d+\.\d+\.\d+", version)
        assert "clickhouse" in services["grafana"]["depends_on"]

    def test_the_collector_fills_the_table_the_audit_reads(self) -> None:
        """Both collector variants export traces to the stack's ClickHouse as otel_traces."""
        for path in (stack.OTELCOL, stack.OTELCOL_REDACT):
            config = stack.load_yaml(path)
            exporter = config["exporters"]["clickhouse"]
            assert stack.host_port(exporter["endpoint"]) == ("clickhouse", 9000)
            assert exporter["traces_table_name"] == "otel_traces"
            assert "clickhouse" in config["service"]["pipelines"]["traces"]["exporters"]

    def test_panels_and_rule_query_the_provisioned_clickhouse(self) -> None:
        """Every panel and target, and the rule's query, name the ClickHouse data source, as SQL
        over the results table."""
        ids = [p["id"] for p in _panels()]
        assert len(set(ids)) == len(ids)
        for panel in _panels():
            assert panel["datasource"] == {"type": PLUGIN, "uid": "clickhouse"}
            for target in panel["targets"]:
                assert target["datasource"] == panel["datasource"]
                assert target["editorType"] == "sql"
                assert f"FROM {RESULTS} FINAL" in target["rawSql"]
        query = _rule_query()
        assert query["datasourceUid"] == "clickhouse"
        assert query["model"]["datasource"]["type"] == PLUGIN
        assert f"FROM {RESULTS} FINAL" in query["model"]["rawSql"]

    def test_the_rule_fires_on_a_row_and_is_quiet_on_none(self) -> None:
        """The rule's condition is a threshold above zero on the query's value; no data is OK."""
        rule = _rule()
        steps = {d["refId"]: d["model"] for d in rule["data"]}
        condition = steps[rule["condition"]]
        assert condition["type"] == "threshold"
        assert condition["conditions"][0]["evaluator"] == {"type": "gt", "params": [0]}
        assert steps[condition["expression"]]["expression"] == _rule_query()["refId"]
        assert rule["noDataState"] == "OK"
        assert rule["execErrState"] == "Error"

    def test_the_docs_name_the_dashboard_and_the_rule(self) -> None:
        """docs/audit.md names the dashboard, the rule and the files they are in."""
        doc = (Path(__file__).parents[2] / "docs" / "audit.md").read_text(encoding="utf-8")
        for name in (
            stack.load_json(AUDIT_DASHBOARD)["title"],
            _rule()["title"],
            AUDIT_DASHBOARD.name,
            AUDIT_RULES.name,
        ):
            assert name in doc, name


class TestQueriesRun:
    @pytest.mark.parametrize("database", ["default", "tampered"])
    def test_the_verdict_panel_counts_what_the_audit_counted(
        self, audited: Audited, query: Any, database: str
    ) -> None:
        """The time series panel's SQL, summed over its intervals, gives the audit's counts."""
        (panel,) = [p for p in _panels() if p["type"] == "timeseries"]
        rows = query(grafana_sql(panel["targets"][0]["rawSql"], *_day_range()), database)
        counted: Counter[str] = Counter()
        for _time, status, calls in rows:
            counted[status] += calls
        expected = Counter(row["status"] for row in audited.rows[database])
        assert counted == expected
        assert sum(expected.values()) > 0

    def test_the_table_panel_lists_the_calls_not_verified(
        self, audited: Audited, query: Any
    ) -> None:
        """The table panel lists every call not verified, the damaged one first."""
        (panel,) = [p for p in _panels() if p["type"] == "table"]
        rows = query(grafana_sql(panel["targets"][0]["rawSql"], *_day_range()), "tampered")
        wanted = [r for r in audited.rows["tampered"] if r["status"] != "verified"]
        assert len(rows) == len(wanted)
        damaged = {r["span_id"] for r in wanted if r["status"] == "damaged"}
        listed = [
            dict(zip(_columns(panel["targets"][0]["rawSql"]), row, strict=True)) for row in rows
        ]
        assert damaged
        assert {row["SpanId"] for row in listed[: len(damaged)]} == damaged
        assert {row["RunId"] for row in listed[: len(damaged)]} == {TAMPERED_RUN}

    def test_the_rule_fires_for_the_damaged_call(self, audited: Audited, query: Any) -> None:
        """On the tampered day's results the rule's query returns the service of the damaged
        calls with their number: the threshold fires, labelled with that service."""
        damaged = Counter(
            r["service"] for r in audited.rows["tampered"] if r["status"] == "damaged"
        )
        assert damaged
        sql = _rule_query()["model"]["rawSql"]
        now = int(time.time())
        rows = query(grafana_sql(sql, now - 3600, now + 1), "tampered")
        assert rows == sorted(damaged.items())

    def test_the_rule_is_quiet_on_a_clean_day(self, audited: Audited, query: Any) -> None:
        """On the clean day's results the rule's query returns no row (no data: OK)."""
        assert audited.rows["default"]
        sql = _rule_query()["model"]["rawSql"]
        now = int(time.time())
        assert query(grafana_sql(sql, now - 3600, now + 1), "default") == []

    def test_the_rule_reads_audits_of_its_hour_only(self, audited: Audited, query: Any) -> None:
        """An audit that ran before the rule's hour does not fire it again."""
        assert audited.rows["tampered"]
        sql = _rule_query()["model"]["rawSql"]
        later = int(time.time()) + 7200
        assert query(grafana_sql(sql, later - 3600, later), "tampered") == []

    def test_the_table_has_the_columns_the_queries_read(self, query: Any, audited: Audited) -> None:
        """The results table the audit created has every column the panels and the rule name."""
        assert audited.rows["default"]
        columns = {row[0] for row in query(f"DESCRIBE TABLE {RESULTS}", "default")}
        assert columns == set(RESULT_COLUMNS)
        for sql in [t["rawSql"] for p in _panels() for t in p["targets"]] + [
            _rule_query()["model"]["rawSql"]
        ]:
            aliases = set(re.findall(r"\bAS (\w+)", sql))
            named = set(re.findall(r"\b[A-Z][A-Za-z]+\b", sql)) - _SQL_WORDS - aliases
            assert named <= columns, named - columns


# Upper-case words of the queries that are SQL, not columns.
_SQL_WORDS = {"SELECT", "FROM", "FINAL", "WHERE", "AND", "GROUP", "BY", "ORDER", "AS", "DESC"}
_SQL_WORDS |= {"LIMIT", "INTERVAL"}


def _columns(sql: str) -> list[str]:
    """The names a ``SELECT a, b AS c, ... FROM`` gives its result columns."""
    select = sql.split("SELECT", 1)[1].split(" FROM ", 1)[0]
    names = []
    for part in re.split(r",\s*(?![^()]*\))", select):
        names.append(part.rsplit(" AS ", 1)[-1].strip())
    return names
