"""ReceiptSpanProcessor: what reaches the inner processor, for LLM calls and for every other span."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import names
from af_otel.canonical import canonical_json
from af_otel.processor import ReceiptSpanProcessor
from af_otel.store import Store
from tests.processor.conftest import Pipeline, make_pipeline
from tests.processor.helpers import (
    af,
    assistant,
    chat,
    commits,
    end_attributes,
    llm_spans,
    start_chat,
    states,
    stored,
    user,
)


class Recorder(SpanProcessor):
    """An inner processor that keeps what it was handed."""

    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []
        self.flushed = 0
        self.shut = False

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.flushed += 1
        return True

    def shutdown(self) -> None:
        self.shut = True


def test_other_spans_pass_through_as_the_same_object(store: Store) -> None:
    """A span that is not an LLM call reaches inner as the very object the SDK handed over."""
    inner = Recorder()
    provider = TracerProvider()
    provider.add_span_processor(ReceiptSpanProcessor(inner, store=store))
    seen: list[ReadableSpan] = []

    class Spy(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            seen.append(span)

    provider.add_span_processor(Spy())
    with provider.get_tracer("t").start_as_current_span("http GET", attributes={"a": 1}):
        pass
    assert len(inner.ended) == 1
    assert inner.ended[0] is not None
    assert dict(inner.ended[0].attributes or {}) == {"a": 1}
    assert names.RECEIPT_STATE not in (seen[0].attributes or {})


def test_llm_call_reaches_inner_as_an_enriched_copy(pipeline: Pipeline) -> None:
    """The exported copy carries run, epoch, receipt, gaps and commits; other spans' view is untouched."""
    seen: list[ReadableSpan] = []

    class Spy(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            seen.append(span)

    pipeline.provider.add_span_processor(Spy())
    chat(pipeline.tracer, [user("Weather in Paris?")])
    (span,) = pipeline.spans()
    attrs = af(span)
    assert attrs[names.RECEIPT_STATE] == names.STATE_MINTED
    assert attrs[names.EPOCH] == 1
    assert attrs[names.EPOCH_PARENT] == 0
    assert attrs[names.RUN_ID] == format(span.context.trace_id, "032x")
    assert attrs[names.GAP_NO_RECEIPT_ON_CHART] is False
    # The test's tracer is no instrumentation af_otel knows: it records only what it wrote, so
    # every dial it did not write is unrecorded rather than a provider default.
    assert list(attrs[names.GAPS]) == [names.GAP_UNRECORDED, names.GAP_CACHE_TRANSFORM]
    assert [c[names.COMMIT_KEY] for c in commits(span)] == [
        "system",
        "messages",
        "tools",
        "params",
        "model",
        "provider",
    ]
    assert [c[names.COMMIT_SEQ] for c in commits(span)] == [1, 2, 3, 4, 5, 6]
    # The SDK's own span (seen by a processor af_otel does not wrap) was not touched.
    assert names.RECEIPT_STATE not in (seen[0].attributes or {})
    assert not seen[0].events
    assert span.name == seen[0].name
    assert span.context == seen[0].context
    assert span.start_time == seen[0].start_time
    assert span.end_time == seen[0].end_time
    assert span.instrumentation_scope == seen[0].instrumentation_scope
    assert span.resource == seen[0].resource


def test_dropped_counts_survive_the_copy(store: Store) -> None:
    """A span the SDK cut keeps its dropped counts on the copy, and says span-limits."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=6, max_events=1))
    provider.add_span_processor(ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=store))
    span = start_chat(provider.get_tracer("t"))
    span.set_attributes(end_attributes([user("hi")]))
    span.set_attribute("extra.1", 1)
    span.add_event("e1")
    span.add_event("e2")
    span.end()
    (out,) = exporter.get_finished_spans()
    assert out.dropped_attributes == 2
    assert out.dropped_events == 1
    assert names.GAP_SPAN_LIMITS in af(out)[names.GAPS]


def test_multi_turn_epochs_parents_and_appends(pipeline: Pipeline) -> None:
    """Sequential calls chain parents; only the new messages travel as an append."""
    history = [user("q0")]
    with pipeline.tracer.start_as_current_span("agent"):
        for turn in range(4):
            chat(pipeline.tracer, history)
            history = [*history, assistant(f"a{turn}"), user(f"q{turn + 1}")]
    calls = llm_spans(pipeline.spans())
    assert [af(s)[names.EPOCH] for s in calls] == [1, 2, 3, 4]
    assert [af(s)[names.EPOCH_PARENT] for s in calls] == [0, 1, 2, 3]
    for span in calls[1:]:
        (commit,) = commits(span)
        assert commit[names.COMMIT_VERB] == "append"
        assert len(json.loads(commit[names.COMMIT_VALUE])) == 2
        assert af(span)[names.RECEIPT_MESSAGES_KEPT] == af(span)[names.RECEIPT_MESSAGES_COUNT] - 2
    seqs = [c[names.COMMIT_SEQ] for s in calls for c in commits(s)]
    assert seqs == list(range(1, len(seqs) + 1))
    folded = states(pipeline.spans(), pipeline.store)
    assert len(folded[4]["messages"]) == 7


def test_changed_system_is_a_set_and_removed_tools_a_delete(pipeline: Pipeline) -> None:
    """A changed key is written whole; a key the call lacks is deleted."""
    with pipeline.tracer.start_as_current_span("agent"):
        chat(pipeline.tracer, [user("a")])
        chat(pipeline.tracer, [user("a")], system=[{"type": "text", "content": "new"}], tools=None)
    second = llm_spans(pipeline.spans())[1]
    assert [(c[names.COMMIT_KEY], c[names.COMMIT_VERB]) for c in commits(second)] == [
        ("system", "set"),
        ("tools", "delete"),
    ]


def test_rewritten_history_is_a_set(pipeline: Pipeline) -> None:
    """When the parent's messages are not a prefix, the whole list is set."""
    with pipeline.tracer.start_as_current_span("agent"):
        chat(pipeline.tracer, [user("a"), assistant("b"), user("c")])
        chat(pipeline.tracer, [user("summary"), user("c")])
    second = llm_spans(pipeline.spans())[1]
    (commit,) = commits(second)
    assert (commit[names.COMMIT_KEY], commit[names.COMMIT_VERB]) == ("messages", "set")


def test_large_payload_goes_to_the_store(pipeline: Pipeline) -> None:
    """A payload over the inline limit travels as a store address with its size."""
    big = "x" * 5000
    chat(pipeline.tracer, [user(big)])
    (span,) = pipeline.spans()
    by_key = {c[names.COMMIT_KEY]: c for c in commits(span)}
    messages = by_key["messages"]
    assert names.COMMIT_VALUE not in messages
    assert messages[names.COMMIT_REF].startswith("sha256:")
    payload = stored(pipeline.store, messages[names.COMMIT_REF])
    assert len(canonical_json(payload)) == messages[names.COMMIT_BYTES]
    assert payload[0]["parts"][0]["content"] == big


def test_content_store_keeps_only_addresses_in_the_trace(store: Store) -> None:
    """content='store' puts every payload in the store."""
    made = make_pipeline(store, content="store")
    chat(made.tracer, [user("hi")])
    (span,) = made.spans()
    assert all(names.COMMIT_VALUE not in c and names.COMMIT_REF in c for c in commits(span))
    assert states(made.spans(), store)[1]["messages"] == [user("hi")]


def test_content_none_records_receipts_and_changed_keys_only(store: Store) -> None:
    """content='none' writes key, verb and size of each commit, and no payload at all."""
    made = make_pipeline(store, content="none")
    chat(made.tracer, [user("hi")])
    (span,) = made.spans()
    assert af(span)[names.RECEIPT_STATE] == names.STATE_MINTED
    for commit in commits(span):
        assert names.COMMIT_VALUE not in commit
        assert names.COMMIT_REF not in commit
        assert commit[names.COMMIT_BYTES] > 0


def test_strip_instrumentation_content(store: Store) -> None:
    """strip_instrumentation_content drops the instrumentation's content keys from the copy only."""
    made = make_pipeline(store, strip_instrumentation_content=True)
    chat(made.tracer, [user("hi")])
    (span,) = made.spans()
    keys = set(span.attributes or {})
    assert "gen_ai.input.messages" not in keys
    assert "gen_ai.system_instructions" not in keys
    assert "gen_ai.tool.definitions" not in keys
    assert "gen_ai.request.temperature" in keys
    assert af(span)[names.RECEIPT_STATE] == names.STATE_MINTED


def test_first_call_with_history_stores_a_base(pipeline: Pipeline) -> None:
    """A run whose first call carries earlier turns stores that state as its base, commits nothing."""
    history = [user("q0"), assistant("a0"), user("q1")]
    with pipeline.tracer.start_as_current_span("agent"):
        chat(pipeline.tracer, history)
        chat(pipeline.tracer, [*history, assistant("a1"), user("q2")])
    first, second = llm_spans(pipeline.spans())
    address = af(first)[names.RUN_BASE]
    base = stored(pipeline.store, address)
    assert isinstance(base, dict)
    assert base["messages"] == history
    assert commits(first) == []
    assert af(first)[names.RECEIPT_MESSAGES_KEPT] == 3
    assert af(second)[names.RUN_BASE] == address
    assert [c[names.COMMIT_SEQ] for c in commits(second)] == [1]
    folded = states(pipeline.spans(), pipeline.store, base)
    assert len(folded[2]["messages"]) == 5


def test_absent_content_gives_an_absent_receipt(pipeline: Pipeline) -> None:
    """No content captured: the receipt is absent with its reason, and no-receipt-on-chart is set."""
    span = start_chat(pipeline.tracer)
    span.set_attribute("gen_ai.request.temperature", 0.1)
    span.end()
    (out,) = pipeline.spans()
    attrs = af(out)
    assert attrs[names.RECEIPT_STATE] == names.STATE_ABSENT
    assert attrs[names.RECEIPT_ABSENT_REASON] == names.REASON_NOT_CAPTURED
    assert attrs[names.GAP_NO_RECEIPT_ON_CHART] is True
    assert attrs[names.GAPS][0] == names.GAP_NO_RECEIPT
    assert commits(out) == []


def test_internal_failure_still_forwards_the_span_marked_error(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When af_otel's own work fails the span still reaches inner, with state error; under pytest
    the failure is re-raised after forwarding so bugs fail loudly."""
    inner = Recorder()
    processor = ReceiptSpanProcessor(inner, store=store)
    provider = TracerProvider()
    provider.add_span_processor(processor)

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(processor.engine, "enrich", broken)
    with pytest.raises(RuntimeError, match="boom"):
        chat(provider.get_tracer("t"), [user("hi")])
    (span,) = inner.ended
    assert af(span)[names.RECEIPT_STATE] == names.STATE_ERROR
    assert af(span)[names.RECEIPT_ABSENT_REASON] == names.REASON_INTERNAL_ERROR
    assert af(span)[names.GAP_NO_RECEIPT_ON_CHART] is True


def test_internal_failure_is_silent_outside_strict_mode(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without strict mode the application never sees af_otel's failure."""
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.delenv("AF_OTEL_STRICT", raising=False)
    inner = Recorder()
    processor = ReceiptSpanProcessor(inner, store=store)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    monkeypatch.setattr(processor.engine, "enrich", lambda *a, **k: 1 / 0)
    for _ in range(3):
        chat(provider.get_tracer("t"), [user("hi")])
    assert len(inner.ended) == 3
    assert all(af(s)[names.RECEIPT_STATE] == names.STATE_ERROR for s in inner.ended)


def test_sdk_disabled_passes_everything_through(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OTEL_SDK_DISABLED=true makes the processor a pass-through."""
    made = Recorder()
    provider = TracerProvider()
    provider.add_span_processor(made)
    chat(provider.get_tracer("t"), [user("hi")])
    (ended,) = made.ended
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    inner = Recorder()
    ReceiptSpanProcessor(inner, store=store).on_end(ended)
    assert inner.ended == [ended]
    assert inner.ended[0] is ended


def test_flush_and_shutdown_reach_inner(store: Store) -> None:
    """force_flush and shutdown are passed to inner."""
    inner = Recorder()
    processor = ReceiptSpanProcessor(inner, store=store)
    assert processor.force_flush() is True
    processor.shutdown()
    assert inner.flushed == 1
    assert inner.shut


def test_root_span_end_frees_the_trace_run(pipeline: Pipeline) -> None:
    """A trace-id run is freed when its local root span ends."""
    with pipeline.tracer.start_as_current_span("agent"):
        chat(pipeline.tracer, [user("a")])
        assert len(pipeline.processor.engine.runs) == 1
    assert len(pipeline.processor.engine.runs) == 0


def test_run_id_attribute_names_the_run(pipeline: Pipeline) -> None:
    """An af.run.id attribute on the span puts calls of two traces into one run."""
    for text in ("a", "b"):
        span = start_chat(pipeline.tracer, **{names.RUN_ID: "run-7"})
        span.set_attributes(end_attributes([user(text)]))
        span.end()
    first, second = llm_spans(pipeline.spans())
    assert af(second)[names.RUN_ID] == "run-7"
    assert (af(first)[names.EPOCH], af(second)[names.EPOCH]) == (1, 2)
    assert af(second)[names.EPOCH_PARENT] == 1


def test_call_recognized_only_at_end_is_numbered_then(pipeline: Pipeline) -> None:
    """A span whose operation name arrives late is still an LLM call, numbered at its end."""
    span = pipeline.tracer.start_span("llm")
    span.set_attributes({**end_attributes([user("a")]), "gen_ai.operation.name": "chat"})
    span.end()
    (out,) = pipeline.spans()
    assert af(out)[names.EPOCH] == 1
    assert af(out)[names.RECEIPT_STATE] == names.STATE_MINTED
