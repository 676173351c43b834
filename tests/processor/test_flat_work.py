"""A call's Python work does not grow with the run's history.

The cost curves in benchmarks/processor.py time a call at turn 1,000 against turn 10, and on a
shared machine the ratio moves with the cache the application's own work leaves. What they are
there to catch, a step that walks every message of the history per call, shows without a clock:
as function calls. Here each call's Python and builtin calls on the application's thread are
counted (``sys.setprofile``) at turn 30 and at turn 300 of one run, for the processor reading
``gen_ai.input.messages`` of one-line and of ~1 KB turns and for `llm_call` handed a list or a
`Conversation`. A step over every message would add one call or more per message, 540 or more
between the two; the bound is one call per ten messages. What still grows is C work on the text's
bytes (its prefix hashed 32 K characters at a time, the caller's list serialized 128 messages at a
time). The last test turns the run's memo off and sees the count grow, so the count can fail.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import Conversation, names
from af_otel.processor import ReceiptSpanProcessor, llm_call, run
from af_otel.semconv import incremental
from af_otel.store import LocalStore
from tests.builders import make_pipeline
from tests.counted import calls_in
from tests.processor.helpers import llm_spans, start_chat

EARLY, LATE = 30, 300
Turn = Callable[[int], list[dict[str, Any]]]


def one_line(index: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "parts": [{"type": "text", "content": f"Question {index}?"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": f"Answer {index}."}]},
    ]


def about_1_kb(index: int) -> list[dict[str, Any]]:
    document = "Billing settings are per workspace; admins can change plans. " * 16
    return [
        {"role": "user", "parts": [{"type": "text", "content": f"Question {index}: {document}"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": f"Answer {index}. " * 40}]},
    ]


def history(turn: Turn, turns: int) -> list[dict[str, Any]]:
    """The messages call ``turns`` sends: every earlier turn, then its question."""
    out = [message for index in range(turns - 1) for message in turn(index)]
    return [*out, turn(turns - 1)[0]]


def span_end_calls(tmp_path: Path, turn: Turn, late: int = LATE) -> dict[int, int]:
    """The calls of each LLM span's end along one run, by turn, through a real pipeline."""
    pipeline = make_pipeline(LocalStore(tmp_path / "store"))
    messages = history(turn, late)
    counts: dict[int, int] = {}
    try:
        for number in range(1, late + 1):
            span = start_chat(pipeline.tracer, **{names.RUN_ID: "r-flat"})
            span.set_attribute("gen_ai.input.messages", json.dumps(messages[: 2 * number - 1]))
            counts[number] = calls_in(span.end)
    finally:
        pipeline.provider.shutdown()
    assert_receipted(pipeline.exporter, late)
    return counts


def assert_receipted(exporter: InMemorySpanExporter, calls: int) -> None:
    """Every call was an LLM span af_otel receipted: what was counted is its work."""
    spans = exporter.get_finished_spans()
    assert len(llm_spans(spans)) == calls


def assert_flat(counts: dict[int, int], late: int = LATE) -> None:
    grown = counts[late] - counts[EARLY]
    messages = 2 * (late - EARLY)
    assert grown < messages / 10, (
        f"{counts[EARLY]} calls at turn {EARLY}, {counts[late]} at turn {late}: {grown} more"
        f" for {messages} more messages"
    )


@pytest.mark.parametrize("turn", [one_line, about_1_kb], ids=["one-line", "1-kb"])
def test_the_processors_span_end_does_not_walk_the_history(tmp_path: Path, turn: Turn) -> None:
    assert_flat(span_end_calls(tmp_path, turn))


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    made = TracerProvider()
    made.add_span_processor(ReceiptSpanProcessor(SimpleSpanProcessor(exporter), content="none"))
    yield made
    made.shutdown()


@pytest.mark.parametrize("form", ["list", "conversation"])
@pytest.mark.parametrize("turn", [one_line, about_1_kb], ids=["one-line", "1-kb"])
def test_llm_call_does_not_walk_the_history(
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    form: str,
    turn: Turn,
) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    messages = history(turn, LATE)
    conversation = Conversation()
    counts: dict[int, int] = {}
    with run(f"r-flat-{form}"):
        for number in range(1, LATE + 1):
            sent: Any = messages[: 2 * number - 1]
            if form == "conversation":
                conversation = conversation.add(*sent[len(conversation) :])
                sent = conversation

            def call(given: Any = sent) -> None:
                with llm_call(model="gpt-4o-mini", provider="openai", messages=given):
                    pass

            counts[number] = calls_in(call)
    assert_receipted(exporter, LATE)
    assert_flat(counts)


def test_the_count_sees_a_run_read_in_full_every_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the run's memo each call reads every message: the bound fails, by far."""
    monkeypatch.setattr(incremental, "_tail", lambda recorded, limits, seen: None)
    late = 3 * EARLY
    counts = span_end_calls(tmp_path, one_line, late)
    with pytest.raises(AssertionError):
        assert_flat(counts, late)
    assert counts[late] - counts[EARLY] > 2 * (late - EARLY)
