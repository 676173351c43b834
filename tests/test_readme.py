"""The README's code runs as written: after the demo (what `make demo` runs) in a fresh directory,
every ``af-otel`` line of its shell blocks exits as its comment says and every Python block runs.

The Python blocks that add af_otel to a tracer provider assume the setup they extend: a
``provider``, the SDK's ``BatchSpanProcessor`` and the OTLP ``OTLPSpanExporter`` (the real ones).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from af_otel import read_spans, served_views, verify
from af_otel.cli import main
from af_otel.store import LocalStore

README = Path(__file__).resolve().parent.parent / "README.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(README.read_text("utf-8")) if lang == language]


@pytest.fixture
def after_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Path:
    """A fresh directory holding what `make demo` writes (``af-otel demo``, default output)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AF_OTEL_STORE", raising=False)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    assert main(["demo"]) == 0
    capsys.readouterr()
    return tmp_path


def test_the_shell_lines_exit_as_their_comments_say(
    after_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each ``af-otel`` line runs with the demo's paths; ``exit N`` in its comment is its status
    (0 when the comment names none), and what it prints is about the demo's calls."""
    lines = [
        line for block in blocks("sh") for line in block.splitlines() if line.startswith("af-otel ")
    ]
    assert len(lines) >= 5
    commands = set()
    for line in lines:
        command, _, comment = line.partition("#")
        said = re.search(r"exit (\d)", comment)
        argv = shlex.split(command)[1:]
        commands.add(argv[0])
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == (int(said.group(1)) if said else 0), (line, out, err)
        assert "demo-run-1" in out or "wrote" in out, (line, out)
    assert commands >= {"verify", "served", "gaps", "report"}
    assert (after_demo / "report.html").is_file()


def test_the_python_blocks_run(after_demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every Python block runs; the read-back one prints the demo's verdicts."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    code = blocks("python")
    assert len(code) >= 3
    for body in code:
        provider = TracerProvider()
        scope: dict[str, Any] = {
            "provider": provider,
            "BatchSpanProcessor": BatchSpanProcessor,
            "OTLPSpanExporter": OTLPSpanExporter,
        }
        try:
            exec(compile(body, str(README), "exec"), scope)
        finally:
            provider.shutdown()
    printed = capsys.readouterr().out.splitlines()
    assert "demo-run-1 epoch 3: verified" in printed
    assert "demo-run-2 epoch 1: verified" in printed
    # As the README says: the wire tap minted every receipt from the body the client sent, so the
    # agent's parallel_tool_calls=False is on record although genai-openai does not record it.
    demo = after_demo / "af-otel-demo"
    views = served_views(read_spans(demo / "traces.jsonl"), store=LocalStore(demo / "store"))
    hooked = [view for view in views if view.run_id == "demo-run-1"]
    assert len(hooked) == 5
    assert {view.unrecorded for view in hooked} == {()}
    assert all(
        view.params is not None and view.params["parallel_tool_calls"] is False for view in hooked
    )
    assert not any(verify(view).mismatches for view in hooked)
