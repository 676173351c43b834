"""``af-otel demo`` end to end: the files it writes hold what it reports, read back through the
reader: minted receipts and a stored base, a call without a receipt (``no-receipt-on-chart``), a
tampered copy that verifies as damaged at the edited epoch and message, and next commands that
run as printed."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from af_otel import names, read_spans, served_views, verify
from af_otel.cli import EXIT_PIPE, main
from af_otel.cli.demo import RUN_ID, TAMPER, TAMPERED_EPOCH, UNHOOKED_RUN_ID
from af_otel.reader import ServedView, Verdict, VerdictStatus
from af_otel.store import LocalStore


@dataclass(frozen=True)
class Demo:
    out: Path
    code: int
    printed: str


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """One run of ``af-otel demo --out DIR``, content capture off as by default."""
    out = tmp_path_factory.mktemp("demo") / "af-otel-demo"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
        patch.delenv("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", raising=False)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = main(["demo", "--out", str(out)])
    return Demo(out, code, printed.getvalue())


def views_of(path: Path, store: Path) -> dict[tuple[str | None, int], ServedView]:
    return {(v.run_id, v.epoch): v for v in served_views(read_spans(path), store=store)}


def test_demo_writes_traces_and_store(demo: Demo) -> None:
    """The demo exports OTLP JSON lines with minted receipts and a stored base, no prompt text
    on any span, and exits 0."""
    assert demo.code == 0
    assert "6 LLM calls" in demo.printed
    spans = [
        span
        for line in (demo.out / "traces.jsonl").read_text().splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    calls = []
    for span in spans:
        attrs = {a["key"]: a["value"] for a in span.get("attributes", [])}
        assert "gen_ai.input.messages" not in attrs
        if names.RECEIPT_STATE in attrs:
            calls.append(attrs)
    states = {
        (c[names.RUN_ID]["stringValue"], c[names.RECEIPT_STATE]["stringValue"]) for c in calls
    }
    assert states == {(RUN_ID, "minted"), (UNHOOKED_RUN_ID, "absent")}
    base = calls[0][names.RUN_BASE]["stringValue"]
    stored = LocalStore(demo.out / "store").get_json(base)
    assert isinstance(stored, dict)
    assert len(stored["messages"]) == 3


def _whole(verdict: Verdict) -> bool:
    """Verified, or reconstructed only because genai-openai records no `tool_choice`
    (unrecorded-field): every receipt field recomputes either way."""
    if verdict.status is VerdictStatus.VERIFIED:
        return True
    partial = verdict.status is VerdictStatus.RECONSTRUCTED and not verdict.mismatches
    return partial and names.GAP_UNRECORDED in verdict.reason


def test_the_call_without_a_hook_has_no_receipt_on_chart(demo: Demo) -> None:
    """Read back, the hooked run verifies epoch by epoch and the unhooked call is reconstructed
    with ``no-receipt-on-chart``; the demo prints both."""
    views = views_of(demo.out / "traces.jsonl", demo.out / "store")
    hooked = [v for key, v in views.items() if key[0] == RUN_ID]
    assert len(hooked) == 5
    assert all(_whole(verify(v)) for v in hooked)
    unhooked = views[(UNHOOKED_RUN_ID, 1)]
    assert names.GAP_NO_RECEIPT in unhooked.gap_kinds
    assert verify(unhooked).status is VerdictStatus.RECONSTRUCTED
    assert f"{UNHOOKED_RUN_ID} epoch 1: reconstructed" in demo.printed
    assert names.GAP_NO_RECEIPT in demo.printed


def test_the_tampered_copy_is_damaged_where_it_was_edited(demo: Demo) -> None:
    """In the tampered copy, epochs before the edit verify; the edited epoch is damaged at
    ``messages.added`` and at the message holding the edited word; later epochs, which carry
    that message, are damaged too. The demo prints the damaged line."""
    store = demo.out / "store"
    original = views_of(demo.out / "traces.jsonl", store)
    tampered = views_of(demo.out / "tampered.jsonl", store)
    old, new = TAMPER
    edited = tampered[(RUN_ID, TAMPERED_EPOCH)]
    assert edited.messages is not None
    where = [i for i, m in enumerate(edited.messages) if new in json.dumps(m, default=list)]
    assert len(where) == 1
    before = original[(RUN_ID, TAMPERED_EPOCH)].messages
    assert before is not None
    assert old in json.dumps(before[where[0]], default=list)
    for (run_id, epoch), view in tampered.items():
        verdict = verify(view)
        if run_id != RUN_ID:
            assert verdict.status is VerdictStatus.RECONSTRUCTED
        elif epoch < TAMPERED_EPOCH:
            assert _whole(verdict)
        else:
            assert verdict.status is VerdictStatus.DAMAGED
            assert verdict.message_index == where[0]
            if epoch == TAMPERED_EPOCH:
                assert verdict.field == "messages.added"
    line = next(
        x for x in demo.printed.splitlines() if f"{RUN_ID} epoch {TAMPERED_EPOCH}: damaged" in x
    )
    assert f"messages.added differs at message {where[0]}" in line


def test_the_next_commands_run_as_printed(demo: Demo, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo ends with the commands to try, each naming the demo's store; each runs: verify
    exits 0 on the trace and 1 on the tampered copy, the others 0."""
    printed = demo.printed.splitlines()
    start = printed.index("next, try:")
    commands = [line.strip() for line in printed[start + 1 :]]
    assert commands
    assert all(c.startswith("af-otel ") for c in commands)
    assert {shlex.split(c)[1] for c in commands} == {"verify", "served", "gaps", "report"}
    served = next(shlex.split(c) for c in commands if shlex.split(c)[1] == "served")
    assert served[-4:] == ["--run", RUN_ID, "--epoch", str(TAMPERED_EPOCH)]
    for command in commands:
        argv = shlex.split(command)[1:]
        assert argv[argv.index("--store") + 1] == str(demo.out / "store")
        code = main(argv)
        out, err = capsys.readouterr()
        expected = 1 if argv[0] == "verify" and "tampered" in argv[1] else 0
        assert code == expected, (command, out, err)


def test_a_closed_pipe_ends_the_demo_quietly(tmp_path: Path) -> None:
    """``af-otel demo | head -1``: the reader goes away; the demo exits 141, no traceback."""
    command = Path(sys.executable).with_name("af-otel")
    err, code = closed_pipe_run([str(command), "demo", "--out", str(tmp_path / "demo")])
    assert code == EXIT_PIPE
    assert err == ""


def closed_pipe_run(argv: list[str]) -> tuple[str, int]:
    """Run ``argv`` with its stdout a pipe closed before anything is written: every write meets
    a reader gone away. Returns stderr and the exit status."""
    with subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": ""},
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdout.close()
        err = process.stderr.read().decode()
        return err, process.wait(timeout=120)
