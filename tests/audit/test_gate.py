"""``af-otel audit`` as a gate: verify's policy options, judged by the same rules (the reader's
`Gate`) on the generated day in chDB: exit 4 for a rule broken, 1 for damage (which wins), the
same rules broken by the same counts as ``verify`` on the same spans, and ``--json`` ending on
verify's summary object, held to docs/verdict.schema.json."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from af_otel.cli import main
from af_otel.reader.policy import EXIT_DAMAGED, EXIT_POLICY, NAMED
from tests.audit.conftest import Loaded
from tests.audit.day import BLIND_RUN, TAMPERED_RUN

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "verdict.schema.json"

POLICIES = [
    (),
    ("--require", "verified"),
    ("--fail-on", "no-receipt-on-chart"),
    ("--fail-on", "no-receipt-on-chart,no-fold-base,no-run-log", "--max-reconstructed", "5%"),
    ("--require", "reconstructed", "--max-reconstructed", "100"),
]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def summaries(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, copy: str, *policy: str
) -> tuple[int, dict[str, Any], list[dict[str, Any]], int, dict[str, Any]]:
    """The audit of one database of the day and verify of the same spans as a file, both with
    ``--json`` and ``policy``: the audit's exit code, summary and rows, verify's exit code and
    summary. Every summary is checked against the schema."""
    database = {"traces": "default", "tampered": "tampered"}[copy]
    store = str(loaded.day.store)
    code, out, _ = cli(
        capsys, "audit", "--clickhouse", loaded.url, "--database", database, "--store", store,
        "--json", *policy,
    )  # fmt: skip
    *rows, summary = (json.loads(line) for line in out.splitlines())
    path = str(getattr(loaded.day, copy))
    verify_code, verify_out, _ = cli(capsys, "verify", path, "--store", store, "--json", *policy)
    verify_summary = json.loads(verify_out.splitlines()[-1])
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text("utf-8")))
    for checked in (summary, verify_summary):
        validator.validate(checked)
        assert checked["type"] == "summary"
    return code, summary, rows, verify_code, verify_summary


def rules(summary: dict[str, Any]) -> list[tuple[str, str, str, int]]:
    return [(f["rule"], f["value"], f["option"], f["calls"]) for f in summary["failed"]]


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: " ".join(p) or "none")
@pytest.mark.parametrize("copy", ["traces", "tampered"])
def test_audit_and_verify_judge_the_same_spans_alike(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, copy: str, policy: tuple[str, ...]
) -> None:
    """For each policy, on the day and its tampered copy, the audit exits as verify does and
    its summary holds the same counts, policy and rules broken (each with as many calls); it
    names the first few calls of each rule, among the rows and among verify's."""
    code, summary, rows, verify_code, verify_summary = summaries(capsys, loaded, copy, *policy)
    assert code == verify_code == summary["exit"] == verify_summary["exit"]
    same = ("calls", "verified", "reconstructed", "damaged", "store", "policy", "passed")
    assert {k: summary[k] for k in same} == {k: verify_summary[k] for k in same}
    assert rules(summary) == rules(verify_summary)
    assert summary["calls"] == len(rows)
    assert summary["read"] == f"{loaded.url} {'default' if copy == 'traces' else 'tampered'}" + (
        ".otel_traces"
    )
    for failed, verified in zip(summary["failed"], verify_summary["failed"], strict=True):
        assert len(verified["span_ids"]) == verified["calls"]  # verify keeps every call
        assert len(failed["span_ids"]) == min(NAMED, failed["calls"])  # the audit a few
        assert set(failed["span_ids"]) <= set(verified["span_ids"])
        assert set(failed["span_ids"]) <= {row["span_id"] for row in rows}
        assert failed["text"].split(": ", 1)[0] == verified["text"].split(": ", 1)[0]
    if copy == "tampered":
        assert code == EXIT_DAMAGED
        assert summary["failed"][0]["rule"] == "damaged"


def test_require_verified_fails_with_4_where_calls_are_reconstructed(
    capsys: pytest.CaptureFixture[str], loaded: Loaded
) -> None:
    """The day holds reconstructed calls: --require verified exits 4 and names the rule, how many
    calls break it and the first three, after verify's last line; without a policy it is 0."""
    store = str(loaded.day.store)
    base = ["audit", "--clickhouse", loaded.url, "--store", store]
    code, out, _ = cli(capsys, *base)
    assert code == 0
    reconstructed = int(re.findall(r"(\d+) reconstructed, \d+ damaged$", out.strip())[-1])
    assert reconstructed > 0
    code, out, _ = cli(capsys, *base, "--require", "verified")
    assert code == EXIT_POLICY == 4
    *_, last, head, rule = out.strip().splitlines()
    assert f"LLM call(s) in {loaded.url} default.otel_traces: " in last
    assert head == "failed (exit 4):"
    calls = int(last.split(" ", 1)[0])
    assert rule.startswith(
        f"  --require verified: {reconstructed} of {calls} call(s) are not verified: "
    )
    assert rule.count(" epoch ") == min(NAMED, reconstructed)


def test_fail_on_no_receipt_names_the_call_made_without_one(
    capsys: pytest.CaptureFixture[str], loaded: Loaded
) -> None:
    """The day has one call without a receipt: --fail-on no-receipt-on-chart exits 4 naming it;
    a kind no call of the clean day carries passes and says the policy was met."""
    base = ["audit", "--clickhouse", loaded.url, "--store", str(loaded.day.store)]
    code, out, _ = cli(capsys, *base, "--fail-on", "no-receipt-on-chart")
    assert code == EXIT_POLICY
    rule = out.strip().splitlines()[-1]
    assert rule.startswith("  --fail-on no-receipt-on-chart: 1 of ")
    assert rule.endswith(f"call(s) carry no-receipt-on-chart: {BLIND_RUN} epoch 1")
    code, out, _ = cli(capsys, *base, "--fail-on", "no-fold-base")
    assert code == 0
    assert out.strip().splitlines()[-1] == "policy met: --fail-on no-fold-base"


def test_damage_wins_over_the_policy(capsys: pytest.CaptureFixture[str], loaded: Loaded) -> None:
    """The tampered day exits 1 with --require verified and --fail-on too; damage is listed
    first, naming the tampered run, and the rules broken follow."""
    code, out, _ = cli(
        capsys, "audit", "--clickhouse", loaded.url, "--database", "tampered",
        "--store", str(loaded.day.store), "--require", "verified",
        "--fail-on", "no-receipt-on-chart",
    )  # fmt: skip
    assert code == EXIT_DAMAGED
    tail = out.strip().splitlines()[-4:]
    assert tail[0] == "failed (exit 1):"
    assert tail[1].startswith("  damaged: ")
    assert f"{TAMPERED_RUN} epoch " in tail[1]
    assert tail[2].startswith("  --require verified: ")
    assert tail[3].startswith("  --fail-on no-receipt-on-chart: 1 of ")


def test_workers_judge_as_one_process(capsys: pytest.CaptureFixture[str], loaded: Loaded) -> None:
    """Two worker processes give the summary object one process gives, first calls included."""
    args = ("audit", "--clickhouse", loaded.url, "--store", str(loaded.day.store), "--json")
    policy = ("--require", "verified", "--fail-on", "no-receipt-on-chart")
    one = cli(capsys, *args, *policy)
    two = cli(capsys, *args, *policy, "--workers", "2")
    assert one[0] == two[0] == EXIT_POLICY
    assert one[1].splitlines()[-1] == two[1].splitlines()[-1]


def test_the_json_rows_stay_rows_and_the_summary_comes_last(
    capsys: pytest.CaptureFixture[str], loaded: Loaded
) -> None:
    """Every line before the last is a row of the results' fields (no ``type``); the last is the
    summary, the one line with a ``type``; the rules broken go to stderr as text too."""
    code, out, err = cli(
        capsys, "audit", "--clickhouse", loaded.url, "--store", str(loaded.day.store),
        "--json", "--require", "verified",
    )  # fmt: skip
    assert code == EXIT_POLICY
    *rows, summary = (json.loads(line) for line in out.splitlines())
    fields = {"time_ns", "service", "run_id", "lane", "epoch", "trace_id", "span_id", "model"}
    fields |= {"status", "gaps", "reason", "source"}
    assert all(set(row) == fields for row in rows)
    assert summary["type"] == "summary"
    assert summary["failed"][0]["text"] in err
    assert "failed (exit 4):" in err


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--fail-on", "no-such-gap", "unknown gap kind 'no-such-gap'; the known kinds are"),
        ("--max-reconstructed", "120%", "'120%' is not between 0% and 100%"),
        ("--require", "damaged", "invalid choice: 'damaged'"),
    ],
)
def test_a_bad_policy_value_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, option: str, value: str, said: str
) -> None:
    """A bad policy value exits 2 naming the option, as verify's does."""
    with pytest.raises(SystemExit) as raised:
        main(["audit", "--clickhouse", loaded.url, option, value])
    assert raised.value.code == 2
    assert f"argument {option}: {said}" in capsys.readouterr().err


def _policy_help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    start = out.index("  --require")
    end = out.index("reconstructed\n", out.index("  --max-reconstructed")) + len("reconstructed")
    return out[start:end]


def test_help_gives_verify_s_policy_options_and_exit_4(capsys: pytest.CaptureFixture[str]) -> None:
    """``audit --help`` lists the policy options in verify's words, and what exit 4 means."""
    assert _policy_help("audit", capsys) == _policy_help("verify", capsys)
    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "4 verify's policy is not met, or audit's" in out
