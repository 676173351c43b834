"""Runs found without `af_otel.run`: from ``af.run.id``, the conversation id (on the span or carried
by util-genai on the context), the enclosing agent span, else the trace; an explicit block wins."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer
from opentelemetry.util.genai.handler import TelemetryHandler

from af_otel import names
from af_otel.cli import main
from af_otel.processor import ReceiptSpanExporter, RunTagger, run, run_discovery
from af_otel.processor.engine import trace_run_id
from af_otel.store import LocalStore, Store
from tests.processor.conftest import Pipeline, make_pipeline
from tests.processor.fakes import instrumented_openai, openai_client, weather_agent
from tests.processor.helpers import af, assistant, chat, llm_spans, user
from tests.reader.recordings import file_recorder


def runs_of(spans: Any) -> list[str]:
    return [af(s)[names.RUN_ID] for s in llm_spans(spans)]


def epochs_of(spans: Any) -> list[tuple[str, int, int]]:
    return [
        (af(s)[names.RUN_ID], af(s)[names.EPOCH], af(s)[names.EPOCH_PARENT])
        for s in llm_spans(spans)
    ]


def agent_span(tracer: Tracer, name: str = "travel", **attributes: Any) -> Any:
    """A hand-made GenAI agent span, as a framework without util-genai writes one."""
    return tracer.start_as_current_span(
        f"invoke_agent {name}", attributes={"gen_ai.operation.name": "invoke_agent", **attributes}
    )


def two_turns(tracer: Tracer, topic: str) -> None:
    """Two calls of one conversation: the second holds the first's exchange."""
    first = [user(f"{topic}?")]
    chat(tracer, first)
    chat(tracer, [*first, assistant(f"{topic}!"), user("and then?")])


def test_two_util_genai_conversations_in_one_trace_are_two_runs(pipeline: Pipeline) -> None:
    """Calls inside util-genai agent invocations of two conversation ids, under one root span,
    file under their conversations: two runs of two epochs each, one trace."""
    handler = TelemetryHandler(tracer_provider=pipeline.provider)
    with pipeline.tracer.start_as_current_span("request"):
        for conversation in ("conv-a", "conv-b"):
            with handler.invoke_local_agent(agent_name="travel", conversation_id=conversation):
                two_turns(pipeline.tracer, conversation)
    calls = llm_spans(pipeline.spans())
    assert len({s.context.trace_id for s in calls if s.context is not None}) == 1
    assert epochs_of(pipeline.spans()) == [
        ("conv-a", 1, 0),
        ("conv-a", 2, 1),
        ("conv-b", 1, 0),
        ("conv-b", 2, 1),
    ]


def test_a_provider_instrumentation_span_takes_the_agent_conversation(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real genai-openai chat spans inside a util-genai agent invocation (which they know
    nothing of) take its conversation id: the context carries it to their start."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    pipeline = make_pipeline(store, wire=False)
    handler = TelemetryHandler(tracer_provider=pipeline.provider)
    with instrumented_openai(pipeline.provider) as client:
        with handler.invoke_local_agent(agent_name="weather", conversation_id="conv-w"):
            weather_agent(client, turns=1)
        weather_agent(client, turns=1)  # outside any agent: its own trace per call
    pipeline.provider.shutdown()
    found = runs_of(pipeline.spans())
    calls = llm_spans(pipeline.spans())
    assert found[:2] == ["conv-w", "conv-w"]
    outside = [trace_run_id(s.context.trace_id) for s in calls[2:] if s.context is not None]
    assert found[2:] == outside
    assert [af(s)[names.EPOCH_PARENT] for s in calls[:2]] == [0, 1]


def test_one_conversation_over_three_traces_is_one_run(pipeline: Pipeline) -> None:
    """Three requests, each its own trace, of one conversation id: one run, one lane, numbered
    1, 2, 3 with each turn's parent the one before."""
    handler = TelemetryHandler(tracer_provider=pipeline.provider)
    history: list[dict[str, Any]] = []
    for turn in range(3):
        history.append(user(f"question {turn}"))
        with handler.invoke_local_agent(agent_name="travel", conversation_id="conv-long"):
            chat(pipeline.tracer, history)
        history.append(assistant(f"answer {turn}"))
    calls = llm_spans(pipeline.spans())
    assert len({s.context.trace_id for s in calls if s.context is not None}) == 3
    assert epochs_of(pipeline.spans()) == [
        ("conv-long", 1, 0),
        ("conv-long", 2, 1),
        ("conv-long", 3, 2),
    ]
    assert len({af(s)[names.EPOCH_LANE] for s in calls}) == 1


def test_hand_made_agent_spans_in_one_trace_are_one_run_each(pipeline: Pipeline) -> None:
    """Two agent spans without conversation ids under one root: each is a run (named by its trace
    and span id); a call under a tool span under the agent still finds it; a call outside both
    stays in the trace's run."""
    tracer = pipeline.tracer
    agents = []
    with tracer.start_as_current_span("request"):
        for topic in ("paris", "rome"):
            with agent_span(tracer, topic) as agent, tracer.start_as_current_span("execute_tool"):
                agents.append(agent.get_span_context())
                two_turns(tracer, topic)
        chat(tracer, [user("outside")])
    expected = [run_discovery.span_run_id((a.trace_id, a.span_id)) for a in agents]
    trace = trace_run_id(agents[0].trace_id)
    assert runs_of(pipeline.spans()) == [expected[0]] * 2 + [expected[1]] * 2 + [trace]
    assert [e[1:] for e in epochs_of(pipeline.spans())] == [(1, 0), (2, 1), (1, 0), (2, 1), (1, 0)]


@pytest.mark.parametrize(
    ("name", "attributes"),
    [
        ("invoke_agent travel", {}),  # named by the conventions, no operation attribute
        ("handle_conversation_turn", {"gen_ai.operation.name": "handle_conversation_turn"}),
        ("internal", {"gen_ai.operation.name": "invocation.internal"}),
        ("workflow", {"gen_ai.operation.name": "invoke_workflow"}),
        ("Agent", {"openinference.span.kind": "AGENT"}),
        ("travel.agent", {"traceloop.span.kind": "agent"}),
    ],
)
def test_each_kind_of_agent_span_encloses_its_calls(
    pipeline: Pipeline, name: str, attributes: dict[str, Any]
) -> None:
    """Every agent span form of the GenAI and framework conventions gives its calls its run."""
    with pipeline.tracer.start_as_current_span(name, attributes=attributes) as agent:
        chat(pipeline.tracer, [user("hi")])
    context = agent.get_span_context()
    assert runs_of(pipeline.spans()) == [
        run_discovery.span_run_id((context.trace_id, context.span_id))
    ]


def test_a_chain_span_is_not_an_agent(pipeline: Pipeline) -> None:
    """A span of another kind (a chain, a tool) gives no run of its own: the trace's run."""
    tracer = pipeline.tracer
    with tracer.start_as_current_span("chain", attributes={"openinference.span.kind": "CHAIN"}):
        chat(tracer, [user("hi")])
    calls = llm_spans(pipeline.spans())
    assert calls[0].context is not None
    assert runs_of(pipeline.spans()) == [trace_run_id(calls[0].context.trace_id)]


def test_an_agent_span_conversation_attribute_names_the_run(pipeline: Pipeline) -> None:
    """An agent span that records its conversation at its start (as ADK does) gives that id, also
    to calls in a second trace under another agent span of the same conversation."""
    for _ in range(2):
        with agent_span(pipeline.tracer, **{"gen_ai.conversation.id": "session-7"}):
            chat(pipeline.tracer, [user("hi")])
    assert epochs_of(pipeline.spans()) == [("session-7", 1, 0), ("session-7", 2, 1)]


def test_the_order_of_the_rules(pipeline: Pipeline) -> None:
    """af.run.id beats the conversation id, which beats the enclosing agent span; an explicit
    `af_otel.run` beats them all."""
    tracer = pipeline.tracer
    handler = TelemetryHandler(tracer_provider=pipeline.provider)
    with agent_span(tracer, **{"gen_ai.conversation.id": "agent-conv"}):
        chat(tracer, [user("1")])
        span = tracer.start_span("chat m", attributes={**call_start(), names.RUN_ID: "attr-run"})
        span.end()
        with tracer.start_as_current_span("chat m", attributes=call_start()) as inner:
            inner.set_attribute("gen_ai.conversation.id", "own-conv")  # at the end: too late
        own = tracer.start_span(
            "chat m", attributes={**call_start(), "gen_ai.conversation.id": "c"}
        )
        own.end()
    with run("explicit"), handler.invoke_local_agent(conversation_id="ambient-conv"):
        chat(tracer, [user("2")])
    assert runs_of(pipeline.spans()) == ["agent-conv", "attr-run", "agent-conv", "c", "explicit"]


def call_start() -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "m",
    }


def test_open_agent_spans_are_remembered_until_they_end_and_no_longer(pipeline: Pipeline) -> None:
    """The table holds the spans open under agent spans and none once they end; an agent span's
    own run is freed from the run table when it ends."""
    tracer = pipeline.tracer
    enclosing = pipeline.processor.engine.enclosing
    with agent_span(tracer) as agent:
        with tracer.start_as_current_span("tool"):
            assert len(enclosing._open) == 2
            chat(tracer, [user("hi")])
        context = agent.get_span_context()
    run_id = run_discovery.span_run_id((context.trace_id, context.span_id))
    assert runs_of(pipeline.spans()) == [run_id]
    assert len(enclosing._open) == 0
    assert pipeline.processor.engine.runs.peek(run_id) is None


def test_the_table_is_bounded(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    """Agent spans that never end hold at most MAX_ENCLOSED entries; the oldest go first."""
    monkeypatch.setattr(run_discovery, "MAX_ENCLOSED", 4)
    spans = [pipeline.tracer.start_span("invoke_agent a") for _ in range(10)]
    enclosing = pipeline.processor.engine.enclosing
    assert len(enclosing._open) == 4
    last = spans[-1].get_span_context()
    assert (last.trace_id, last.span_id) in enclosing._open
    for span in spans:
        span.end()
    assert len(enclosing._open) == 0


def test_odd_values_fall_back_and_never_raise(pipeline: Pipeline) -> None:
    """A conversation id that is not a string, or empty, is not one: the agent span names it."""
    tracer = pipeline.tracer
    with agent_span(tracer, **{"gen_ai.conversation.id": 7}) as agent:
        span = tracer.start_span(
            "chat m", attributes={**call_start(), "gen_ai.conversation.id": ""}
        )
        span.end()
    context = agent.get_span_context()
    assert runs_of(pipeline.spans()) == [
        run_discovery.span_run_id((context.trace_id, context.span_id))
    ]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_forked_child_starts_with_no_open_agent_spans(pipeline: Pipeline) -> None:
    """A child forked while an agent span is open remembers none of the parent's spans; a call it
    makes outside any agent span of its own is in its trace's run."""
    enclosing = pipeline.processor.engine.enclosing
    with agent_span(pipeline.tracer):
        assert len(enclosing._open) == 1
        pid = os.fork()
        if pid == 0:  # the child: exit code says what it saw
            os._exit(0 if len(enclosing._open) == 0 else 1)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@settings(max_examples=30, deadline=None)
@given(conversations=st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=8))
def test_calls_share_a_run_exactly_when_they_share_a_conversation(
    conversations: list[str | None], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Turns of several conversations interleaved, each request its own trace (None: an agent
    span without one): two calls are in one run exactly when they share a conversation id."""
    made = make_pipeline(LocalStore(tmp_path_factory.mktemp("store")))
    for turn, conversation in enumerate(conversations):
        extra = {} if conversation is None else {"gen_ai.conversation.id": conversation}
        with agent_span(made.tracer, **extra):
            chat(made.tracer, [user(f"q{turn}")])
    found = runs_of(made.spans())
    made.provider.shutdown()
    for i, left in enumerate(conversations):
        for j, right in enumerate(conversations):
            same = left is not None and left == right
            assert (found[i] == found[j]) == (same or i == j)


def test_verify_reads_one_conversation_over_three_traces_as_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`af-otel verify` on the exported OTLP file: the conversation's three calls, spread over
    three traces, verify as epochs 1 to 3 of one run."""
    traces, store_dir = tmp_path / "traces.jsonl", tmp_path / "store"
    with file_recorder(traces, LocalStore(store_dir)) as rec:
        handler = TelemetryHandler(tracer_provider=rec.provider)
        history: list[dict[str, Any]] = []
        for turn in range(3):
            history.append(user(f"question {turn}"))
            with handler.invoke_local_agent(agent_name="travel", conversation_id="conv-file"):
                rec.chat(history)
            history.append(assistant(f"answer {turn}"))
    code = main(["verify", str(traces), "--store", str(store_dir)])
    out = capsys.readouterr().out
    assert code == 0, out
    for epoch in (1, 2, 3):
        assert f"conv-file epoch {epoch}: verified" in out
    assert out.strip().endswith("3 verified, 0 reconstructed, 0 damaged")


def test_the_exporter_form_finds_the_conversation_util_genai_stamps(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exporter sees no span start, but the real genai-openai span carries the conversation
    id util-genai gave it: two agent invocations of one conversation, two traces, one run."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    exporting = ReceiptSpanExporter(exporter, store=store, wire=False)
    provider.add_span_processor(RunTagger(SimpleSpanProcessor(exporting)))
    handler = TelemetryHandler(tracer_provider=provider)
    with instrumented_openai(provider) as client:
        for _ in range(2):
            with handler.invoke_local_agent(agent_name="weather", conversation_id="conv-e"):
                client.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
                )
    provider.shutdown()
    calls = llm_spans(exporter.get_finished_spans())
    assert len({s.context.trace_id for s in calls if s.context is not None}) == 2
    assert [(s.attributes or {}).get("gen_ai.conversation.id") for s in calls] == ["conv-e"] * 2
    assert [e[:2] for e in epochs_of(calls)] == [("conv-e", 1), ("conv-e", 2)]


def test_a_conversation_inside_an_agent_span_is_its_own_run(pipeline: Pipeline) -> None:
    """A util-genai agent invocation with a conversation id, inside a framework agent span with
    none: its calls are the conversation's; the outer agent's own calls stay the outer span's."""
    tracer = pipeline.tracer
    handler = TelemetryHandler(tracer_provider=pipeline.provider)
    with agent_span(tracer, "router") as outer:
        chat(tracer, [user("route")])
        with handler.invoke_local_agent(agent_name="inner", conversation_id="inner-conv"):
            chat(tracer, [user("inside")])
        chat(tracer, [user("after")])
    context = outer.get_span_context()
    mine = run_discovery.span_run_id((context.trace_id, context.span_id))
    assert runs_of(pipeline.spans()) == [mine, "inner-conv", mine]


def test_an_openinference_session_is_the_conversation_and_another_session_id_is_not(
    pipeline: Pipeline,
) -> None:
    """OpenInference's ``session.id`` on its AGENT spans (``using_session``) names the run over
    two traces, so two sessions are two runs; ``session.id`` on a span of no OpenInference kind
    (a user's session, OTel's session conventions) names none: that call takes its trace's run."""
    tracer = pipeline.tracer
    for session in ("s-1", "s-1", "s-2"):
        agent = {"openinference.span.kind": "AGENT", "session.id": session}
        with tracer.start_as_current_span("Agent workflow", attributes=agent):
            chat(tracer, [user(session)])
    with tracer.start_as_current_span("request", attributes={"session.id": "browser-9"}):
        chat(tracer, [user("plain")])
    calls = llm_spans(pipeline.spans())
    assert calls[-1].context is not None
    assert runs_of(pipeline.spans()) == [
        "s-1",
        "s-1",
        "s-2",
        trace_run_id(calls[-1].context.trace_id),
    ]


def test_the_exporter_form_finds_the_openinference_session(store: Store) -> None:
    """The real OpenInference openai instrumentation stamps ``using_session``'s id on its LLM
    span as ``session.id``: the exporter, which sees no span start, files two calls of one
    session, each its own trace, under one run, and a call of another session under another."""
    from openinference.instrumentation import using_session
    from openinference.instrumentation.openai import OpenAIInstrumentor

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    exporting = ReceiptSpanExporter(exporter, store=store, wire=False)
    provider.add_span_processor(RunTagger(SimpleSpanProcessor(exporting)))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        client = openai_client()
        for session in ("sess-a", "sess-a", "sess-b"):
            with using_session(session):
                client.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": session}]
                )
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    calls = llm_spans(exporter.get_finished_spans())
    assert len({s.context.trace_id for s in calls if s.context is not None}) == 3
    assert runs_of(calls) == ["sess-a", "sess-a", "sess-b"]
