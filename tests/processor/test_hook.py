"""The util-genai completion hook: loaded by util-genai's own loader, minting on the live span with
content capture off, coordinated with the processor, chaining to the upload hook."""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util.genai.completion_hook import load_completion_hook

from af_otel import names, read_spans, served_views, verify
from af_otel.processor import ReceiptCompletionHook, completion_hook, run
from af_otel.processor import engine as engine_module
from af_otel.reader import VerdictStatus
from af_otel.store import LocalStore, Store
from tests.processor.conftest import Pipeline, make_pipeline
from tests.processor.fakes import WEATHER_TOOL, instrumented_openai, weather_agent
from tests.processor.helpers import af, commits, llm_spans, states


@pytest.fixture(autouse=True)
def _content_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)


@pytest.fixture
def record_only(store: Store) -> Iterator[Pipeline]:
    """A pipeline with the wire tap off: receipts come from what the instrumentation recorded,
    which is what the ledger tests below are about."""
    made = make_pipeline(store, wire=False)
    yield made
    made.provider.shutdown()


def test_util_genai_loader_finds_the_af_otel_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=af_otel loads af_otel's hook."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", "af_otel")
    loaded = load_completion_hook()
    assert isinstance(getattr(loaded, "_wrapped", None), ReceiptCompletionHook)


def test_hook_mints_with_content_capture_off(record_only: Pipeline) -> None:
    pipeline = record_only
    """With content capture off the span carries receipts and commits but no prompt attributes."""
    with (
        instrumented_openai(pipeline.provider, completion_hook=completion_hook) as client,
        run("hooked"),
    ):
        weather_agent(client, turns=2)
    calls = llm_spans(pipeline.spans())
    assert [af(s)[names.EPOCH] for s in calls] == [1, 2, 3, 4]
    assert [af(s)[names.EPOCH_PARENT] for s in calls] == [0, 1, 2, 3]
    for span in calls:
        attrs = span.attributes or {}
        assert af(span)[names.RECEIPT_STATE] == names.STATE_MINTED
        assert "gen_ai.input.messages" not in attrs
        assert "gen_ai.tool.definitions" not in attrs
        assert af(span)[names.RECEIPT_TOOLS_NAMES] == ("get_weather",)
        # The genai-openai span names api.openai.com and nothing stood between: no cache-transform.
        # genai-openai records no tool_choice nor parallel_tool_calls: with tools, they are named.
        # No gen_ai.output.type says no response_format; gpt-4o-mini takes no reasoning_effort.
        assert list(af(span)[names.GAPS]) == [names.GAP_UNRECORDED, names.GAP_PROVIDER_DEFAULTS]
        assert tuple(af(span)[names.RECEIPT_UNRECORDED]) == ("tool_choice", "parallel_tool_calls")
    seqs = [c[names.COMMIT_SEQ] for s in calls for c in commits(s)]
    assert seqs == list(range(1, len(seqs) + 1))
    folded = states(pipeline.spans(), pipeline.store)
    assert len(folded[4]["messages"]) == 8


@pytest.mark.parametrize(
    ("model", "extra", "unrecorded"),
    [
        # No output type on the span: no response_format; gpt-4o-mini takes no reasoning_effort.
        ("gpt-4o-mini", {}, ()),
        # The span says a format was set (gen_ai.output.type), not which schema.
        ("gpt-4o-mini", {"response_format": {"type": "json_object"}}, ("response_format",)),
        # A reasoning model may have been sent reasoning_effort, which genai-openai never records.
        ("o3-mini", {}, ("reasoning_effort",)),
        ("o3-mini", {"reasoning_effort": "low"}, ("reasoning_effort",)),
        # With tools, the tool settings are off the record too.
        ("gpt-4o-mini", {"tools": [WEATHER_TOOL]}, ("tool_choice", "parallel_tool_calls")),
    ],
)
def test_hook_names_exactly_what_genai_openai_cannot_show(
    record_only: Pipeline, model: str, extra: dict[str, Any], unrecorded: tuple[str, ...]
) -> None:
    """Through the real instrumentation and client, the receipt names as unrecorded exactly the
    fields this request may have set that genai-openai does not record; with none, no gap says
    so and the call reads back verified."""
    pipeline = record_only
    with (
        instrumented_openai(pipeline.provider, completion_hook=completion_hook) as client,
        run("ledger"),
    ):
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Say hi."}], **extra
        )
    (span,) = llm_spans(pipeline.spans())
    assert af(span)[names.RECEIPT_STATE] == names.STATE_MINTED
    got = tuple(af(span).get(names.RECEIPT_UNRECORDED, ()))
    assert got == unrecorded
    assert (names.GAP_UNRECORDED in af(span)[names.GAPS]) == bool(unrecorded)
    (view,) = served_views(tuple(read_spans(pipeline.spans())), store=pipeline.store)
    want = VerdictStatus.RECONSTRUCTED if unrecorded else VerdictStatus.VERIFIED
    assert verify(view).status is want
    assert view.unrecorded == unrecorded


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"response_format": {"type": "json_object"}},
        {"reasoning_effort": "low"},
        {"tools": [WEATHER_TOOL], "tool_choice": "required", "parallel_tool_calls": False},
    ],
)
def test_with_the_wire_tap_nothing_is_unrecorded(pipeline: Pipeline, extra: dict[str, Any]) -> None:
    """With the wire tap on (the default), the same calls are minted from the body the client
    sent: nothing is named unrecorded, the receipt's params hold every setting sent, no
    cache-transform (the client sent to api.openai.com), and the call reads back verified."""
    with (
        instrumented_openai(pipeline.provider, completion_hook=completion_hook) as client,
        run("wire"),
    ):
        client.chat.completions.create(
            model="o3-mini", messages=[{"role": "user", "content": "Say hi."}], **extra
        )
    (span,) = llm_spans(pipeline.spans())
    assert af(span)[names.RECEIPT_SOURCE] == names.SOURCE_WIRE
    assert tuple(af(span)[names.RECEIPT_UNRECORDED]) == ()
    assert names.GAP_CACHE_TRANSFORM not in af(span)[names.GAPS]
    assert "gen_ai.input.messages" not in (span.attributes or {})
    assert all(names.COMMIT_VALUE not in c for c in commits(span))  # capture off: store only
    (view,) = served_views(tuple(read_spans(pipeline.spans())), store=pipeline.store)
    assert verify(view).status is VerdictStatus.VERIFIED
    assert view.params is not None
    for key in ("response_format", "reasoning_effort", "tool_choice", "parallel_tool_calls"):
        assert view.params.get(key) == extra.get(key)


def test_hook_without_processor_writes_onto_the_live_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hook-only setups (no af_otel processor) still get receipts on the exported span."""
    monkeypatch.setenv("AF_OTEL_STORE", str(tmp_path / "hook-store"))
    monkeypatch.setattr(engine_module, "_live", weakref.WeakSet())
    monkeypatch.setattr(engine_module, "_default", None)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with (
        instrumented_openai(provider, completion_hook=completion_hook) as client,
        provider.get_tracer("agent").start_as_current_span("agent"),
    ):
        weather_agent(client, turns=1)
    calls = llm_spans(exporter.get_finished_spans())
    assert [af(s)[names.EPOCH] for s in calls] == [1, 2]
    assert all(af(s)[names.RECEIPT_STATE] == names.STATE_MINTED for s in calls)
    folded = states(exporter.get_finished_spans(), LocalStore(tmp_path / "hook-store"))
    assert len(folded[2]["messages"]) == 4


@pytest.fixture
def upload_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    target = tmp_path / "uploads"
    target.mkdir()
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH", target.as_uri())
    monkeypatch.setenv("AF_OTEL_CHAIN_HOOK", "upload")
    return target


def test_chains_to_the_upload_hook(pipeline: Pipeline, upload_dir: Path) -> None:
    """AF_OTEL_CHAIN_HOOK=upload: af_otel mints, then util-genai's upload hook still uploads."""
    hook = ReceiptCompletionHook()
    try:
        with instrumented_openai(pipeline.provider, completion_hook=hook) as client:
            weather_agent(client, turns=1)
    finally:
        chained = hook._chained()
        assert chained is not None
        chained.shutdown()
    calls = llm_spans(pipeline.spans())
    assert calls
    for span in calls:
        attrs = span.attributes or {}
        assert af(span)[names.RECEIPT_STATE] == names.STATE_MINTED
        assert str(attrs["gen_ai.input.messages_ref"]).startswith("file://")
    assert any(upload_dir.iterdir())


@pytest.mark.parametrize("chain", [None, "none"], ids=["upload-base-set", "opted-out"])
def test_the_loader_path_chains_the_upload_hook_when_its_base_is_set(
    pipeline: Pipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chain: str | None
) -> None:
    """util-genai loads one hook by name; with ``af_otel`` named there and the upload hook's base
    path set, both run without AF_OTEL_CHAIN_HOOK: af_otel mints, the upload hook uploads and
    stamps its refs. ``AF_OTEL_CHAIN_HOOK=none`` keeps af_otel's alone."""
    target = tmp_path / "uploads"
    target.mkdir()
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", "af_otel")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH", target.as_uri())
    if chain is None:
        monkeypatch.delenv("AF_OTEL_CHAIN_HOOK", raising=False)
    else:
        monkeypatch.setenv("AF_OTEL_CHAIN_HOOK", chain)
    loaded = load_completion_hook()
    try:
        with instrumented_openai(pipeline.provider, completion_hook=loaded) as client:
            weather_agent(client, turns=1)
    finally:
        loaded._wrapped.shutdown()  # type: ignore[attr-defined]  # util-genai's safe wrapper
    calls = llm_spans(pipeline.spans())
    assert len(calls) == 2
    uploaded = sorted(p.name for p in target.iterdir())
    for span in calls:
        attrs = span.attributes or {}
        assert af(span)[names.RECEIPT_STATE] == names.STATE_MINTED
        if chain is None:
            for key in ("gen_ai.input.messages_ref", "gen_ai.output.messages_ref"):
                assert str(attrs[key]).rsplit("/", 1)[-1] in uploaded
        else:
            assert not any(key.endswith("_ref") for key in attrs)
    assert len(uploaded) == (5 if chain is None else 0)  # 2 inputs, 2 outputs, 1 tool list


def test_hook_failure_never_reaches_the_application(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside strict mode a failing mint leaves the call intact and the span says it failed."""
    monkeypatch.delenv("AF_OTEL_STRICT")

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("af_otel.processor.hook.mint_on_span", broken)
    with instrumented_openai(pipeline.provider, completion_hook=completion_hook) as client:
        weather_agent(client, turns=1)
    calls = llm_spans(pipeline.spans())
    assert calls
    for span in calls:
        assert af(span)[names.RECEIPT_STATE] == names.STATE_ERROR
        assert af(span)[names.RECEIPT_ABSENT_REASON] == names.REASON_INTERNAL_ERROR
        assert list(af(span)[names.GAPS]) == [names.GAP_NO_RECEIPT]


def test_without_util_genais_serializer_the_hook_mints_nothing_else(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No util-genai serializer: the span carries state error, never a receipt of another JSON."""
    monkeypatch.delenv("AF_OTEL_STRICT")
    with instrumented_openai(pipeline.provider, completion_hook=completion_hook) as client:
        # Blocked only once the instrumentation is up: the hook's own import is what fails.
        monkeypatch.setitem(sys.modules, "opentelemetry.util.genai.utils", None)
        weather_agent(client, turns=1)
    calls = llm_spans(pipeline.spans())
    assert calls
    assert {af(s)[names.RECEIPT_STATE] for s in calls} == {names.STATE_ERROR}
    assert not any(names.RECEIPT_DIGEST in af(s) for s in calls)


@pytest.mark.parametrize("wire", [False, True])
def test_a_limits_cut_in_the_hook_form_is_a_gap_not_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: bool
) -> None:
    """Hook-only, on a span at its attribute limit: writing the receipt evicts instrumentation
    attributes. The af-2 digest binds af.gaps as sealed, so the hook must not rewrite them after
    sealing; the reader names the cut from the span's own dropped count. Never damaged."""
    monkeypatch.setenv("AF_OTEL_STORE", str(tmp_path / "hook-store"))
    monkeypatch.setenv("AF_OTEL_WIRE", "on" if wire else "off")
    monkeypatch.setattr(engine_module, "_live", weakref.WeakSet())
    monkeypatch.setattr(engine_module, "_default", None)
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=30))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with (
        instrumented_openai(provider, completion_hook=completion_hook) as client,
        provider.get_tracer("agent").start_as_current_span("agent"),
    ):
        weather_agent(client, turns=1)
    spans = exporter.get_finished_spans()
    calls = llm_spans(spans)
    assert calls
    assert all(af(s)[names.RECEIPT_SCHEME] == names.SCHEME_2 for s in calls)
    assert any(s.dropped_attributes for s in calls)  # the limit did cut
    views = served_views(tuple(read_spans(spans)), store=LocalStore(tmp_path / "hook-store"))
    assert len(views) == len(calls)
    for view in views:
        verdict = verify(view)
        assert verdict.status is not VerdictStatus.DAMAGED, verdict.reason
        # A call minted from the wire was not cut by the span's limits (docs/reader.md); one read
        # off the span was, and says so.
        cut = names.GAP_SPAN_LIMITS in {g.kind for g in view.gaps}
        assert cut is (view.source != names.SOURCE_WIRE)
