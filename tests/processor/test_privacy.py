"""Never more exposed than the instrumentation: with content capture off, the completion hook and
`llm_call` put no prompt, message, tool schema or tool result text on the exported trace, in either
form, with default arguments; the store holds the payloads and `af-otel verify` still verifies
every epoch from it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import opentelemetry.util.genai.handler  # noqa: F401 - binds the real get_tracer before any patch
import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

import af_otel
from af_otel import names
from af_otel.cli import demo, main
from tests.processor.fakes import instrumented_openai

SYSTEM = "Zebracorn-system-7731: answer as the travel desk would."
QUESTION = "Quokkalith-user-4420: what is the weather in Paris?"
TOOL_DESCRIPTION = "Narwhalite-tooldesc-9981: weather for a city"
TOOL_RESULT = "Axolotlium-result-5512: sunny, 21C"
EXPLICIT_SYSTEM = "Pangolinor-explicit-3141: be brief."
EXPLICIT_USER = "Okapiform-explicit-2718: summarize the trip."
SECRETS = (SYSTEM, QUESTION, TOOL_DESCRIPTION, TOOL_RESULT, EXPLICIT_SYSTEM, EXPLICIT_USER)

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": TOOL_DESCRIPTION,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _calls(provider: TracerProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    """One run: a tool-using agent through the real genai-openai instrumentation with the hook and
    capture off, then one explicit `llm_call` that continues it."""

    def get_tracer(name: str, version: str | None = None, *_: Any, **__: Any) -> trace.Tracer:
        return provider.get_tracer(name, version)

    # llm_call uses the global tracer provider, which a test may not set (it is set once).
    monkeypatch.setattr(trace, "get_tracer", get_tracer)
    with (
        instrumented_openai(provider, completion_hook=af_otel.completion_hook) as client,
        af_otel.run("private-run"),
    ):
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": QUESTION},
        ]
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, tools=[TOOL], temperature=0.2
        )
        choice = reply.choices[0].message
        messages.append(choice.model_dump(exclude_none=True))
        for call in choice.tool_calls or []:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": TOOL_RESULT})
        client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, tools=[TOOL], temperature=0.2
        )
        with af_otel.llm_call(
            model="gpt-4o-mini",
            provider="openai",
            system=EXPLICIT_SYSTEM,
            messages=[
                {"role": "user", "parts": [{"type": "text", "content": EXPLICIT_USER}]},
                {"role": "tool", "parts": [{"type": "text", "content": TOOL_RESULT}]},
            ],
            params={"temperature": 0.2},
        ) as explicit:
            explicit.set_response(output_tokens=3, finish_reason="stop")


def _record(form: str, traces: Path, monkeypatch: pytest.MonkeyPatch, **options: Any) -> None:
    provider = TracerProvider()
    if form == "processor":
        provider.add_span_processor(
            af_otel.ReceiptSpanProcessor(SimpleSpanProcessor(FileSpanExporter(traces)), **options)
        )
    else:
        provider.add_span_processor(
            af_otel.RunTagger(
                BatchSpanProcessor(af_otel.ReceiptSpanExporter(FileSpanExporter(traces), **options))
            )
        )
    _calls(provider, monkeypatch)
    provider.shutdown()


def _spans(traces: Path) -> Iterator[dict[str, Any]]:
    for line in traces.read_text(encoding="utf-8").splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                yield from scope["spans"]


def _af_added(traces: Path) -> bytes:
    """Every attribute and event af_otel added, as bytes to search."""
    out = []
    for span in _spans(traces):
        out.extend(a for a in span.get("attributes", []) if a["key"].startswith("af."))
        out.extend(e for e in span.get("events", []) if e["name"].startswith("af."))
    return json.dumps(out, ensure_ascii=False).encode("utf-8")


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Content capture off, as the instrumentation's documentation says; the default store."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    for variable in ("AF_OTEL_CONTENT", "AF_OTEL_INLINE_LIMIT", "AF_OTEL_STRIP_CONTENT"):
        monkeypatch.delenv(variable, raising=False)
    store = tmp_path / "store"
    monkeypatch.setenv("AF_OTEL_STORE", str(store))
    return store


@pytest.mark.parametrize("form", ["processor", "exporter"])
def test_no_prompt_text_on_the_trace_by_default(
    form: str,
    quiet: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Default arguments, capture off: no secret anywhere in the trace file (so in nothing af_otel
    added), every call minted with commits by address, the payloads in the store, and the reader
    verifies every epoch from trace plus store."""
    traces = tmp_path / "traces.jsonl"
    _record(form, traces, monkeypatch)
    raw = traces.read_bytes()
    added = _af_added(traces)
    for secret in SECRETS:
        assert secret.encode() not in raw, secret
        assert secret.encode() not in added, secret
    calls = [
        {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}
        for span in _spans(traces)
    ]
    calls = [c for c in calls if names.RECEIPT_STATE in c]
    assert [c[names.RECEIPT_STATE] for c in calls] == ["minted"] * 3
    assert {c[names.RUN_ID] for c in calls} == {"private-run"}
    events = [e for span in _spans(traces) for e in span.get("events", [])]
    commit_keys = {
        a["key"] for e in events if e["name"] == names.COMMIT_EVENT for a in e["attributes"]
    }
    assert names.COMMIT_REF in commit_keys
    assert names.COMMIT_VALUE not in commit_keys
    stored = b"".join(p.read_bytes() for p in quiet.rglob("*") if p.is_file())
    assert all(secret.encode() in stored for secret in SECRETS)
    capsys.readouterr()
    code = main(["verify", str(traces), "--store", str(quiet), "--json"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    verdicts = [v for v in lines if v.get("type") == "verdict"]  # the summary line last
    assert code == 0
    assert sorted(v["epoch"] for v in verdicts) == [1, 2, 3]
    # genai-openai records no tool_choice (unrecorded-field): its calls are whole but partial.
    for v in verdicts:
        partial = v["status"] == "reconstructed" and "unrecorded-field" in v["reason"]
        assert v["status"] == "verified" or partial, v
    assert all(v["mismatches"] == [] for v in verdicts)


def test_the_search_finds_what_inline_writes(
    quiet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: with content='inline' chosen explicitly, the same run's commits carry the
    text, so the byte search above can fail."""
    traces = tmp_path / "traces.jsonl"
    _record("processor", traces, monkeypatch, content="inline", inline_limit=1 << 20)
    added = _af_added(traces)
    assert all(secret.encode() in added for secret in SECRETS)


def test_capture_on_keeps_commits_inline(
    quiet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the instrumentation already put the request on the span, the default commits inline
    (the trace is its own record; the reader folds it without the store)."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    traces = tmp_path / "traces.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(
        af_otel.ReceiptSpanProcessor(SimpleSpanProcessor(FileSpanExporter(traces)))
    )
    with (
        instrumented_openai(provider, completion_hook=af_otel.completion_hook) as client,
        af_otel.run("open-run"),
    ):
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}],
        )
    provider.shutdown()
    events = [e for span in _spans(traces) for e in span.get("events", [])]
    keys = {a["key"] for e in events if e["name"] == names.COMMIT_EVENT for a in e["attributes"]}
    assert names.COMMIT_VALUE in keys
    assert SYSTEM.encode() in _af_added(traces)


def test_the_demo_trace_holds_no_prompt_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`af-otel demo` (capture off, default content mode) writes none of its system prompt,
    questions, tool description or tool results into the trace file; the store holds them."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    monkeypatch.delenv("AF_OTEL_CONTENT", raising=False)
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    assert "prompts not in the trace" in capsys.readouterr().out
    raw = (out / "traces.jsonl").read_bytes()
    stored = b"".join(p.read_bytes() for p in (out / "store").rglob("*") if p.is_file())
    texts = [demo.SYSTEM, *demo.QUESTIONS, "Current weather for a city", *demo.FORECASTS.values()]
    for text in texts:
        assert text.encode() not in raw, text
        assert json.dumps(text)[1:-1].encode() in stored, text
