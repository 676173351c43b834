"""The agent tree around the calls (`af_otel.reader.agents`): each call's agent, the tools run
after it and handoffs, read from real SDK spans and shown by `served`, `--json` and the report."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from opentelemetry.util.genai.handler import TelemetryHandler

from af_otel import read_spans, served_views
from af_otel.cli import main
from af_otel.cli.pipeline import json_lines_provider
from af_otel.model.agent_spans import is_agent_span
from af_otel.reader.agents import agent_steps, enclosing_agent
from af_otel.reader.records import SpanKind, SpanRecord
from af_otel.store import LocalStore
from tests.processor.fakes import WEATHER_TOOL
from tests.wire.server import WireServer


@pytest.fixture
def two_agents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A planner agent asks the real genai-openai-instrumented client (against the loopback
    server), runs the tool the model asked for; a writer agent of the same conversation answers,
    in the same request (one trace). Spans to an OTLP file; returns it and the store."""
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    traces, store = tmp_path / "traces.jsonl", tmp_path / "store"
    provider = json_lines_provider(traces, store=LocalStore(store))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    handler = TelemetryHandler(tracer_provider=provider)
    try:
        with (
            WireServer() as server,
            openai.OpenAI(api_key="t", base_url=f"http://127.0.0.1:{server.port}/v1") as client,
        ):
            messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
            with provider.get_tracer("app").start_as_current_span("request"):
                with handler.invoke_local_agent(agent_name="planner", conversation_id="conv-t"):
                    reply = client.chat.completions.create(
                        model="gpt-4o-mini", messages=messages, tools=[WEATHER_TOOL]
                    )
                    asked = reply.choices[0].message
                    messages.append(asked.model_dump(exclude_none=True))
                    for call in asked.tool_calls or []:
                        with handler.tool(call.function.name) as tool:
                            tool.tool_call_id = call.id
                        answer = {"role": "tool", "tool_call_id": call.id, "content": "sunny"}
                        messages.append(answer)
                with handler.invoke_local_agent(agent_name="writer", conversation_id="conv-t"):
                    client.chat.completions.create(
                        model="gpt-4o-mini", messages=messages, tools=[WEATHER_TOOL]
                    )
            assert len(server.requests) == 2
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    return traces, store


def served(capsys: pytest.CaptureFixture[str], traces: Path, *extra: str) -> str:
    assert main(["served", str(traces), *extra]) == 0
    return capsys.readouterr().out


def test_served_names_each_calls_agent_the_tool_it_ran_and_the_handoff(
    two_agents: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`served` on the file: epoch 1 was the planner's and ran get_weather with the call id the
    model gave; epoch 2 was the writer's, handed off from the planner, and ran no tool."""
    traces, _ = two_agents
    out = served(capsys, traces)
    first, second = out.split("run conv-t · epoch ")[1:]
    assert "\n  agent planner (span " in first
    assert "\n  tool run: get_weather · call call_" in first
    assert "handoff" not in first
    assert "\n  handoff: planner -> writer\n  agent writer (span " in second
    assert "tool run" not in second


def test_served_json_carries_agent_and_tools_run(
    two_agents: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`--json`: the agent with its span and the handoff, the tool run with the call id that the
    next request's tool message answers; the request's own ``tools`` unchanged."""
    traces, _ = two_agents
    first, second = (json.loads(line) for line in served(capsys, traces, "--json").splitlines())
    assert first["agent"]["name"] == "planner"
    assert first["agent"]["handoff_from"] is None
    [ran] = first["tools_run"]
    assert ran["name"] == "get_weather"
    assert ran["status"] == "unset"
    answered = second["messages"][-1]["parts"][0]
    assert answered["type"] == "tool_call_response"
    assert ran["call_id"] == answered["id"]
    assert [t["name"] for t in first["tools"]] == ["get_weather"]
    assert second["agent"]["name"] == "writer"
    planner = {key: first["agent"][key] for key in ("name", "span_id", "id")}
    assert second["agent"]["handoff_from"] == planner
    assert "tools_run" not in second


def test_the_report_shows_the_agent_section(two_agents: tuple[Path, Path], tmp_path: Path) -> None:
    """The report's epoch sections list the same facts under "Agent"."""
    traces, _ = two_agents
    page = tmp_path / "report.html"
    assert main(["report", str(traces), "-o", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert html.count("<h4>Agent</h4>") == 2
    assert "<li>handoff: planner -&gt; writer</li>" in html
    assert "<li>tool run: get_weather · call call_" in html


# -- hand-made spans: the rules one by one -------------------------------------------------------


@pytest.fixture
def sdk() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def records(exporter: InMemorySpanExporter) -> list[SpanRecord]:
    return list(read_spans(exporter.get_finished_spans()))


def named(spans: Sequence[SpanRecord], name: str) -> SpanRecord:
    return next(span for span in spans if span.name == name)


def test_a_failed_tool_and_a_decision_on_the_agent_span(
    sdk: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """A tool span with an error status and error.type reads as error; the agent span's
    decision event naming its call id is its decision; an OpenInference AGENT span is an agent
    named by its span name."""
    provider, exporter = sdk
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span(
        "support", attributes={"openinference.span.kind": "AGENT"}
    ) as agent:
        with tracer.start_as_current_span("chat m"):
            pass
        agent.add_event(
            "gen_ai.tool.call.decision",
            {"gen_ai.tool.call.id": "c1", "gen_ai.tool.call.decision.outcome": "allow"},
        )
        with tracer.start_as_current_span(
            "execute_tool refund",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "refund",
                "gen_ai.tool.call.id": "c1",
                "error.type": "TimeoutError",
            },
        ) as tool:
            tool.set_status(Status(StatusCode.ERROR))
    spans = records(exporter)
    call = named(spans, "chat m")
    step = agent_steps(spans, [("r", call.trace_id, call.span_id)])[(call.trace_id, call.span_id)]
    assert step.agent is not None
    assert step.agent.name == "support"
    [ran] = step.tools
    assert (ran.name, ran.call_id, ran.status, ran.error, ran.decision) == (
        "refund",
        "c1",
        "error",
        "TimeoutError",
        "allow",
    )


def test_openinference_agent_and_tool_spans(
    sdk: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """OpenInference's AGENT span names its agent by ``agent.name``; its TOOL span is a tool run
    named by ``tool.name`` with the model's call id in ``tool.id``, status ok."""
    provider, exporter = sdk
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span(
        "Agent run", attributes={"openinference.span.kind": "AGENT", "agent.name": "triage"}
    ):
        with tracer.start_as_current_span(
            "ChatCompletion", attributes={"openinference.span.kind": "LLM"}
        ):
            pass
        with tracer.start_as_current_span(
            "lookup",
            attributes={"openinference.span.kind": "TOOL", "tool.name": "lookup", "tool.id": "c9"},
        ) as tool:
            tool.set_status(Status(StatusCode.OK))
    spans = records(exporter)
    call = named(spans, "ChatCompletion")
    step = agent_steps(spans, [("r", call.trace_id, call.span_id)])[(call.trace_id, call.span_id)]
    assert step.agent is not None
    assert step.agent.name == "triage"
    assert [(r.name, r.call_id, r.status) for r in step.tools] == [("lookup", "c9", "ok")]


def test_a_tool_goes_to_the_call_of_its_own_agent(
    sdk: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """Two agents interleaved in one trace: each tool goes to the latest earlier call under its
    own agent span, not to the other agent's later call; a tool under no agent goes to the
    latest earlier call of the trace; a tool before every call goes to none."""
    provider, exporter = sdk
    tracer = provider.get_tracer("t")

    def tool(name: str) -> None:
        with tracer.start_as_current_span(
            f"execute_tool {name}", attributes={"gen_ai.tool.name": name}
        ):
            pass

    with tracer.start_as_current_span("root"):
        tool("early")
        first = tracer.start_span("invoke_agent first")
        second = tracer.start_span("invoke_agent second")
        with trace.use_span(first), tracer.start_as_current_span("chat a"):
            pass
        with trace.use_span(second), tracer.start_as_current_span("chat b"):
            pass
        with trace.use_span(first):
            tool("lookup")
        tool("loose")
        first.end()
        second.end()
    spans = records(exporter)
    calls = [("r1", s.trace_id, s.span_id) for s in spans if s.name == "chat a"]
    calls += [("r2", s.trace_id, s.span_id) for s in spans if s.name == "chat b"]
    steps = agent_steps(spans, calls)
    by_call = {
        name: steps[(call.trace_id, call.span_id)]
        for name in ("chat a", "chat b")
        if (call := named(spans, name))
    }
    assert [r.name for r in by_call["chat a"].tools] == ["lookup"]
    assert [r.name for r in by_call["chat b"].tools] == ["loose"]
    assert {a.name for s in by_call.values() if (a := s.agent)} == {"first", "second"}
    assert all(s.handoff_from is None for s in by_call.values())  # two runs: no handoff


def test_a_call_whose_parent_is_missing_has_no_agent(
    sdk: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """With the agent span left out of what was read, the call has no agent and no step."""
    provider, exporter = sdk
    tracer = provider.get_tracer("t")
    with (
        tracer.start_as_current_span(
            "invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}
        ),
        tracer.start_as_current_span("chat m"),
    ):
        pass
    spans = [span for span in records(exporter) if span.name == "chat m"]
    [call] = spans
    assert enclosing_agent(call, {(call.trace_id, call.span_id): call}) is None
    assert agent_steps(spans, [("r", call.trace_id, call.span_id)]) == {}


def test_plain_calls_get_no_agent(tmp_path: Path) -> None:
    """A record of calls with no agent or tool span around them: every view's agent is None."""
    from tests.reader.recordings import recorder

    with recorder(LocalStore(tmp_path / "store")) as rec:
        rec.chat([{"role": "user", "content": "hi"}])
        spans = list(read_spans(rec.exporter.get_finished_spans()))
    views = served_views(spans, store=LocalStore(tmp_path / "store"))
    assert views
    assert all(view.agent is None for view in views)


# -- the nearest agent ancestor, on drawn trees --------------------------------------------------

TRACE = "0" * 31 + "1"


def span_id(index: int) -> str:
    return f"{index + 1:016x}"


@st.composite
def trees(draw: st.DrawFn) -> tuple[list[SpanRecord], list[int | None], list[bool], set[int]]:
    """A span tree: each span's parent an earlier span (or none), some spans agent spans, some
    spans missing from what was read."""
    size = draw(st.integers(1, 30))
    parents: list[int | None] = [None]
    for index in range(1, size):
        parents.append(draw(st.one_of(st.none(), st.integers(0, index - 1))))
    agents = [draw(st.booleans()) for _ in range(size)]
    missing = set(draw(st.lists(st.integers(0, size - 1), max_size=size // 3)))
    spans = [
        SpanRecord(
            TRACE,
            span_id(index),
            span_id(parent) if parent is not None else None,
            f"invoke_agent a{index}" if agents[index] else f"step {index}",
            SpanKind.INTERNAL,
            index,
            index + 100,
        )
        for index, parent in enumerate(parents)
    ]
    return spans, parents, agents, missing


@settings(max_examples=200, deadline=None)
@given(trees())
def test_the_agent_found_is_the_nearest_agent_ancestor(
    tree: tuple[list[SpanRecord], list[int | None], list[bool], set[int]],
) -> None:
    """For every span of a drawn tree, the agent found is the nearest ancestor that is an agent
    span, walking only through spans that were read; none when the chain breaks first."""
    spans, parents, agents, missing = tree
    index = {(s.trace_id, s.span_id): s for i, s in enumerate(spans) if i not in missing}
    for at, span in enumerate(spans):
        expected: int | None = None
        up = parents[at]
        while up is not None and up not in missing:
            if agents[up]:
                expected = up
                break
            up = parents[up]
        found = enclosing_agent(span, index)
        assert (found.span_id if found else None) == (
            span_id(expected) if expected is not None else None
        )
        assert found is None or is_agent_span(found.attributes, found.name)


def test_serve_shows_the_agent_on_each_epoch_page(two_agents: tuple[Path, Path]) -> None:
    """`af-otel serve`'s page of each epoch lists its agent, the tool run and the handoff, as
    the report does."""
    from starlette.testclient import TestClient

    from af_otel.web import Evidence
    from af_otel.web.app import create_app, span_path

    traces, store = two_agents
    views = served_views(read_spans(traces), store=LocalStore(store))
    evidence = Evidence(file=traces, store=str(store))
    with TestClient(create_app(evidence), raise_server_exceptions=False) as client:
        first, second = (client.get(span_path(v.trace_id, v.span_id)) for v in views)
    assert first.status_code == second.status_code == 200
    assert "<li>agent planner (span " in first.text
    assert "<li>tool run: get_weather · call call_" in first.text
    assert "<li>handoff: planner -&gt; writer</li>" in second.text


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 50), min_size=1, max_size=12),
    st.lists(st.integers(0, 60), max_size=12),
)
def test_each_tool_goes_to_the_latest_call_before_it(
    call_starts: list[int], tool_starts: list[int]
) -> None:
    """Calls and tools of one trace under no agent: each tool is listed once, on the latest
    call that started at or before it (in start order), and a tool before every call on none."""

    def span(index: int, name: str, start: int, **attributes: Any) -> SpanRecord:
        return SpanRecord(
            TRACE, span_id(index), None, name, SpanKind.INTERNAL, start, start, attributes
        )

    calls = [span(i, f"chat {i}", start) for i, start in enumerate(call_starts)]
    tools = [
        span(100 + i, "execute_tool t", start, **{"gen_ai.tool.name": f"t{i}"})
        for i, start in enumerate(tool_starts)
    ]
    steps = agent_steps([*calls, *tools], [("r", TRACE, c.span_id) for c in calls])
    listed = {
        run.name: call.span_id
        for call in calls
        if (step := steps.get((TRACE, call.span_id)))
        for run in step.tools
    }
    assert sum(len(s.tools) for s in steps.values()) == len(listed)
    for i, start in enumerate(tool_starts):
        before = [c for c in calls if c.start_ns <= start]
        expected = max(before, key=lambda c: (c.start_ns, c.span_id)).span_id if before else None
        assert listed.get(f"t{i}") == expected
    for step in steps.values():
        assert step.agent is None
        starts = [int(run.span_id, 16) for run in step.tools]
        assert [tool_starts[s - 101] for s in starts] == sorted(
            tool_starts[s - 101] for s in starts
        )


def test_an_openinference_handoff_span_is_the_handoff_not_a_tool(
    sdk: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """OpenInference's ``handoff to travel`` TOOL span (no ``tool.name``; the agent left in
    ``input.value``) is no tool run: the next call, the travel agent's, is handed off from the
    triage agent of the call before, by that agent's span."""
    provider, exporter = sdk
    tracer = provider.get_tracer("t")
    kind = "openinference.span.kind"
    with tracer.start_as_current_span("Agent workflow", attributes={kind: "AGENT"}):
        with tracer.start_as_current_span(
            "triage", attributes={kind: "AGENT", "agent.name": "triage"}
        ):
            with tracer.start_as_current_span("response 1", attributes={kind: "LLM"}):
                pass
            with tracer.start_as_current_span(
                "handoff to travel",
                attributes={kind: "TOOL", "input.value": "triage", "output.value": "travel"},
            ):
                pass
        with (
            tracer.start_as_current_span(
                "travel", attributes={kind: "AGENT", "agent.name": "travel"}
            ),
            tracer.start_as_current_span("response 2", attributes={kind: "LLM"}),
        ):
            pass
    spans = records(exporter)
    first, second = named(spans, "response 1"), named(spans, "response 2")
    calls = [("r", c.trace_id, c.span_id) for c in (first, second)]
    steps = agent_steps(spans, calls)
    before, after = steps[(first.trace_id, first.span_id)], steps[(second.trace_id, second.span_id)]
    assert before.tools == ()
    assert before.handoff_from is None
    assert after.agent is not None
    assert after.agent.name == "travel"
    assert after.handoff_from == before.agent


def test_a_new_trace_starting_at_another_agent_is_no_handoff(
    sdk: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """Two turns of one conversation, each its own trace, each from the triage agent to the
    travel agent: within a turn the change of agent is a handoff; the second turn starting at
    triage after the first ended at travel is a new turn, not one."""
    provider, exporter = sdk
    tracer = provider.get_tracer("t")
    for turn in (1, 2):
        with tracer.start_as_current_span(f"turn {turn}"):
            for agent in ("triage", "travel"):
                with (
                    tracer.start_as_current_span(
                        f"invoke_agent {agent}",
                        attributes={"gen_ai.operation.name": "invoke_agent"},
                    ),
                    tracer.start_as_current_span(f"chat {turn} {agent}"),
                ):
                    pass
    spans = records(exporter)
    assert len({span.trace_id for span in spans}) == 2
    order = [named(spans, f"chat {t} {a}") for t in (1, 2) for a in ("triage", "travel")]
    steps = agent_steps(spans, [("conv", c.trace_id, c.span_id) for c in order])
    handoffs = [steps[(c.trace_id, c.span_id)].handoff_from for c in order]
    assert [h.name if h else None for h in handoffs] == [None, "triage", None, "triage"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.sampled_from(["triage", "travel", "billing"])),
        min_size=1,
        max_size=8,
    )
)
def test_a_change_of_agent_is_a_handoff_exactly_within_one_trace(
    steps: list[tuple[bool, str]],
) -> None:
    """Calls of one run, each under its agent's span, some starting a new trace (a new turn):
    a call is handed off from the previous call's agent exactly when both are in one trace and
    their agents differ."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    turns: list[list[str]] = []
    for new_turn, agent in steps:
        if new_turn or not turns:
            turns.append([])
        turns[-1].append(agent)
    index = 0
    for turn, agents in enumerate(turns):
        with tracer.start_as_current_span(f"turn {turn}"):
            for agent in agents:
                with (
                    tracer.start_as_current_span(
                        f"invoke_agent {agent}",
                        attributes={"gen_ai.operation.name": "invoke_agent"},
                    ),
                    tracer.start_as_current_span(f"chat {index}"),
                ):
                    index += 1
    provider.shutdown()
    spans = records(exporter)
    calls = [named(spans, f"chat {i}") for i in range(index)]
    found = agent_steps(spans, [("conv", c.trace_id, c.span_id) for c in calls])
    expected: list[str | None] = []
    for agents in turns:
        expected.extend([None] + [a if a != b else None for a, b in pairwise(agents)])
    handed = [found[(c.trace_id, c.span_id)].handoff_from for c in calls]
    assert [h.name if h else None for h in handed] == expected
