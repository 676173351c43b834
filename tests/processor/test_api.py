"""The explicit API: af_otel.run scopes calls to a run, af_otel.llm_call records one call."""

from __future__ import annotations

import pytest
from opentelemetry import trace

from af_otel import Conversation, names
from af_otel.errors import RequestShapeError
from af_otel.processor import llm_call, run
from af_otel.store import Store
from tests.processor.conftest import Pipeline, make_pipeline
from tests.processor.helpers import SYSTEM, TOOLS, af, assistant, commits, llm_spans, states, user


@pytest.fixture
def global_pipeline(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> Pipeline:
    """llm_call uses the global tracer provider: point it at the test's pipeline."""
    monkeypatch.setattr(trace, "get_tracer", pipeline.provider.get_tracer)
    return pipeline


def test_llm_call_mints_without_writing_content(global_pipeline: Pipeline) -> None:
    """llm_call opens a GenAI span, mints its receipt and writes no content attribute."""
    with (
        run("explicit"),
        llm_call(
            model="gpt-4o",
            provider="openai",
            system="Be terse.",
            messages=[user("hi")],
            tools=TOOLS,
            params={"temperature": 0.3, "max_tokens": 50},
        ) as call,
    ):
        call.set_response("hello", input_tokens=3, output_tokens=1, finish_reason="stop")
    (span,) = llm_spans(global_pipeline.spans())
    attrs = span.attributes or {}
    assert span.name == "chat gpt-4o"
    assert span.kind is trace.SpanKind.CLIENT
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.temperature"] == 0.3
    assert attrs["gen_ai.usage.output_tokens"] == 1
    assert not any(k in attrs for k in ("gen_ai.input.messages", "gen_ai.output.messages"))
    assert af(span)[names.RUN_ID] == "explicit"
    assert af(span)[names.RECEIPT_STATE] == names.STATE_MINTED
    assert af(span)[names.RECEIPT_TOOLS_NAMES] == ("get_weather",)
    # af_otel sees what the caller says it sends, not the wire.
    assert names.GAP_CACHE_TRANSFORM in af(span)[names.GAPS]
    assert states(global_pipeline.spans(), global_pipeline.store)[1]["messages"] == [user("hi")]


def test_llm_call_captures_content_when_asked(global_pipeline: Pipeline) -> None:
    """capture_content=True writes the GenAI content attributes too."""
    with llm_call(
        model="m", provider="openai", messages=[user("hi")], capture_content=True
    ) as call:
        call.set_response("hello")
    (span,) = global_pipeline.spans()
    attrs = span.attributes or {}
    assert "gen_ai.input.messages" in attrs
    assert "gen_ai.output.messages" in attrs


def test_llm_calls_in_a_run_chain(global_pipeline: Pipeline) -> None:
    """Successive llm_call blocks in one run are epochs 1, 2 with appends between them."""
    history = [user("q0")]
    with run("chain"):
        for turn in range(3):
            with llm_call(model="m", provider="openai", system=SYSTEM, messages=history):
                pass
            history = [*history, assistant(f"a{turn}"), user(f"q{turn + 1}")]
    calls = llm_spans(global_pipeline.spans())
    assert [af(s)[names.EPOCH_PARENT] for s in calls] == [0, 1, 2]
    assert [c[names.COMMIT_VERB] for c in commits(calls[2])] == ["append"]


def test_run_frees_its_state_on_exit(global_pipeline: Pipeline) -> None:
    """Leaving the run block frees the run's state in the processor: the same run id entered again
    numbers its calls from 1 in a new lane, while inside one block they continue in one lane."""
    for _ in range(2):
        with run("short"):
            for _ in range(2):
                with llm_call(model="m", provider="openai", messages=[user("a")]):
                    pass
    calls = [af(s) for s in llm_spans(global_pipeline.spans())]
    assert [c[names.EPOCH] for c in calls] == [1, 2, 1, 2]
    lanes = [c[names.EPOCH_LANE] for c in calls]
    assert lanes[0] == lanes[1] != lanes[2] == lanes[3]


def test_bad_base_is_the_callers_error() -> None:
    """A base that is not request-shaped raises in the caller's code, before any call."""
    with pytest.raises(RequestShapeError), run("r", base={"messages": "not a list"}):
        pass


def test_llm_call_with_no_tracer_provider_does_nothing_harmful(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without an SDK (no-op tracer) llm_call still runs the block and raises nothing."""
    monkeypatch.setattr(trace, "get_tracer", trace.NoOpTracerProvider().get_tracer)
    ran = []
    with llm_call(model="m", provider="openai", messages=[user("a")]) as call:
        call.set_response("x", output_tokens=1)
        ran.append(True)
    assert ran == [True]


def test_exception_in_the_block_still_records_the_call(global_pipeline: Pipeline) -> None:
    """A call that fails in the caller's block is still minted and the error propagates."""
    with (
        pytest.raises(ValueError, match="model down"),
        llm_call(model="m", provider="openai", messages=[user("a")]),
    ):
        raise ValueError("model down")
    (span,) = global_pipeline.spans()
    assert af(span)[names.RECEIPT_STATE] == names.STATE_MINTED
    assert not span.status.is_ok


def test_content_none_opens_no_store(store: Store) -> None:
    """content='none' keeps no store: nothing of the conversation leaves the process."""
    made = make_pipeline(store, content="none")
    assert made.processor.engine.settings.store is None


def test_llm_call_reads_the_request_as_the_block_is_entered(global_pipeline: Pipeline) -> None:
    """What the caller changes in its dicts inside the block (after the call was made) is not
    the call's request: the receipt and the state are those of the request handed over."""
    message = user("as sent")
    with run("entered"), llm_call(model="m", provider="openai", messages=[message]):
        message["content"] = "changed later"
    (span,) = llm_spans(global_pipeline.spans())
    assert af(span)[names.RECEIPT_STATE] == names.STATE_MINTED
    assert states(global_pipeline.spans(), global_pipeline.store)[1]["messages"] == [
        user("as sent")
    ]


def test_llm_call_takes_a_conversation(global_pipeline: Pipeline) -> None:
    """A Conversation added to between calls records the run a list of the same dicts does."""
    conversation = Conversation([user("q1")])
    with run("conversation"):
        with llm_call(model="m", provider="openai", messages=conversation):
            pass
        conversation = conversation.add(assistant("a1"), user("q2"))
        with llm_call(model="m", provider="openai", messages=conversation):
            pass
    spans = llm_spans(global_pipeline.spans())
    assert [af(s)[names.RECEIPT_STATE] for s in spans] == [names.STATE_MINTED] * 2
    assert af(spans[1])[names.RECEIPT_MESSAGES_KEPT] == 1
    found = states(global_pipeline.spans(), global_pipeline.store)
    assert found[2]["messages"] == [user("q1"), assistant("a1"), user("q2")]


def test_a_conversation_captured_writes_the_content_a_list_writes(
    global_pipeline: Pipeline,
) -> None:
    """capture_content=True with a Conversation writes the content attributes a list writes."""
    messages = [user("q1"), assistant("a1"), user("q2")]
    for given in (messages, Conversation(messages)):
        with llm_call(model="m", provider="openai", messages=given, capture_content=True):
            pass
    listed, conversed = global_pipeline.spans()
    key = "gen_ai.input.messages"
    assert (conversed.attributes or {})[key] == (listed.attributes or {})[key]
