"""``af-otel verify`` as a gate: the policy options on the demo's real trace and store (exit 4 for a
rule broken, 1 for damage, which wins), and ``--json`` lines held to docs/verdict.schema.json and
to the tables of docs/reader.md."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from af_otel import names
from af_otel.cli import main
from af_otel.reader import SERVED_GAPS
from af_otel.reader.policy import EXIT_DAMAGED, EXIT_POLICY
from af_otel.reader.verdict_json import SCHEMA

ROOT = Path(__file__).resolve().parent.parent.parent
SCHEMA_FILE = ROOT / "docs" / "verdict.schema.json"
DOCS = ROOT / "docs" / "reader.md"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What ``af-otel demo`` writes with the wire tap off (``AF_OTEL_WIRE=off``): five calls with
    receipts from genai-openai's record, reconstructed (it does not record the tool settings),
    one without a receipt, a tampered copy. With the tap on every call verifies, which leaves
    the policies nothing to refuse (tests/e2e/test_emit_demo.py)."""
    out = tmp_path_factory.mktemp("demo") / "af-otel-demo"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AF_OTEL_WIRE", "off")
        assert main(["demo", "--out", str(out)]) == 0
    return out


@pytest.fixture
def copy(demo: Path, tmp_path: Path) -> Path:
    """A copy of the demo's folder the test may change."""
    return Path(shutil.copytree(demo, tmp_path / "af-otel-demo"))


def verify(
    capsys: pytest.CaptureFixture[str], folder: Path, *args: str, traces: str = "traces.jsonl"
) -> tuple[int, str, str]:
    code = main(["verify", str(folder / traces), "--store", str(folder / "store"), *args])
    out, err = capsys.readouterr()
    return code, out, err


def spans(traces: Path) -> Iterator[dict[str, Any]]:
    for line in traces.read_text(encoding="utf-8").splitlines():
        for resource in json.loads(line).get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    yield {**span, "scope": scope.get("scope", {})}


def attribute(span: dict[str, Any], key: str) -> Any:
    for item in span.get("attributes", []):
        if item["key"] == key:
            return next(iter(item["value"].values()))
    return None


# -- the policy ----------------------------------------------------------------------------------


def test_without_a_policy_the_demo_passes_though_nothing_is_verified(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    """Today's gate: six reconstructed calls (one without a receipt) exit 0 and say nothing more."""
    code, out, _ = verify(capsys, demo)
    assert code == 0
    assert out.strip().endswith("0 verified, 6 reconstructed, 0 damaged")


def test_require_verified_fails_with_4_naming_the_rule_and_the_calls(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    """No demo call is verified: exit 4, the rule, how many calls break it and the first three."""
    code, out, _ = verify(capsys, demo, "--require", "verified")
    assert code == EXIT_POLICY == 4
    tail = out.strip().splitlines()[-2:]
    assert tail == [
        "failed (exit 4):",
        "  --require verified: 6 of 6 call(s) are not verified: demo-run-1 epoch 1, "
        "demo-run-1 epoch 2, demo-run-1 epoch 3, and 3 more",
    ]


def test_fail_on_no_receipt_finds_the_call_made_without_a_receipt(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    """The demo's sixth call carries no receipt: --fail-on no-receipt-on-chart fails on it alone;
    a kind no call carries passes and says the policy was met."""
    code, out, _ = verify(capsys, demo, "--fail-on", names.GAP_NO_RECEIPT)
    assert code == EXIT_POLICY
    assert out.strip().splitlines()[-1] == (
        "  --fail-on no-receipt-on-chart: 1 of 6 call(s) carry no-receipt-on-chart: "
        "demo-run-2 epoch 1"
    )
    code, out, _ = verify(capsys, demo, "--fail-on", f"{names.GAP_NO_FOLD_BASE},no-run-log")
    assert code == 0
    assert out.strip().splitlines()[-1] == "policy met: --fail-on no-fold-base --fail-on no-run-log"


def test_a_store_that_lost_the_base_passes_by_default_and_fails_the_policy(
    capsys: pytest.CaptureFixture[str], copy: Path
) -> None:
    """Deleting the run's base makes its calls reconstructed under no-fold-base: exit 0 without
    a policy, 4 with --fail-on no-fold-base or a share of reconstructed calls too small."""
    traces = copy / "traces.jsonl"
    base = next(attribute(s, names.RUN_BASE) for s in spans(traces) if attribute(s, names.RUN_BASE))
    algorithm, digest = base.split(":")
    blob = copy / "store" / algorithm / digest[:2] / digest[2:]
    assert blob.is_file()
    blob.unlink()
    code, out, _ = verify(capsys, copy)
    assert code == 0
    assert out.count("no-fold-base") == 5
    code, out, _ = verify(capsys, copy, "--fail-on", "no-fold-base", "--max-reconstructed", "50%")
    assert code == EXIT_POLICY
    lines = out.strip().splitlines()
    assert lines[-3:] == [
        "failed (exit 4):",
        "  --fail-on no-fold-base: 5 of 6 call(s) carry no-fold-base: demo-run-1 epoch 1, "
        "demo-run-1 epoch 2, demo-run-1 epoch 3, and 2 more",
        "  --max-reconstructed 50%: 6 of 6 call(s) are reconstructed (100%), more than 50%: "
        "demo-run-1 epoch 1, demo-run-1 epoch 2, demo-run-1 epoch 3, and 3 more",
    ]
    assert verify(capsys, copy, "--max-reconstructed", "100")[0] == 0


def test_damage_wins_over_a_broken_policy(capsys: pytest.CaptureFixture[str], demo: Path) -> None:
    """The tampered copy exits 1 with --require verified too; damage is listed first."""
    code, out, _ = verify(capsys, demo, "--require", "verified", traces="tampered.jsonl")
    assert code == EXIT_DAMAGED
    tail = out.strip().splitlines()[-3:]
    assert tail[0] == "failed (exit 1):"
    assert tail[1] == (
        "  damaged: 3 of 6 call(s) are damaged: demo-run-1 epoch 3, demo-run-1 epoch 4, "
        "demo-run-1 epoch 5"
    )
    assert tail[2].startswith("  --require verified: 6 of 6 call(s) are not verified")


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--fail-on", "no-such-gap", "unknown gap kind 'no-such-gap'; the known kinds are"),
        ("--fail-on", "no-fold-base,", "unknown gap kind ''"),
        ("--max-reconstructed", "lots", "'lots' is not a percentage"),
        ("--max-reconstructed", "120%", "'120%' is not between 0% and 100%"),
        ("--require", "damaged", "invalid choice: 'damaged'"),
    ],
)
def test_a_bad_policy_value_is_a_usage_error_naming_the_option(
    capsys: pytest.CaptureFixture[str], demo: Path, option: str, value: str, said: str
) -> None:
    """An unknown kind, a share that is not one, a verdict no gate can require: exit 2, naming
    the option (and, for a kind, every known kind)."""
    with pytest.raises(SystemExit) as raised:
        verify(capsys, demo, option, value)
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: {said}" in err
    if said.startswith("unknown gap kind"):
        assert all(kind in err for kind in SERVED_GAPS)


def test_help_lists_exit_4(capsys: pytest.CaptureFixture[str]) -> None:
    """``verify --help`` lists the policy options and what exit 4 means."""
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for option in ("--require", "--fail-on KIND,...", "--max-reconstructed N%"):
        assert option in out
    assert "4 verify's policy is not met" in out


# -- --json --------------------------------------------------------------------------------------


def schema() -> dict[str, Any]:
    value: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return value


def json_lines(out: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in out.splitlines()]
    validator = jsonschema.Draft202012Validator(schema())
    for line in lines:
        validator.validate(line)
    return lines


@pytest.mark.parametrize(
    ("traces", "args", "code"),
    [
        ("traces.jsonl", (), 0),
        (
            "traces.jsonl",
            ("--fail-on", "no-receipt-on-chart,no-fold-base", "--max-reconstructed", "12.5"),
            4,
        ),
        ("tampered.jsonl", ("--require", "verified"), 1),
    ],
)
def test_json_lines_follow_the_schema_and_end_with_the_summary(
    capsys: pytest.CaptureFixture[str], demo: Path, traces: str, args: tuple[str, ...], code: int
) -> None:
    """Every line validates against docs/verdict.schema.json: one verdict per call, calls
    without a receipt included, then one summary whose counts, rules and exit match the run;
    stdout holds nothing else (the store line and the rules broken go to stderr)."""
    got, out, err = verify(capsys, demo, "--json", *args, traces=traces)
    assert got == code
    lines = json_lines(out)
    *verdicts, summary = lines
    assert [line["type"] for line in verdicts] == ["verdict"] * 6
    assert summary["type"] == "summary"
    assert all(line["schema"] == SCHEMA == "af-verdict/1" for line in lines)
    assert summary["calls"] == len(verdicts)
    for status in ("verified", "reconstructed", "damaged"):
        assert summary[status] == sum(v["status"] == status for v in verdicts)
    assert summary["exit"] == code
    assert summary["passed"] == (code == 0)
    assert summary["read"] == str(demo / traces)
    policy = summary["policy"]
    if "--fail-on" in args:  # the catalogue's order, whatever the option's
        assert policy == {
            "require": "reconstructed",
            "fail_on": ["no-fold-base", "no-receipt-on-chart"],
            "max_reconstructed": 12.5,
        }
        assert [f["option"] for f in summary["failed"]] == [
            "--fail-on no-receipt-on-chart",
            "--max-reconstructed 12.5%",
        ]
    assert f"store {summary['store']}" in err
    for failed in summary["failed"]:
        assert failed["calls"] == len(failed["span_ids"])
        assert failed["text"] in err
        assert set(failed["span_ids"]) <= {v["span_id"] for v in verdicts}
    blind = next(v for v in verdicts if v["run_id"] == "demo-run-2")
    assert names.GAP_NO_RECEIPT in blind["gaps"]
    if code == 1:
        damaged = next(v for v in verdicts if v["status"] == "damaged")
        assert damaged["field"] == "messages.added"
        first = damaged["mismatches"][0]
        assert first["field"] == "messages.added"
        assert first["message_index"] == first["index"] == damaged["message_index"]
        assert first["excused_by"] is None
        assert "no gap explains it" in first["message"]


def test_json_verdicts_carry_the_facts_of_their_spans(
    capsys: pytest.CaptureFixture[str], copy: Path
) -> None:
    """Run, lane, epoch, parent, trace and span ids, scope name and version are the span's own;
    source is instrumentation unless the span says af.receipt.source, which is read as given."""
    traces = copy / "traces.jsonl"
    documents = [json.loads(line) for line in traces.read_text(encoding="utf-8").splitlines()]
    marked = None
    for document in documents:
        for resource in document["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    if attribute(span, names.EPOCH) == "2" and marked is None:
                        marked = span["spanId"]
                        span["attributes"].append(
                            {"key": names.RECEIPT_SOURCE, "value": {"stringValue": "wire"}}
                        )
    traces.write_text("\n".join(json.dumps(d) for d in documents) + "\n", encoding="utf-8")
    _, out, _ = verify(capsys, copy, "--json")
    verdicts = {v["span_id"]: v for v in json_lines(out) if v["type"] == "verdict"}
    on_file = {
        s["spanId"]: s
        for s in spans(traces)
        if attribute(s, names.RUN_ID) and s["name"] != names.RUN_CLOSE  # a close is no call
    }
    assert set(verdicts) == set(on_file)
    for span_id, verdict in verdicts.items():
        span = on_file[span_id]
        assert verdict["trace_id"] == span["traceId"]
        assert verdict["run_id"] == attribute(span, names.RUN_ID)
        assert verdict["epoch"] == int(attribute(span, names.EPOCH))  # OTLP JSON: int as text
        assert verdict["parent"] == int(attribute(span, names.EPOCH_PARENT))
        assert verdict["lane"] == attribute(span, names.EPOCH_LANE)
        assert verdict["lane"]
        assert verdict["scope"] == {
            "name": span["scope"]["name"],
            "version": span["scope"]["version"],
        }
        assert verdict["scope"]["version"]
        assert verdict["source"] == ("wire" if span_id == marked else "instrumentation")
    assert marked is not None
    models = {v["model"] for v in verdicts.values() if names.GAP_NO_RECEIPT not in v["gaps"]}
    assert None not in models


def test_served_json_carries_the_same_verdict_object(
    capsys: pytest.CaptureFixture[str], demo: Path
) -> None:
    """``served --json`` nests the verdict object of the schema under each view's ``verdict``."""
    main(["served", str(demo / "traces.jsonl"), "--store", str(demo / "store"), "--json"])
    views = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    document = schema()
    verdict_schema = {**document["$defs"]["verdict"], "$defs": document["$defs"]}
    for view in views:
        jsonschema.validate(view["verdict"], verdict_schema, cls=jsonschema.Draft202012Validator)
        assert view["verdict"]["span_id"] == view["span_id"]


# -- the schema and the docs ---------------------------------------------------------------------


def schema_fields(node: dict[str, Any], defs: dict[str, Any], prefix: str = "") -> list[str]:
    """Every property path of an object schema: ``scope.name``, ``mismatches[].field``."""
    if "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[1]]
    out = []
    for name, sub in node.get("properties", {}).items():
        path = f"{prefix}{name}"
        out.append(path)
        if sub.get("type") == "object":
            out += schema_fields(sub, defs, f"{path}.")
        elif sub.get("type") == "array" and sub.get("items", {}).get("type") == "object":
            out += schema_fields(sub["items"], defs, f"{path}[].")
    return out


def docs_table(heading: str) -> list[str]:
    """The first-column names of the table under the paragraph that starts with ``heading``."""
    text = DOCS.read_text(encoding="utf-8")
    after = text.split(f"\n{heading}", 1)[1]
    table = after.split("\n\n", 2)[1]
    return re.findall(r"^\| `([^`]+)` \|", table, flags=re.MULTILINE)


@pytest.mark.parametrize(
    ("kind", "heading"),
    [
        ("verdict", 'The verdict object (`"type": "verdict"`):'),
        ("summary", 'The summary object (`"type": "summary"`), the last line:'),
    ],
)
def test_the_docs_table_lists_exactly_the_schema_fields(kind: str, heading: str) -> None:
    """docs/reader.md's table of each object names every field of the schema, in its order,
    nested ones included, and no other; every field is required."""
    document = schema()
    definition = document["$defs"][kind]
    assert docs_table(heading) == schema_fields(definition, document["$defs"])
    assert definition["required"] == list(definition["properties"])
    assert definition["properties"]["schema"] == {"const": SCHEMA}


def test_the_schema_names_the_gap_catalogue_and_the_exit_codes() -> None:
    """The schema's gap kinds are the catalogue's, in its order; its exit codes are the policy's."""
    verdict = schema()["$defs"]["verdict"]["properties"]
    assert verdict["gaps"]["items"]["enum"] == list(SERVED_GAPS)
    summary = schema()["$defs"]["summary"]["properties"]
    assert summary["exit"]["enum"] == [0, EXIT_DAMAGED, EXIT_POLICY]
    jsonschema.Draft202012Validator.check_schema(schema())
