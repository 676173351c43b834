"""A real Prometheus scrapes a traced program's af_otel.receipts and evaluates alerts.yaml.

The program (receipts_program.py) makes LLM-call spans through the real
af_otel.ReceiptSpanProcessor and serves the counter it keeps through
opentelemetry-exporter-prometheus. The test starts Prometheus on a free 127.0.0.1 port with
its own data directory, a 1 s scrape and evaluation interval, and alerts.yaml with every
`for:` rewritten to 0s (the only change: the expressions are the shipped ones). LLM calls
without a receipt must fire AfOtelLLMCallsWithoutReceipt, read back from the HTTP API; calls
that all carry a receipt must leave every alert quiet. Waits are bounded; both processes are
stopped in teardown.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from af_otel import names

from . import stack

PROGRAM = Path(__file__).with_name("receipts_program.py")
JOB = "af-otel-e2e"
ALERT = "AfOtelLLMCallsWithoutReceipt"
START_TIMEOUT_S = 30.0
ALERT_TIMEOUT_S = 60.0
POLL_S = 0.25


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    if process.stdout is not None:
        process.stdout.close()


def fast_rules(directory: Path) -> Path:
    """alerts.yaml with every `for:` set to 0s, so an alert fires on its first true evaluation."""
    rules = stack.load_yaml(stack.ALERTS)
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "0s"
    path = directory / "alerts-for-0s.yaml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False), encoding="utf-8")
    return path


@dataclass(frozen=True, slots=True)
class Prometheus:
    """A running Prometheus and the HTTP API it answers on."""

    url: str

    def api(self, path: str, **params: str) -> Any:
        response = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=5.0)
        response.raise_for_status()
        body = response.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("query", query=expr)["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return alerts

    def ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/-/ready", timeout=2.0).status_code == 200
        except httpx.TransportError:
            return False


def _start_program(directory: Path, mode: str) -> tuple[subprocess.Popen[str], int]:
    log_path = directory / "program.log"
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [sys.executable, str(PROGRAM), mode, "--store", str(directory / "store")],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    assert process.stdout is not None
    line = process.stdout.readline()  # the program prints its port before anything else
    if not line.startswith("port "):
        _stop(process)
        pytest.fail(f"program did not start: {line!r}\n{log_path.read_text(encoding='utf-8')}")
    return process, int(line.split()[1])


def _start_prometheus(
    directory: Path, target_port: int
) -> tuple[subprocess.Popen[str], Prometheus]:
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not on PATH (make test installs it: .ci/system-deps)"
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(fast_rules(directory))],
        "scrape_configs": [
            {"job_name": JOB, "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}]}
        ],
    }
    config_path = directory / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    port = _free_port()
    with (directory / "prometheus.log").open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config_path}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    return process, Prometheus(f"http://127.0.0.1:{port}")


@dataclass(frozen=True, slots=True)
class Scraped:
    """The traced program and the Prometheus scraping it."""

    prometheus: Prometheus
    program: subprocess.Popen[str]
    program_log: Path

    def wait_for(self, what: str, probe: Callable[[], Any], timeout_s: float) -> Any:
        """The first truthy probe(), polled up to timeout_s; fails early if the program exits."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            if self.program.poll() is not None:
                log = self.program_log.read_text(encoding="utf-8")
                pytest.fail(f"the traced program exited while waiting for {what}:\n{log}")
            last = probe()
            if last:
                return last
            time.sleep(POLL_S)
        pytest.fail(f"gave up after {timeout_s:.0f}s waiting for {what}; last answer: {last!r}")


@pytest.fixture
def scraped(tmp_path: Path) -> Iterator[Callable[[str], Scraped]]:
    """Start the program in a mode and a Prometheus scraping it; stop both afterwards."""
    processes: list[subprocess.Popen[str]] = []

    def start(mode: str) -> Scraped:
        program, port = _start_program(tmp_path, mode)
        processes.append(program)
        server, prometheus = _start_prometheus(tmp_path, port)
        processes.append(server)
        run = Scraped(prometheus, program, tmp_path / "program.log")
        run.wait_for("Prometheus to be ready", prometheus.ready, START_TIMEOUT_S)
        return run

    yield start
    for process in reversed(processes):
        _stop(process)


def test_llm_calls_without_receipt_fire_the_alert(scraped: Callable[[str], Scraped]) -> None:
    """Calls whose content was not captured fire AfOtelLLMCallsWithoutReceipt for the program's job."""
    run = scraped("without-receipt")
    prometheus = run.prometheus

    def firing() -> list[dict[str, Any]]:
        return [
            alert
            for alert in prometheus.alerts()
            if alert["labels"]["alertname"] == ALERT and alert["state"] == "firing"
        ]

    (alert,) = run.wait_for(f"{ALERT} to fire", firing, ALERT_TIMEOUT_S)
    assert alert["labels"]["job"] == JOB
    assert alert["labels"][names.METRIC_ATTR_REASON] == names.REASON_NOT_CAPTURED
    assert alert["labels"]["source"] == "af_otel"
    assert float(alert["value"]) > 0
    assert alert["annotations"]["summary"] == (
        f"LLM calls without an af_otel receipt in {JOB} ({names.REASON_NOT_CAPTURED})"
    )
    series = prometheus.query(f'ALERTS{{alertname="{ALERT}", alertstate="firing"}}')
    assert [s["metric"]["job"] for s in series] == [JOB]


def test_calls_that_all_have_a_receipt_leave_every_alert_quiet(
    scraped: Callable[[str], Scraped],
) -> None:
    """Once minted receipts visibly increase and the rules have run on them, no alert is pending or firing."""
    run = scraped("with-receipt")
    prometheus = run.prometheus
    minted = f'increase({stack.RECEIPTS}{{state="{names.STATE_MINTED}"}}[1m]) > 0'
    run.wait_for("minted receipts to increase", lambda: prometheus.query(minted), ALERT_TIMEOUT_S)
    evaluations: set[str] = set()

    def evaluated_twice_since() -> bool:
        groups = prometheus.api("rules")["groups"]
        (group,) = [g for g in groups if g["name"] == "af-otel-receipts"]
        assert all(rule["health"] == "ok" for rule in group["rules"]), group
        evaluations.add(group["lastEvaluation"])
        return len(evaluations) >= 3  # the evaluation in progress, then two that saw the data

    run.wait_for("the rules to run on the increase", evaluated_twice_since, ALERT_TIMEOUT_S)
    assert prometheus.query(minted), "minted receipts stopped increasing"
    assert prometheus.query(f'{stack.RECEIPTS}{{state!="{names.STATE_MINTED}"}}') == []
    assert prometheus.alerts() == []
    assert run.program.poll() is None, "the traced program stopped"
