"""A framework span that writes its LLM attributes at its start (so the processor numbers it
then) around a real instrumented ``openai`` call: still one epoch per real call, held by the SDK
instrumentation's span, the framework's folded into it, no gap in the epoch numbers, in both
forms, whether or not the framework span is the current one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest
from opentelemetry import trace

import af_otel
from af_otel import names, read_spans, served_views, verify
from af_otel.reader import VerdictStatus
from tests.agents.stack import RUN, SYSTEM, Recorded, _instrumented, _provider
from tests.wire.convert import differences, from_view, from_wire
from tests.wire.server import WireServer

pytestmark = pytest.mark.instrumentation

FRAMEWORK: Final = "acme.agents"  # a framework's instrumentation scope (ranks below the SDK's)
MODEL: Final = "gpt-4o-mini"
QUESTIONS: Final = ("Weather in Paris?", "And in Oslo?", "Lima?")
SDK_SCOPES: Final = {
    "oi-openai": "openinference.instrumentation.openai",
    "genai-openai": "opentelemetry.instrumentation.genai.openai",
}


def _parts(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "content": text}]


def _framework_attributes(history: list[dict[str, Any]]) -> dict[str, Any]:
    """What the framework writes at the span's start: the call, with the prompt as a field."""
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": MODEL,
        "gen_ai.system_instructions": json.dumps(_parts(SYSTEM)),
        "gen_ai.input.messages": json.dumps(
            [{"role": m["role"], "parts": _parts(m["content"])} for m in history]
        ),
    }


def _agent(instrumentation: str, form: str, current: bool, tmp: Path) -> Recorded:
    import openai

    traces, store = tmp / "traces.jsonl", tmp / "store"
    provider = _provider(form, traces, store)
    tracer = provider.get_tracer(FRAMEWORK)
    with (
        WireServer() as server,
        _instrumented(instrumentation, provider),
        # Closed with the block: a client left open holds its pool's socket until some later
        # collection, where its ResourceWarning fails whichever test is running.
        openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="test") as client,
    ):
        history: list[dict[str, Any]] = []
        with af_otel.run(RUN):
            for question in QUESTIONS:
                history.append({"role": "user", "content": question})
                span = tracer.start_span("chat " + MODEL, attributes=_framework_attributes(history))
                if current:
                    with trace.use_span(span, end_on_exit=True):
                        reply = _call(client, history)
                else:  # like OpenInference's LangChain span: never made current
                    reply = _call(client, history)
                    span.end()
                history.append({"role": "assistant", "content": reply})
        wire = tuple(server.requests)
    provider.shutdown()
    return Recorded(traces, store, wire)


def _call(client: Any, history: list[dict[str, Any]]) -> str:
    messages = [{"role": "system", "content": SYSTEM}, *history]
    reply = client.chat.completions.create(model=MODEL, messages=messages, temperature=0.2)
    return str(reply.choices[0].message.content)


def _attribute(span: dict[str, Any], key: str) -> Any:
    for attribute in span.get("attributes", []):
        if attribute["key"] == key:
            kind, value = next(iter(attribute["value"].items()))
            return int(value) if kind == "intValue" else value
    return None


@pytest.mark.parametrize("current", [True, False], ids=["current", "not-current"])
@pytest.mark.parametrize("form", ["processor", "exporter"])
@pytest.mark.parametrize("instrumentation", sorted(SDK_SCOPES))
def test_a_framework_span_numbered_at_its_start_is_folded(
    instrumentation: str, form: str, current: bool, tmp_path: Path
) -> None:
    run = _agent(instrumentation, form, current, tmp_path)
    assert len(run.wire) == len(QUESTIONS)
    spans = run.spans()
    framework = [s for s in spans if s["scope"] == FRAMEWORK]
    sdk = [s for s in spans if s["scope"] == SDK_SCOPES[instrumentation]]
    assert len(framework) == len(sdk) == len(QUESTIONS)
    # The SDK's spans hold epochs 1..n in call order; the framework's carry none of their own.
    assert [_attribute(s, names.EPOCH) for s in sdk] == [1, 2, 3]
    assert [_attribute(s, names.EPOCH) for s in framework] == [None] * len(QUESTIONS)
    assert [_attribute(s, names.EPOCH_SAME_AS) for s in framework] == [1, 2, 3]
    assert all(_attribute(s, names.RECEIPT_STATE) is None for s in framework)
    views = served_views(read_spans(run.traces), store=run.store)
    assert [v.epoch for v in views] == [1, 2, 3]
    for view, request in zip(views, run.wire, strict=True):
        assert view.recorded_by == SDK_SCOPES[instrumentation]
        assert [c.scope for c in view.same_call] == [FRAMEWORK]
        assert names.GAP_NO_RUN_LOG not in view.gap_kinds, (view.epoch, view.gaps)
        verdict = verify(view)
        assert verdict.status in (VerdictStatus.VERIFIED, VerdictStatus.RECONSTRUCTED), verdict
        assert not verdict.mismatches
        wire = from_wire(request.path, request.body)
        found = differences(wire, from_view(view))
        assert found == [], (view.epoch, found)


def test_a_framework_span_that_is_not_the_call_keeps_its_own_epoch(tmp_path: Path) -> None:
    """The framework span asks for another model than the SDK call inside it: they are not one
    call, so each is an epoch of its own, numbered in start order without a gap."""
    import openai

    traces, store = tmp_path / "traces.jsonl", tmp_path / "store"
    provider = _provider("processor", traces, store)
    tracer = provider.get_tracer(FRAMEWORK)
    with (
        WireServer() as server,
        _instrumented("genai-openai", provider),
        openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="test") as client,
    ):
        history = [{"role": "user", "content": QUESTIONS[0]}]
        with af_otel.run(RUN):
            attributes = {**_framework_attributes(history), "gen_ai.request.model": "other-model"}
            with tracer.start_as_current_span("chat other-model", attributes=attributes):
                _call(client, history)
    provider.shutdown()
    views = served_views(read_spans(traces), store=store)
    assert [(v.epoch, v.recorded_by) for v in views] == [
        (1, FRAMEWORK),
        (2, SDK_SCOPES["genai-openai"]),
    ]
    assert all(names.GAP_NO_RUN_LOG not in v.gap_kinds for v in views)


def test_a_trusted_framework_scope_keeps_the_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``AF_OTEL_TRUSTED_SCOPE`` naming the framework, the SDK span started under its open
    span is the one folded (processor form: the framework span is its parent)."""
    monkeypatch.setenv("AF_OTEL_TRUSTED_SCOPE", FRAMEWORK)
    run = _agent("oi-openai", "processor", True, tmp_path)
    spans = run.spans()
    framework = [s for s in spans if s["scope"] == FRAMEWORK]
    sdk = [s for s in spans if s["scope"] == SDK_SCOPES["oi-openai"]]
    assert [_attribute(s, names.EPOCH) for s in framework] == [1, 2, 3]
    assert [_attribute(s, names.EPOCH_SAME_AS) for s in sdk] == [1, 2, 3]
    views = served_views(read_spans(run.traces), store=run.store)
    assert [(v.epoch, v.recorded_by) for v in views] == [(e, FRAMEWORK) for e in (1, 2, 3)]
    for view, request in zip(views, run.wire, strict=True):
        assert names.GAP_NO_RUN_LOG not in view.gap_kinds
        wire = from_wire(request.path, request.body)
        # The framework-like span records no dials: the view names them unrecorded (a gap).
        found = differences(wire, from_view(view))
        found = [d for d in found if d.field.removeprefix("params.") not in view.unrecorded]
        assert found == [], (view.epoch, found)
