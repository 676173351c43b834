"""The real openai client, over MockTransport, instrumented by opentelemetry-instrumentation-genai-openai:
the processor minting from content attributes and the hook minting with content off agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import names, read_spans, served_views, verify
from af_otel.processor import ReceiptSpanExporter, ReceiptSpanProcessor, completion_hook, run
from af_otel.reader import VerdictStatus
from af_otel.store import LocalStore
from tests.processor.fakes import instrumented_openai, weather_agent
from tests.processor.helpers import af, llm_spans, states

# The roles of the agent's last call: two questions, each answered after one tool call.
AGENT_ROLES = ["system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool"]
FINGERPRINTS = (
    names.RECEIPT_SYSTEM_HASH,
    names.RECEIPT_MESSAGES_CHAIN,
    names.RECEIPT_TOOLS_HASHES,
    names.RECEIPT_PARAMS,
    names.RECEIPT_MESSAGES_ADDED,
)  # not the digest: it binds each writer's own lane (af.epoch.lane)


def _agent(tmp_path: Path, *, hook: bool, form: str = "processor", wire: bool = False) -> list[Any]:
    """The agent's LLM spans; ``wire``: with the wire tap (the default of af_otel, off here so
    that these tests read what the instrumentation recorded)."""
    exporter = InMemorySpanExporter()
    store = LocalStore(tmp_path / f"store-{hook}-{form}")
    provider = TracerProvider()
    if form == "processor":
        provider.add_span_processor(
            ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=store, wire=wire)
        )
    else:
        exporting = ReceiptSpanExporter(exporter, store=store, wire=wire)
        provider.add_span_processor(SimpleSpanProcessor(exporting))
    options = {"completion_hook": completion_hook} if hook else {}
    with instrumented_openai(provider, **options) as client, run("same-run"):
        weather_agent(client, turns=2)
    provider.shutdown()
    return llm_spans(exporter.get_finished_spans())


def test_processor_with_content_and_hook_without_mint_the_same_receipts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same requests give the same system hash, messages chain and tool hashes either way."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    from_attributes = _agent(tmp_path, hook=False)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
    from_hook = _agent(tmp_path, hook=True)
    assert len(from_attributes) == len(from_hook) == 4
    for with_content, without in zip(from_attributes, from_hook, strict=True):
        assert "gen_ai.input.messages" in (with_content.attributes or {})
        assert "gen_ai.input.messages" not in (without.attributes or {})
        for key in FINGERPRINTS:
            assert af(with_content)[key] == af(without)[key], key


def test_content_on_through_the_exporter_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exporter form mints the same receipts as the processor form from the same spans."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    processor_form = _agent(tmp_path, hook=False)
    exporter_form = _agent(tmp_path, hook=False, form="exporter")
    for a, b in zip(processor_form, exporter_form, strict=True):
        for key in (*FINGERPRINTS, names.EPOCH, names.EPOCH_PARENT, names.GAPS):
            assert af(a)[key] == af(b)[key], key


def test_content_off_without_hook_is_an_honest_absence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No content and no hook: every call says no receipt, and why."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    spans = _agent(tmp_path, hook=False)
    assert spans
    for span in spans:
        assert af(span)[names.RECEIPT_STATE] == names.STATE_ABSENT
        assert af(span)[names.RECEIPT_ABSENT_REASON] == names.REASON_NOT_CAPTURED
        assert af(span)[names.GAP_NO_RECEIPT_ON_CHART] is True
        assert af(span)[names.RECEIPT_SOURCE] == names.SOURCE_INSTRUMENTATION


@pytest.mark.parametrize("form", ["processor", "exporter"])
def test_content_off_without_hook_mints_from_the_wire(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    """No content and no hook, but the wire tap on: every call is minted from the body the client
    sent, its payloads in the store only (the span shows no prompt), and each reads back
    verified with the conversation the client sent."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    spans = _agent(tmp_path, hook=False, form=form, wire=True)
    assert len(spans) == 4
    for span in spans:
        assert af(span)[names.RECEIPT_STATE] == names.STATE_MINTED
        assert af(span)[names.RECEIPT_SOURCE] == names.SOURCE_WIRE
        assert "gen_ai.input.messages" not in (span.attributes or {})
        assert all(names.COMMIT_VALUE not in dict(e.attributes or {}) for e in span.events)
    store = LocalStore(tmp_path / f"store-False-{form}")
    views = served_views(tuple(read_spans(spans)), store=store)
    assert [verify(v).status for v in views] == [VerdictStatus.VERIFIED] * 4
    assert views[-1].messages is not None
    roles = [m["role"] for m in views[-1].messages]
    assert roles == AGENT_ROLES


def test_commits_rebuild_the_conversation_the_client_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Folding the hook's commits gives the conversation of the last call, tool results included."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    spans = _agent(tmp_path, hook=True)
    folded = states(spans, LocalStore(tmp_path / "store-True-processor"))
    roles = [message["role"] for message in folded[4]["messages"]]
    assert roles == AGENT_ROLES


def test_a_body_the_tap_did_not_see_is_not_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client whose ``send`` bypasses httpx's own (it hands the request straight to its
    transport) sends a body the tap never sees: the receipt comes from genai-openai's record,
    which cannot show the ``tool_choice`` sent, so the call is not verified."""
    import httpx
    import openai

    from tests.processor.fakes import WEATHER_TOOL, _openai_reply

    class Bypass(httpx.Client):
        def send(self, request: httpx.Request, **_: Any) -> httpx.Response:
            response = self._transport.handle_request(request)
            response.request = request
            response.read()
            return response

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    exporter = InMemorySpanExporter()
    store = LocalStore(tmp_path / "store")
    provider = TracerProvider()
    provider.add_span_processor(ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=store))
    with instrumented_openai(provider), run("bypass"):
        client = openai.OpenAI(
            api_key="test", http_client=Bypass(transport=httpx.MockTransport(_openai_reply))
        )
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Weather in Oslo?"}],
            tools=[WEATHER_TOOL],
            tool_choice="required",
        )
    provider.shutdown()
    (span,) = llm_spans(exporter.get_finished_spans())
    assert af(span)[names.RECEIPT_SOURCE] == names.SOURCE_INSTRUMENTATION
    assert "tool_choice" in af(span)[names.RECEIPT_UNRECORDED]
    (view,) = served_views(tuple(read_spans([span])), store=store)
    assert verify(view).status is not VerdictStatus.VERIFIED
