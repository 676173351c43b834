"""One model call recorded by two spans is one epoch (af_otel/processor/dedupe.py), in both forms:
the framework span that starts first, has no attributes at start and ends last is folded into the
SDK span's epoch, across traces; a nested call that disagrees, or of the same scope, is not."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import af_otel
from af_otel import names
from af_otel.model import Request
from af_otel.processor import dedupe
from tests.processor.helpers import af, end_attributes, start_attributes, user

SDK = "opentelemetry.instrumentation.genai.openai"
FRAMEWORK = "openinference.instrumentation.langchain"

Record = Callable[[TracerProvider], None]


def _run(form: str, tmp: Any, calls: Record) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    if form == "processor":
        processor = af_otel.ReceiptSpanProcessor(SimpleSpanProcessor(memory), store=tmp)
        provider.add_span_processor(processor)
    else:
        # A batch of one span: the framework span arrives in a later export than the SDK's.
        exporter = af_otel.ReceiptSpanExporter(memory, store=tmp)
        provider.add_span_processor(
            af_otel.RunTagger(
                BatchSpanProcessor(exporter, max_export_batch_size=1, schedule_delay_millis=1)
            )
        )
    with af_otel.run("r"):
        calls(provider)
    provider.shutdown()
    # The run's close record (test_closing.py) is no call.
    return [s for s in memory.get_finished_spans() if s.name != names.RUN_CLOSE]


def _one_call(provider: TracerProvider, framework_says: list[Any], sdk_says: list[Any]) -> None:
    """A framework span (no attributes at start, not made current) around an SDK span that is
    the root of its own trace; the framework span ends last."""
    framework = provider.get_tracer(FRAMEWORK).start_span("ChatOpenAI")
    token = otel_context.attach(otel_context.Context())  # the SDK span starts a trace of its own
    try:
        sdk = provider.get_tracer(SDK).start_span("chat gpt-4o-mini", attributes=start_attributes())
        sdk.set_attributes(end_attributes(sdk_says))
        sdk.end()
    finally:
        otel_context.detach(token)
    framework.set_attributes({**start_attributes(), **end_attributes(framework_says)})
    framework.end()


@pytest.mark.parametrize("form", ["processor", "exporter"])
def test_the_framework_span_is_folded_into_the_sdk_epoch(form: str, tmp_path: Any) -> None:
    def calls(provider: TracerProvider) -> None:
        _one_call(provider, [user("a")], [user("a")])
        _one_call(provider, [user("a"), user("b")], [user("a"), user("b")])

    spans = _run(form, tmp_path, calls)
    sdk = [s for s in spans if s.instrumentation_scope.name == SDK]
    framework = [s for s in spans if s.instrumentation_scope.name == FRAMEWORK]
    assert sdk[0].context.trace_id != framework[0].context.trace_id
    assert [af(s)[names.EPOCH] for s in sdk] == [1, 2]
    assert all(names.GAP_NO_RUN_LOG not in af(s)[names.GAPS] for s in sdk)
    for kept, folded in zip(sdk, framework, strict=True):
        attributes = af(folded)
        assert attributes[names.EPOCH_SAME_AS] == af(kept)[names.EPOCH]
        assert attributes[names.EPOCH_LANE] == af(kept)[names.EPOCH_LANE]
        assert names.EPOCH not in attributes
        assert names.RECEIPT_STATE not in attributes
        assert not folded.events
    views = af_otel.served_views(af_otel.read_spans(spans), store=tmp_path)
    assert [v.epoch for v in views] == [1, 2]
    assert [[c.scope for c in v.same_call] for v in views] == [[FRAMEWORK], [FRAMEWORK]]


def test_a_nested_call_that_disagrees_is_its_own_epoch(tmp_path: Any) -> None:
    spans = _run("processor", tmp_path, lambda p: _one_call(p, [user("a")], [user("other")]))
    assert sorted(af(s).get(names.EPOCH) for s in spans) == [1, 2]
    assert all(names.EPOCH_SAME_AS not in af(s) for s in spans)


_text = st.text(max_size=8)


@given(
    a=_text,
    b=_text,
    sa=st.integers(0, 50),
    ea=st.integers(0, 50),
    sb=st.integers(0, 50),
    eb=st.integers(0, 50),
)
def test_the_rule(a: str, b: str, sa: int, ea: int, sb: int, eb: int) -> None:
    """Same call iff the windows nest and the conversations agree; a record without a request
    agrees on the model alone."""
    ra = Request.from_dict({"messages": [user(a)], "model": "m"})
    rb = Request.from_dict({"messages": [user(b)], "model": "m"})
    seen = dedupe.Seen(sb, sb + eb, 1, "lane", SDK, "m", dedupe.conversation(rb))
    found = dedupe.match([seen], sa, sa + ea, FRAMEWORK, "m", ra, None)
    nested = (sa <= sb and sb + eb <= sa + ea) or (sb <= sa and sa + ea <= sb + eb)
    assert (found is seen) == (nested and a == b)
    assert dedupe.match([seen], sa, sa + ea, SDK, "m", ra, None) is None  # one scope
    assert (dedupe.match([seen], sa, sa + ea, FRAMEWORK, "m", None, None) is seen) == nested
    assert dedupe.match([seen], sa, sa + ea, FRAMEWORK, "other", None, None) is None


def _framework_first(
    provider: TracerProvider, framework_says: list[Any], sdk_says: list[Any], *, at_start: bool
) -> None:
    """A framework span that writes its LLM attributes at its start (``at_start``) or at its end,
    made current, around an SDK span; the framework span ends last."""
    tracer = provider.get_tracer(FRAMEWORK)
    early = {**start_attributes(), **end_attributes(framework_says)} if at_start else {}
    with tracer.start_as_current_span("ChatOpenAI", attributes=early) as framework:
        sdk = provider.get_tracer(SDK).start_span("chat gpt-4o-mini", attributes=start_attributes())
        sdk.set_attributes(end_attributes(sdk_says))
        sdk.end()
        if not at_start:
            framework.set_attributes({**start_attributes(), **end_attributes(framework_says)})


def test_a_framework_span_numbered_at_start_that_disagrees_says_no_run_log(
    tmp_path: Any,
) -> None:
    """The SDK span took over the framework span's number at its start; the framework span then
    agrees with no finished call, so it is numbered at its end, out of start order, and says so."""
    spans = _run(
        "processor",
        tmp_path,
        lambda p: _framework_first(p, [user("a")], [user("other")], at_start=True),
    )
    by_scope = {s.instrumentation_scope.name: af(s) for s in spans}
    assert by_scope[SDK][names.EPOCH] == 1
    assert names.GAP_NO_RUN_LOG not in by_scope[SDK][names.GAPS]
    assert by_scope[FRAMEWORK][names.EPOCH] == 2
    assert names.GAP_NO_RUN_LOG in by_scope[FRAMEWORK][names.GAPS]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    shapes=st.lists(st.sampled_from(["start", "end", "sdk", "framework"]), min_size=1, max_size=6)
)
def test_every_call_is_one_epoch_and_the_numbers_have_no_gap(
    shapes: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Calls recorded by a framework span numbered at its start or its end around an SDK span,
    by the SDK span alone or by the framework span alone, in any order: one epoch per call,
    numbered 1..n in call order, none out of order, every second record folded."""

    def calls(provider: TracerProvider) -> None:
        history: list[Any] = []
        for index, shape in enumerate(shapes):
            history = [*history, user(str(index))]
            if shape in ("start", "end"):
                _framework_first(provider, history, history, at_start=shape == "start")
            else:
                scope = SDK if shape == "sdk" else FRAMEWORK
                span = provider.get_tracer(scope).start_span(
                    "chat gpt-4o-mini", attributes=start_attributes()
                )
                span.set_attributes(end_attributes(history))
                span.end()

    spans = _run("processor", tmp_path_factory.mktemp("calls"), calls)
    numbered = sorted((s.start_time or 0, af(s)) for s in spans if names.EPOCH in af(s))
    assert [a[names.EPOCH] for _, a in numbered] == list(range(1, len(shapes) + 1))
    assert all(names.GAP_NO_RUN_LOG not in a[names.GAPS] for _, a in numbered)
    folded = [af(s) for s in spans if names.EPOCH_SAME_AS in af(s)]
    assert len(folded) == sum(shape in ("start", "end") for shape in shapes)
    assert all(names.EPOCH not in a for a in folded)


@given(turns=st.lists(_text, min_size=1, max_size=12), edit_at=st.integers(0, 12))
def test_remembered_calls_share_the_latest_tuple_and_still_match_exactly(
    turns: list[str], edit_at: int
) -> None:
    """Calls whose messages extend the last call's keep them as a count into the newest tuple;
    an edited history starts a tuple of its own. Each call still agrees with its own request
    and with no other length."""
    recent: deque[dedupe.Seen] = deque(maxlen=dedupe.RECENT)
    requests: list[Request] = []
    messages: tuple[Any, ...] = ()
    for number, text in enumerate(turns):
        added = Request.from_dict({"messages": [user(text)]}).messages
        extends = number != edit_at and bool(messages)
        before = messages
        if not extends:  # read in full: equal messages, new objects
            before = Request.from_dict({"messages": [dict(m) for m in before]}).messages
        messages = before + added
        request = Request(system=(), messages=messages, model="m")
        requests.append(request)
        seen = dedupe.Seen(
            number * 10, number * 10 + 5, number + 1, "lane", SDK, "m", dedupe.conversation(request)
        )
        dedupe.remember(recent, seen, before if extends else None)
    tuples = {id(seen.conversation.history.messages) for seen in recent if seen.conversation}
    assert len(tuples) == (2 if 0 < edit_at < len(turns) else 1)
    for seen, request in zip(recent, requests, strict=True):
        held = seen.conversation
        assert held is not None
        assert held.history.messages[: held.count] == request.messages
        found = dedupe.match(recent, seen.start, seen.end, FRAMEWORK, "m", request, None)
        assert found is seen
