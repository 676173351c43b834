"""``af-otel demo`` end to end: the file it writes holds the receipts, commits and base it reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from af_otel import names
from af_otel.cli import main
from af_otel.store import LocalStore


def test_demo_writes_traces_and_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo exports OTLP JSON lines with minted receipts and a stored base, and says so."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "5 LLM calls" in printed
    spans = [
        span
        for line in (out / "traces.jsonl").read_text().splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    calls = []
    for span in spans:
        attrs = {a["key"]: a["value"] for a in span.get("attributes", [])}
        if names.RECEIPT_STATE in attrs:
            calls.append(attrs)
            assert "gen_ai.input.messages" not in attrs
    assert [c[names.RECEIPT_STATE]["stringValue"] for c in calls] == ["minted"] * 5
    base = calls[0][names.RUN_BASE]["stringValue"]
    stored = LocalStore(out / "store").get_json(base)
    assert isinstance(stored, dict)
    assert len(stored["messages"]) == 3
