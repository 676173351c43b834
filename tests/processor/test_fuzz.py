"""Hostile attributes never raise into the caller and never cost a span: inner gets every one."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from af_otel import names
from af_otel.processor import ReceiptSpanExporter, ReceiptSpanProcessor
from af_otel.processor.engine import CallFacts
from af_otel.store import Store
from tests.processor.test_exporter import Keep

_CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.request.temperature",
    "gen_ai.request.stop_sequences",
    "af.run.id",
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "llm.input_messages.0.message.role",
    "llm.input_messages.7.message.content",
    "openinference.span.kind",
    "input.value",
    "gen_ai.prompt.3.content",
)
_scalars = st.one_of(
    st.text(max_size=40),
    st.integers(),
    st.floats(allow_nan=True),
    st.booleans(),
    st.lists(st.text(max_size=5), max_size=3),
    st.sampled_from(
        [
            "{",
            "[",
            "null",
            "[1,2",
            '[{"role":1}]',
            '[{"role":"user","parts":5}]',
            "chat",
            "LLM",
            "NaN",
        ]
    ),
)
_messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.one_of(st.sampled_from(["user", "assistant", "tool"]), st.integers())},
        optional={
            "parts": st.one_of(
                st.lists(
                    st.dictionaries(
                        st.sampled_from(
                            ["type", "content", "id", "arguments", "response", "signature"]
                        ),
                        st.one_of(st.text(max_size=10), st.integers(), st.none()),
                        max_size=4,
                    ),
                    max_size=3,
                ),
                st.text(max_size=5),
            ),
            "name": st.one_of(st.none(), st.integers(), st.text(max_size=3)),
        },
    ),
    max_size=4,
).map(json.dumps)
_attributes = st.dictionaries(
    st.sampled_from(_CONTENT_KEYS), st.one_of(_scalars, _messages), max_size=len(_CONTENT_KEYS)
)


class Count(SpanProcessor):
    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batch=st.lists(
        st.tuples(st.sampled_from(["chat m", "ChatCompletion", "x", ""]), _attributes),
        min_size=1,
        max_size=5,
    )
)
def test_processor_survives_hostile_attributes(
    store: Store, batch: list[tuple[str, dict[str, Any]]]
) -> None:
    """Whatever the attributes, every span reaches inner and none carries an internal error
    (strict mode is on under pytest, so an internal error would fail this test)."""
    inner = Count()
    provider = TracerProvider()
    provider.add_span_processor(ReceiptSpanProcessor(inner, store=store))
    tracer = provider.get_tracer("fuzz")
    with tracer.start_as_current_span("root"):
        for name, attributes in batch:
            span = tracer.start_span(name)
            span.set_attributes(attributes)
            span.end()
    assert len(inner.ended) == len(batch) + 1
    for span in inner.ended:
        assert (span.attributes or {}).get(names.RECEIPT_STATE) != names.STATE_ERROR


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batch=st.lists(_attributes, min_size=1, max_size=5))
def test_exporter_survives_hostile_attributes(store: Store, batch: list[dict[str, Any]]) -> None:
    """The exporter form exports every span of every batch."""
    keep = Keep()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ReceiptSpanExporter(keep, store=store)))
    tracer = provider.get_tracer("fuzz")
    for attributes in batch:
        span = tracer.start_span("chat m", attributes={"gen_ai.operation.name": "chat"})
        span.set_attributes(attributes)
        span.end()
    assert sum(len(b) for b in keep.batches) == len(batch)


class Hostile:
    """A value whose __str__ and __eq__ throw."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no eq")

    __hash__ = object.__hash__


def test_ten_megabyte_content_and_throwing_values(store: Store) -> None:
    """A 10 MB message and objects that throw on __str__ cost nothing but their own receipt."""
    inner = Count()
    provider = TracerProvider()
    provider.add_span_processor(ReceiptSpanProcessor(inner, store=store))
    tracer = provider.get_tracer("t")
    big = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "x" * 10_000_000}]}])
    span = tracer.start_span("chat m", attributes={"gen_ai.operation.name": "chat"})
    span.set_attribute("gen_ai.input.messages", big)
    span.end()
    # The SDK refuses such values itself; af_otel's engine is handed them directly too.
    processor = ReceiptSpanProcessor(Count(), store=store)
    facts = CallFacts(
        (1, 2),
        "chat m",
        1,
        2,
        {"gen_ai.operation.name": "chat", "gen_ai.input.messages": Hostile(), Hostile(): 1},
    )  # type: ignore[dict-item]
    enrichment = processor.engine.enrich(facts)
    assert enrichment.attributes[names.RECEIPT_STATE] == names.STATE_ABSENT
    (out,) = inner.ended
    assert (out.attributes or {})[names.RECEIPT_STATE] == names.STATE_MINTED
    ref = next(e for e in out.events if (e.attributes or {}).get(names.COMMIT_KEY) == "messages")
    assert (ref.attributes or {})[names.COMMIT_BYTES] > 10_000_000
