"""promtool proves alerts.yaml: the rules load, every rule fires and stays quiet where it should.

promtool comes from Debian's `prometheus` package, which `make test` installs (.ci/system-deps);
a missing promtool fails these tests instead of skipping them. Each rule is also broken on purpose (made to
always fire, then to never fire) to show that its firing case and its quiet case both bind.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from . import stack

PROMTOOL_TIMEOUT_S = 60


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not on PATH (make test installs it: .ci/system-deps)"
    return subprocess.run(
        [promtool, *args],
        capture_output=True,
        text=True,
        timeout=PROMTOOL_TIMEOUT_S,
        check=False,
    )


def _unit_tests() -> dict[str, Any]:
    unit: dict[str, Any] = stack.load_yaml(stack.UNIT_TESTS)
    return unit


def test_rules_load() -> None:
    """promtool check rules accepts alerts.yaml and counts every rule in it."""
    result = _promtool("check", "rules", str(stack.ALERTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(stack.alert_names())} rules found" in result.stdout


def test_prometheus_config_loads_with_the_rules(tmp_path: Path) -> None:
    """promtool check config accepts prometheus.yml once its rule path points at alerts.yaml."""
    config = stack.load_yaml(stack.PROMETHEUS)
    config["rule_files"] = [str(stack.ALERTS)]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = _promtool("check", "config", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_unit_tests_pass() -> None:
    """promtool test rules passes every firing and quiet case in alerts_test.yaml."""
    assert _unit_tests()["rule_files"] == ["../../collector-config/alerts.yaml"]
    result = _promtool("test", "rules", str(stack.UNIT_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


def _cases(alert: str) -> list[dict[str, Any]]:
    return [
        case
        for test in _unit_tests()["tests"]
        for case in test.get("alert_rule_test", [])
        if case["alertname"] == alert
    ]


@pytest.mark.parametrize("alert", stack.alert_names())
def test_every_alert_has_a_firing_and_a_quiet_case(alert: str) -> None:
    """Each rule is tested with series that must fire it and series that must not."""
    cases = _cases(alert)
    assert any(case["exp_alerts"] for case in cases), f"{alert} never expected to fire"
    assert any(not case["exp_alerts"] for case in cases), f"{alert} never expected to stay quiet"


def _only(alert: str, expr: str, directory: Path) -> Path:
    """A rule file holding `alert` alone with `expr`, and the unit tests of that alert alone."""
    (rule,) = [rule for _, rule in stack.alert_rules() if rule["alert"] == alert]
    rules = directory / "rules.yaml"
    rules.write_text(
        yaml.safe_dump({"groups": [{"name": "one", "rules": [{**rule, "expr": expr}]}]}),
        encoding="utf-8",
    )
    unit = _unit_tests()
    unit["rule_files"] = [rules.name]
    unit["tests"] = [
        {**test, "alert_rule_test": cases}
        for test in unit["tests"]
        if (cases := [c for c in test.get("alert_rule_test", []) if c["alertname"] == alert])
    ]
    path = directory / "unit.yaml"
    path.write_text(yaml.safe_dump(unit), encoding="utf-8")
    return path


@pytest.mark.parametrize("alert", stack.alert_names())
def test_breaking_a_rule_fails_its_tests(alert: str, tmp_path: Path) -> None:
    """The rule alone passes its cases; made to always fire or never fire, it fails them."""
    (rule,) = [rule for _, rule in stack.alert_rules() if rule["alert"] == alert]
    intact = _promtool("test", "rules", str(_only(alert, rule["expr"], tmp_path)))
    assert intact.returncode == 0, intact.stdout + intact.stderr
    for broken in ("vector(1)", "vector(1) < 0"):
        result = _promtool("test", "rules", str(_only(alert, broken, tmp_path)))
        assert result.returncode != 0, f"{alert} tests still pass with expr {broken!r}"
        assert "FAILED" in result.stdout + result.stderr
