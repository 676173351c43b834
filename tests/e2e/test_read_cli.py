"""The reading commands end to end: a real OTLP JSON lines file written through af_otel's own
pipeline, read back by ``af-otel served | verify | gaps | report`` (in process, and once as the
installed command), including damaged and unreadable input."""

from __future__ import annotations

import contextlib
import html
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from af_otel import names
from af_otel.cli import main
from af_otel.processor import run
from af_otel.store import LocalStore
from tests.reader.recordings import agent, file_recorder, one_character_changed, user
from tests.reader.sources.helpers import serve


@pytest.fixture
def recording(tmp_path: Path) -> tuple[Path, Path]:
    """traces.jsonl with a 3-turn agent (one prompt holding markup) and a call whose content
    was not captured, plus its store."""
    traces, store_dir = tmp_path / "traces.jsonl", tmp_path / "store"
    with file_recorder(traces, LocalStore(store_dir)) as rec:
        agent(rec, "cli-run", 3, base={"messages": [user("<script>alert('x')</script> earlier")]})
        with run("blind-run"):
            rec.blind_chat(model="gpt-4o")
    return traces, store_dir


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def edit_line(traces: Path, edit: Any) -> None:
    lines = traces.read_text(encoding="utf-8").splitlines()
    traces.write_text("\n".join(edit(json.loads(line)) for line in lines) + "\n", encoding="utf-8")


def spans_of(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource in document.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            yield from scope.get("spans", [])


def attribute(span: dict[str, Any], key: str) -> Any:
    for item in span.get("attributes", []):
        if item["key"] == key:
            return next(iter(item["value"].values()))
    return None


def test_verify_passes_a_clean_recording(
    capsys: pytest.CaptureFixture[str], recording: Any
) -> None:
    """Every epoch verifies (the blind call is reconstructed): exit 0, one line per call."""
    traces, store = recording
    code, out, _ = cli(capsys, "verify", str(traces), "--store", str(store))
    assert code == 0
    assert "cli-run epoch 3: verified" in out
    assert "blind-run epoch 1: reconstructed" in out
    assert out.strip().endswith("3 verified, 1 reconstructed, 0 damaged")


def test_verify_counts_its_verdicts_on_a_meter(recording: Any) -> None:
    """The verdicts `verify` prints are the ones it adds to the af_otel.verdicts counter, by label."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from af_otel.cli.read import count_verdicts
    from af_otel.reader import served_views, verify
    from af_otel.reader.sources import read_spans

    traces, store = recording
    verdicts = [verify(view) for view in served_views(read_spans(traces), store=LocalStore(store))]
    reader = InMemoryMetricReader()
    count_verdicts(verdicts, MeterProvider(metric_readers=[reader]))
    data = reader.get_metrics_data()
    assert data is not None
    points = {
        point.attributes[names.METRIC_ATTR_VERDICT]: point.value
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == names.METRIC_VERDICTS
        for point in metric.data.data_points
    }
    assert points == {"verified": 3, "reconstructed": 1}


def test_verify_exits_1_on_an_edited_event(
    capsys: pytest.CaptureFixture[str], recording: Any
) -> None:
    """Editing a commit payload in the file makes that epoch damaged and the command exit 1."""
    traces, store = recording

    def tamper(document: dict[str, Any]) -> str:
        for span in spans_of(document):
            if (
                attribute(span, names.RUN_ID) == "cli-run"
                and attribute(span, names.EPOCH) is not None
                and int(attribute(span, names.EPOCH)) == 2
            ):
                for event in span.get("events", []):
                    for item in event.get("attributes", []):
                        if item["key"] == names.COMMIT_VALUE:
                            text = item["value"]["stringValue"]
                            item["value"]["stringValue"] = text.replace("question 2", "question 9")
        return json.dumps(document)

    edit_line(traces, tamper)
    code, out, _ = cli(capsys, "verify", str(traces), "--store", str(store), "--json")
    assert code == 1
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1]["type"] == "summary"
    verdicts = {(v["run_id"], v["epoch"]): v for v in lines[:-1]}
    assert verdicts[("cli-run", 1)]["status"] == "verified"
    assert verdicts[("cli-run", 2)]["status"] == "damaged"
    assert verdicts[("cli-run", 2)]["field"] == "messages.added"
    assert verdicts[("cli-run", 2)]["message_index"] == 5


def _base_blob(traces: Path, store: Path) -> Path:
    document = json.loads(traces.read_text(encoding="utf-8").splitlines()[0])
    base = next(
        attribute(span, names.RUN_BASE)
        for span in spans_of(document)
        if attribute(span, names.RUN_BASE)
    )
    digits = str(base).removeprefix("sha256:")
    return store / "sha256" / digits[:2] / digits[2:]


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(one_character_changed, id="one-character"),
        pytest.param(lambda data: data[:-3], id="truncated"),
        pytest.param(lambda data: b'{"messages":[]}', id="another-valid-blob"),
    ],
)
def test_verify_exits_1_on_a_damaged_stored_base(
    capsys: pytest.CaptureFixture[str], recording: Any, edit: Any
) -> None:
    """A stored base whose bytes were changed is damage, never the gap of a missing base: every
    call of its run is damaged at field ``base``, the verdict names the blob, and verify exits 1."""
    traces, store = recording
    blob = _base_blob(traces, store)
    address = f"sha256:{blob.parent.name}{blob.name}"
    blob.chmod(0o644)
    blob.write_bytes(edit(blob.read_bytes()))
    code, out, _ = cli(capsys, "verify", str(traces), "--store", str(store), "--json")
    assert code == 1
    verdicts = [json.loads(line) for line in out.splitlines()]
    ours = [v for v in verdicts if v.get("type") == "verdict" and v["run_id"] == "cli-run"]
    assert [v["status"] for v in ours] == ["damaged"] * 3
    assert all(v["field"] == "base" and address in v["reason"] for v in ours)
    assert all(v["mismatches"][0]["field"] == "base" for v in ours)
    code, out, _ = cli(capsys, "verify", str(traces), "--store", str(store))
    assert code == 1
    assert f"cli-run epoch 1: damaged — stored base blob {address}" in out


def test_a_missing_blob_is_a_gap_and_a_damaged_payload_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """With the rest of the store there, a base the store does not hold is the named gap
    ``no-fold-base`` and a missing payload ``no-run-log`` (exit 0); a payload cut short is damage
    of that blob from its epoch on (exit 1)."""
    traces, store = tmp_path / "traces.jsonl", tmp_path / "store"
    with file_recorder(traces, LocalStore(store), content="store") as rec:
        agent(rec, "cli-run", 3, base={"messages": [user("earlier")]})
    spans = list(spans_of(json.loads(traces.read_text(encoding="utf-8").splitlines()[0])))
    calls = [span for span in spans if attribute(span, names.EPOCH) is not None]
    last = max(calls, key=lambda span: int(attribute(span, names.EPOCH)))
    payload = str(attribute(last["events"][-1], names.COMMIT_REF))
    digits = payload.removeprefix("sha256:")
    payload_blob = store / "sha256" / digits[:2] / digits[2:]
    held = payload_blob.read_bytes()
    payload_blob.unlink()
    code, out, _ = cli(capsys, "verify", str(traces), "--store", str(store))
    assert (code, "explained by no-run-log" in out, "damaged —" in out) == (0, True, False), out
    payload_blob.write_bytes(held[:-1])
    code, out, _ = cli(capsys, "verify", str(traces), "--store", str(store))
    assert code == 1, out
    assert f"cli-run epoch 3: damaged — stored payload blob {payload}" in out
    assert "cli-run epoch 2: verified" in out
    payload_blob.unlink()
    payload_blob.write_bytes(held)
    _base_blob(traces, store).unlink()
    code, out, _ = cli(capsys, "verify", str(traces), "--store", str(store))
    assert code == 0, out
    assert out.count("explained by no-fold-base") == 3
    assert "damaged —" not in out


def test_verify_exits_2_on_input_it_cannot_read(
    capsys: pytest.CaptureFixture[str], recording: Any, tmp_path: Path
) -> None:
    """A missing file, an unknown format and a cut line are errors (2), each naming the input;
    --lenient skips the cut line, says so, and judges the rest; a file of nothing but a cut line
    is still an error (2) under --lenient: what it held is unknown, not nothing."""
    traces, store = recording
    code, _, err = cli(capsys, "verify", str(tmp_path / "nope.jsonl"))
    assert code == 2
    assert "nope.jsonl" in err
    (tmp_path / "notes.txt").write_text("hello world\n")
    code, _, err = cli(capsys, "verify", str(tmp_path / "notes.txt"))
    assert code == 2
    assert "expected" in err.lower()
    lines = traces.read_text(encoding="utf-8").splitlines()
    cut = tmp_path / "cut.jsonl"
    # Cut mid-line, not right after an opening bracket (a lone line ending in one reads as the
    # start of a pretty-printed document, not as a torn line).
    torn = lines[-1][: len(lines[-1]) // 2].rstrip("{[")
    cut.write_text("\n".join([*lines[:-1], torn]) + "\n")
    code, _, err = cli(capsys, "verify", str(cut), "--store", str(store))
    assert code == 2
    assert f"cut.jsonl:{len(lines)}" in err
    code, _, err = cli(capsys, "verify", str(cut), "--store", str(store), "--lenient")
    assert (code, len(lines)) == (2, 1)
    assert "after skipping 1 unreadable line(s)" in err
    cut.write_text("\n".join([*lines, lines[-1][: len(lines[-1]) // 2]]) + "\n")
    code, out, err = cli(capsys, "verify", str(cut), "--store", str(store), "--lenient")
    assert code == 0
    assert "skipped 1 unreadable line(s)" in err
    assert "3 verified, 1 reconstructed, 0 damaged" in out


def test_served_prints_the_view_with_its_gaps(
    capsys: pytest.CaptureFixture[str], recording: Any
) -> None:
    """`served --run --epoch` prints one view: ids, verdict, sentences, messages in order."""
    traces, store = recording
    code, out, _ = cli(
        capsys, "served", str(traces), "--store", str(store), "--run", "cli-run", "--epoch", "2"
    )
    assert code == 0
    assert out.startswith("run cli-run · epoch 2 (parent 1)")
    assert "verdict: verified" in out
    assert "gap provider-defaults: Only the sampling settings" in out
    assert "<script>alert('x')</script> earlier" in out
    assert out.index("#0 user") < out.index("#1 user") < out.index("question 2")
    code, out, _ = cli(capsys, "served", str(traces), "--store", str(store), "--json")
    views = [json.loads(line) for line in out.splitlines()]
    assert [(v["run_id"], v["epoch"]) for v in views] == [
        ("cli-run", 1),
        ("cli-run", 2),
        ("cli-run", 3),
        ("blind-run", 1),
    ]
    assert views[3]["messages"] is None
    code, _, err = cli(
        capsys, "served", str(traces), "--store", str(store), "--run", "cli-run", "--epoch", "9"
    )
    assert code == 2
    assert "no epoch 9" in err


def test_gaps_lists_calls_without_a_receipt(
    capsys: pytest.CaptureFixture[str], recording: Any
) -> None:
    """`gaps --kind no-receipt-on-chart` names each such call with service, model and reason."""
    traces, store = recording
    code, out, _ = cli(
        capsys, "gaps", str(traces), "--store", str(store), "--kind", "no-receipt-on-chart"
    )
    assert code == 0
    assert out.startswith("no-receipt-on-chart (1 call(s), excuse)")
    line = next(line for line in out.splitlines() if line.startswith("  - "))
    assert "run blind-run epoch 1" in line
    assert "service reader-tests" in line
    assert "model gpt-4o" in line
    assert "cause no-receipt-committed" in line
    assert "content-not-captured" in line


def test_report_writes_one_escaped_page(
    capsys: pytest.CaptureFixture[str], recording: Any, tmp_path: Path
) -> None:
    """`report -o` writes a page holding every call, the markup in a prompt escaped."""
    traces, store = recording
    output = tmp_path / "out.html"
    code, out, _ = cli(capsys, "report", str(traces), "--store", str(store), "-o", str(output))
    assert code == 0
    assert str(output) in out
    page = output.read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "<script" not in page
    assert page.count('class="epoch"') == 4


def test_the_store_defaults_to_the_environment(
    capsys: pytest.CaptureFixture[str], recording: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --store, AF_OTEL_STORE names the store; without either, the default store is
    not there, the trace needs its blobs, and verify exits 2 saying so (never a pass with every
    base missing)."""
    traces, store = recording
    monkeypatch.chdir(traces.parent)
    monkeypatch.delenv(names.ENV_STORE, raising=False)
    code, out, err = cli(capsys, "verify", str(traces))
    assert code == 2
    assert out == ""
    assert f"the default store {names.DEFAULT_STORE} (no --store given)" in err
    assert "name the store with --store" in err
    monkeypatch.setenv(names.ENV_STORE, str(store))
    code, out, _ = cli(capsys, "verify", str(traces))
    assert code == 0
    assert "3 verified" in out
    assert f"store {store.as_uri()}" in out
    monkeypatch.setenv(names.ENV_STORE, str(traces.parent / "elsewhere"))
    code, _, err = cli(capsys, "verify", str(traces))
    assert code == 2
    assert f"${names.ENV_STORE} {traces.parent / 'elsewhere'}: no store directory" in err


def test_an_unusable_store_exits_2_naming_the_option_and_why(
    capsys: pytest.CaptureFixture[str], recording: Any, tmp_path: Path
) -> None:
    """A --store that does not exist, is a file, is a URL with nothing under it, or holds none
    of the trace's blobs: exit 2 from every command, naming --store and which it is."""
    traces, store = recording
    (tmp_path / "empty").mkdir()
    cases = {
        str(tmp_path / "wrong" / "path"): "no store directory at",
        str(traces): "is not a directory, so it cannot be a store",
        "memory://af-otel-nothing-here": "nothing is stored under it",
        str(tmp_path / "empty"): "holds none of the 1 blob(s) the trace refers to",
    }
    for url, why in cases.items():
        for command in ("verify", "served", "gaps"):
            code, out, err = cli(capsys, command, str(traces), "--store", url)
            assert code == 2, (command, url, err)
            assert out == ""
            assert err.startswith(f"af-otel {command}: --store {url}: ")
            assert why in err
    code, out, _ = cli(capsys, "verify", str(traces), "--store", str(store))
    assert code == 0


def test_a_store_the_trace_does_not_need_is_only_warned_about(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A trace whose commits are all inline and that names no base needs no blob: a --store that
    is not there changes no verdict, so verify says so on stderr and judges (exit 0)."""
    traces, store = tmp_path / "t.jsonl", tmp_path / "never-written"
    with file_recorder(traces, LocalStore(store)) as rec:
        agent(rec, "inline", 2)
    assert not store.exists()
    code, out, err = cli(capsys, "verify", str(traces), "--store", str(store))
    assert code == 0
    assert "2 verified" in out
    assert f"--store {store}: no store directory" in err
    assert "so none is needed" in err


def strip_af(document: dict[str, Any]) -> str:
    """The document as it would be exported without af_otel: no af.* attribute, no commit."""
    for span in spans_of(document):
        span["attributes"] = [
            a for a in span.get("attributes", []) if not a["key"].startswith("af.")
        ]
        span["events"] = [e for e in span.get("events", []) if not e["name"].startswith("af.")]
    return json.dumps(document)


def test_nothing_to_verify_exits_3(
    capsys: pytest.CaptureFixture[str], recording: Any, tmp_path: Path
) -> None:
    """An empty file, or spans none of which carries af.* attributes: every reading command
    says what it read and exits 3, so a gate on a broken export does not pass."""
    traces, store = recording
    span_count = sum(
        1 for line in traces.read_text().splitlines() for _ in spans_of(json.loads(line))
    )
    edit_line(traces, strip_af)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for command in ("verify", "served", "gaps", "report"):
        extra = ["-o", str(tmp_path / "r.html")] if command == "report" else []
        code, out, err = cli(capsys, command, str(traces), "--store", str(store), *extra)
        assert (code, out) == (3, ""), (command, err)
        assert f"read {span_count} span(s) from {traces}, none carries af.* attributes" in err
        code, out, err = cli(capsys, command, str(empty), "--store", str(store), *extra)
        assert (code, out) == (3, ""), (command, err)
        assert f"read no spans from {empty}" in err
    assert "nothing to verify" in cli(capsys, "verify", str(empty))[2]
    assert not (tmp_path / "r.html").exists()


def test_verify_names_the_store_it_read(capsys: pytest.CaptureFixture[str], recording: Any) -> None:
    """The store line sits above the summary; with --json it goes to stderr, stdout staying
    one JSON object a line (a verdict a call, then the summary, which names the store too)."""
    traces, store = recording
    _, out, _ = cli(capsys, "verify", str(traces), "--store", str(store))
    assert out.splitlines()[-2] == f"store {store.as_uri()}"
    _, out, err = cli(capsys, "verify", str(traces), "--store", str(store), "--json")
    *verdicts, summary = [json.loads(line) for line in out.splitlines()]
    assert [v["status"] for v in verdicts].count("verified") == 3
    assert f"store {store.as_uri()}" in err
    assert summary["store"] == store.as_uri()


def test_gaps_says_when_no_call_has_the_kind(
    capsys: pytest.CaptureFixture[str], recording: Any
) -> None:
    """`gaps --kind K` with no call of that kind prints nothing on stdout, says so on stderr and
    exits 0 (the calls were read; none has the gap)."""
    traces, store = recording
    code, out, err = cli(
        capsys, "gaps", str(traces), "--store", str(store), "--kind", "span-limits"
    )
    assert (code, out) == (0, "")
    assert f"no gap span-limits on any of the 4 LLM call(s) in {traces}" in err


def test_backend_notes_reach_stderr_from_every_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Tempo's PARTIAL status, in a saved response and fetched live, is printed on stderr by
    served, verify, gaps and report alike."""
    traces, store = tmp_path / "t.jsonl", tmp_path / "s"
    with file_recorder(traces, LocalStore(store)) as rec:
        agent(rec, "partial", 2)
    documents = [json.loads(line) for line in traces.read_text(encoding="utf-8").splitlines()]
    trace_id = next(s["traceId"] for d in documents for s in spans_of(d))
    message = "1 of 3 blocks could not be searched"
    body = {
        "trace": {"resourceSpans": [r for d in documents for r in d["resourceSpans"]]},
        "status": "PARTIAL",
        "message": message,
    }
    saved = tmp_path / "tempo.json"
    saved.write_text(json.dumps(body))
    with serve({f"/api/v2/traces/{trace_id}": (200, json.dumps(body).encode())}) as url:
        for source in ([str(saved)], ["--tempo", url, "--trace", trace_id]):
            for command in ("served", "verify", "gaps", "report"):
                extra = ["-o", str(tmp_path / "r.html")] if command == "report" else []
                code, _, err = cli(capsys, command, *source, "--store", str(store), *extra)
                assert code == 0, (command, err)
                assert message in err, (command, source)


def test_a_partial_trace_is_named_as_the_cause_of_missing_spans(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A Tempo trace marked PARTIAL that lacks a span of the run: served, gaps, the report and
    the serve page all give the backend's note as the cause of no-run-log, not sampling."""
    from starlette.testclient import TestClient

    from af_otel.model.gap_kinds import SERVED_GAPS
    from af_otel.reader.sources import TempoSource
    from af_otel.web import Evidence
    from af_otel.web.app import create_app, epoch_path
    from tests.reader.sources import replay

    traces, store = tmp_path / "t.jsonl", tmp_path / "s"
    with file_recorder(traces, LocalStore(store)) as rec:
        agent(rec, "cut-run", 3)
    cut = replay.without_epoch(replay.merged(replay.export_lines(traces)), 2)
    trace_id = next(s["traceId"] for s in spans_of(cut))
    message = "trace exceeds max size (max bytes: 5000000)"
    body = json.dumps(replay.tempo_v2(cut, status="PARTIAL", message=message)).encode()
    report = tmp_path / "r.html"
    shown: dict[str, str] = {}
    with serve({f"/api/v2/traces/{trace_id}": (200, body)}) as url:
        source = ["--tempo", url, "--trace", trace_id, "--store", str(store), "--run", "cut-run"]
        for command in ("served", "gaps"):
            code, out, err = cli(capsys, command, *source)
            assert code == 0, err
            shown[command] = out
        assert cli(capsys, "report", *source, "-o", str(report))[0] == 0
        shown["report"] = html.unescape(report.read_text(encoding="utf-8"))
        client = TestClient(create_app(Evidence(source=TempoSource(url), store=str(store))))
        page = client.get(epoch_path("cut-run", 3, trace_id))
        assert page.status_code == 200, page.text
        shown["serve"] = html.unescape(page.text)
    catalogue = SERVED_GAPS[names.GAP_NO_RUN_LOG].why
    for where, text in shown.items():
        assert names.GAP_NO_RUN_LOG in text, where
        assert f"its answer was incomplete: {url}/api/v2/traces/" in text, where
        assert message in text, where
        assert catalogue not in text, where  # the catalogue's sentence gave way


def test_help_documents_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """`af-otel verify --help` lists every exit status the gate can see."""
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    out = capsys.readouterr().out
    for line in (
        "0    every LLM call",
        "1    at least one",
        "2    the input",
        "3    nothing",
        "141  the output pipe",
    ):
        assert line in out


@pytest.mark.parametrize("argv", [["served", "--full"], ["verify"], ["gaps"]])
def test_a_closed_pipe_ends_quietly(recording: Any, argv: list[str]) -> None:
    """`af-otel served --full | head -1`: 141 and nothing on stderr, never 2 (which would read as
    unreadable input) and never a traceback."""
    from tests.e2e.test_emit_demo import closed_pipe_run

    traces, store = recording
    command = Path(sys.executable).with_name("af-otel")
    err, code = closed_pipe_run([str(command), *argv, str(traces), "--store", str(store)])
    assert (code, err) == (141, "")


def test_keyed_receipts_read_their_key_from_the_environment(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A keyed recording verifies with AF_OTEL_KEY; without a key, verify exits 2 naming it."""
    traces, store = tmp_path / "t.jsonl", tmp_path / "s"
    with file_recorder(traces, LocalStore(store), key="sesame") as rec:
        agent(rec, "keyed", 2)
    monkeypatch.delenv(names.ENV_KEY, raising=False)
    monkeypatch.delenv(names.ENV_KEY_FILE, raising=False)
    code, _, err = cli(capsys, "verify", str(traces), "--store", str(store))
    assert code == 2
    assert names.ENV_KEY in err
    monkeypatch.setenv(names.ENV_KEY, "sesame")
    code, out, _ = cli(capsys, "verify", str(traces), "--store", str(store))
    assert code == 0
    assert "2 verified" in out


def test_a_trace_fetched_from_tempo(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--tempo URL --trace ID reads one trace from a Tempo API (a local server) and verifies it."""
    traces, store = tmp_path / "t.jsonl", tmp_path / "s"
    with (
        file_recorder(traces, LocalStore(store)) as rec,
        rec.tracer.start_as_current_span("invoke_agent"),
    ):
        agent(rec, "traced", 3)
    documents = [json.loads(line) for line in traces.read_text(encoding="utf-8").splitlines()]
    resource_spans = [r for d in documents for r in d["resourceSpans"]]
    trace_id = next(s["traceId"] for d in documents for s in spans_of(d))
    body = json.dumps({"trace": {"resourceSpans": resource_spans}}).encode()
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(serve({f"/api/v2/traces/{trace_id}": (200, body)}))
        code, out, _ = cli(
            capsys, "verify", "--tempo", url, "--trace", trace_id, "--store", str(store)
        )
        assert code == 0
        assert "traced epoch 3: verified" in out
        code, _, err = cli(capsys, "verify", "--tempo", url, "--trace", "0" * 31 + "1")
    assert code == 2
    assert "127.0.0.1" in err


def test_the_installed_command_exits_like_a_ci_gate(recording: Any) -> None:
    """The real `af-otel` executable: exit 0 on the clean file, progress never on a pipe."""
    traces, store = recording
    command = Path(sys.executable).with_name("af-otel")
    done = subprocess.run(
        [str(command), "verify", str(traces), "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, names.ENV_STORE: ""},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr


def test_progress_shows_on_a_terminal_only() -> None:
    """The counter writes to a terminal (and clears its line when done), never to a pipe."""
    import io

    from af_otel.cli.progress import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal, pipe = Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        progress = Progress("verifying", stream)
        progress.tick(5, 10)
        progress.done()
    assert terminal.getvalue() == "\rverifying 5/10\r\x1b[K"
    assert pipe.getvalue() == ""
