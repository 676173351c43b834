"""Late pairing (docs/processor.md): a body sent where no LLM span was current or started waits
by its trace, and an LLM span of that trace (a root span, for a body sent in none) claims it at
its end when the body was sent within its window, asks for the model it records and says what its
recorded messages say; exactly one such body, else the record stands. The spans here are written
as LiteLLM's callback writes them: after the call, with a back-dated start. Each scenario runs
under the processor, the exporter form with `RunTagger`, and the exporter alone."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace

from af_otel import names, verify
from af_otel.reader.verify import VerdictStatus
from af_otel.store import LocalStore
from af_otel.wire import Sent, uninstall
from af_otel.wire import loose as loose_module
from af_otel.wire.loose import LooseTable
from af_otel.wire.tap import LOOSE
from tests.builders import Pipeline, end_attributes, make_pipeline, start_attributes, user
from tests.wire.test_pairing import _body, _by_name, _send, _served_is, exporter_pipeline

FORMS = ("processor", "exporter", "exporter-untagged")


@pytest.fixture(params=FORMS)
def pipeline(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pipeline]:
    store = LocalStore(tmp_path / "store")
    if request.param == "processor":
        made = make_pipeline(store)
    else:
        made = exporter_pipeline(store, tagged=request.param == "exporter")
    yield made
    made.provider.shutdown()
    uninstall()


def _written_after(
    pipeline: Pipeline,
    name: str,
    start: int,
    question: str | None,
    *,
    model: str = "gpt-4o",
    context: Any = None,
    end: int | None = None,
) -> None:
    """An LLM span written after its call, as LiteLLM's callback writes it: started and ended at
    once with the call's own times, its record holding the question asked (None: no content)."""
    attributes = start_attributes(model, provider="openai")
    if question is not None:
        attributes |= end_attributes([user(question)], system=None, tools=None, temperature=None)
    span = pipeline.tracer.start_span(name, context=context, start_time=start)
    span.set_attributes(attributes)
    span.end(end_time=end if end is not None else time.time_ns())


def test_a_span_written_after_its_call_gets_the_body_sent_before_it(pipeline: Pipeline) -> None:
    """No span exists when the body is sent; the span written afterwards, whose window holds the
    send and whose record asks the same, is minted from the body and verified."""
    body = _body("Weather in Oslo?")
    start = time.time_ns()
    _send(body)
    _written_after(pipeline, "litellm_request", start, "Weather in Oslo?")
    source, view = _by_name(pipeline)["litellm_request"]
    assert source == names.SOURCE_WIRE
    assert verify(view).status == VerdictStatus.VERIFIED
    assert _served_is(view, body)


def test_under_a_parent_span_the_late_span_of_its_trace_gets_the_body(pipeline: Pipeline) -> None:
    """A body sent while the application's own span is current waits by that trace, and the LLM
    span written later under that span claims it."""
    body = _body("Weather in Oslo?")
    with pipeline.tracer.start_as_current_span("handler"):
        start = time.time_ns()
        _send(body)
        _written_after(pipeline, "litellm_request", start, "Weather in Oslo?")
    source, view = _by_name(pipeline)["litellm_request"]
    assert source == names.SOURCE_WIRE
    assert _served_is(view, body)


def test_two_late_calls_of_one_trace_each_get_the_body_their_record_asks(
    pipeline: Pipeline,
) -> None:
    """Two bodies sent in one trace, both within both late spans' windows: each span takes the
    one whose messages its record holds."""
    bodies = {"oslo": _body("Weather in Oslo?"), "lima": _body("Weather in Lima?")}
    with pipeline.tracer.start_as_current_span("handler"):
        start = time.time_ns()
        for body in bodies.values():
            _send(body)
        _written_after(pipeline, "lima", start, "Weather in Lima?")
        _written_after(pipeline, "oslo", start, "Weather in Oslo?")
    found = _by_name(pipeline)
    for name, body in bodies.items():
        source, view = found[name]
        assert source == names.SOURCE_WIRE, name
        assert _served_is(view, body), name


def test_two_bodies_the_record_cannot_tell_apart_go_to_neither(pipeline: Pipeline) -> None:
    """Two bodies that ask the same messages but differ in a setting the record does not hold:
    whose is which is unknown, so neither late span takes one."""
    with pipeline.tracer.start_as_current_span("handler"):
        start = time.time_ns()
        _send(_body("Weather in Oslo?") | {"temperature": 0.1})
        _send(_body("Weather in Oslo?") | {"temperature": 0.9})
        _written_after(pipeline, "first", start, "Weather in Oslo?")
        _written_after(pipeline, "second", start, "Weather in Oslo?")
    found = _by_name(pipeline)
    assert found["first"][0] == names.SOURCE_INSTRUMENTATION
    assert found["second"][0] == names.SOURCE_INSTRUMENTATION


@pytest.mark.parametrize(
    ("question", "model"),
    [
        ("Weather in Lima?", "gpt-4o"),  # the record asks something else
        ("Weather in Oslo?", "gpt-4.1"),  # the record names another model
        (None, "gpt-4o"),  # the record holds no messages to vouch for the body
    ],
    ids=["other-messages", "other-model", "no-content"],
)
def test_a_body_the_record_does_not_vouch_for_is_not_claimed(
    pipeline: Pipeline, question: str | None, model: str
) -> None:
    start = time.time_ns()
    _send(_body("Weather in Oslo?"))
    _written_after(pipeline, "litellm_request", start, question, model=model)
    assert _by_name(pipeline)["litellm_request"][0] == names.SOURCE_INSTRUMENTATION


def test_a_body_sent_outside_the_late_spans_window_is_not_claimed(pipeline: Pipeline) -> None:
    """The span's own times end before the body was sent: not its body."""
    start = time.time_ns()
    ended = time.time_ns()
    _send(_body("Weather in Oslo?"))
    _written_after(pipeline, "litellm_request", start, "Weather in Oslo?", end=ended)
    assert _by_name(pipeline)["litellm_request"][0] == names.SOURCE_INSTRUMENTATION


def test_a_body_of_another_trace_is_not_claimed(pipeline: Pipeline) -> None:
    """A body sent in one trace waits for that trace only: a late span of another trace, and a
    non-root late span for a body sent in no trace, take nothing."""
    start = time.time_ns()
    with pipeline.tracer.start_as_current_span("one"):
        _send(_body("Weather in Oslo?"))
    other = pipeline.tracer.start_span("other")
    _written_after(
        pipeline, "in-other", start, "Weather in Oslo?", context=trace.set_span_in_context(other)
    )
    _send(_body("Weather in Lima?"))
    _written_after(
        pipeline, "child", start, "Weather in Lima?", context=trace.set_span_in_context(other)
    )
    other.end()
    found = _by_name(pipeline)
    assert found["in-other"][0] == names.SOURCE_INSTRUMENTATION
    assert found["child"][0] == names.SOURCE_INSTRUMENTATION


def test_a_body_claimed_late_is_claimed_once(pipeline: Pipeline) -> None:
    """One body, two late spans that would both take it: the first to end does, the second keeps
    its record."""
    start = time.time_ns()
    body = _body("Weather in Oslo?")
    _send(body)
    _written_after(pipeline, "first", start, "Weather in Oslo?")
    _written_after(pipeline, "second", start, "Weather in Oslo?")
    found = _by_name(pipeline)
    assert found["first"][0] == names.SOURCE_WIRE
    assert found["second"][0] == names.SOURCE_INSTRUMENTATION


def _sent(size: int) -> Sent:
    return Sent("openai.chat", "api.openai.com", b"x" * size)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.integers(1, 4096)), max_size=400))
def test_the_table_stays_within_its_bounds(adds: list[tuple[int, int]]) -> None:
    """Whatever is added, no trace holds more than its share, no more traces or bytes are held
    than the bounds, the newest body of each trace is kept, and its byte count is exact."""
    table = LooseTable()
    for trace_id, size in adds:
        table.add(trace_id, _sent(size), None)
    traces = table._traces
    assert len(traces) <= loose_module.MAX_TRACES
    assert all(len(kept) <= loose_module.MAX_PER_TRACE for kept in traces.values())
    assert table._bytes == sum(len(k.sent.body) for kept in traces.values() for k in kept)
    if adds:
        trace_id, size = adds[-1]
        assert table.waiting(trace_id)[-1].sent.body == b"x" * size


def test_a_stale_body_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A body older than the age bound waits no more."""
    table = LooseTable()
    table.add(7, _sent(10), None)
    now = time.monotonic_ns()
    monkeypatch.setattr(
        loose_module.time, "monotonic_ns", lambda: now + loose_module.MAX_AGE_NS + 1
    )
    assert table.waiting(7) == ()
    assert table._bytes == 0


def test_a_forked_child_starts_with_no_waiting_body() -> None:
    """The parent's waiting bodies are not the child's calls."""
    LOOSE.add(9, _sent(10), None)
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0 if len(LOOSE) == 0 else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        LOOSE.reset()


def test_a_body_filed_under_an_open_call_waits_for_it(tmp_path: Path) -> None:
    """A callback-based call's span (started, never current) has a body filed under it; a span
    written after the fact whose record asks the same ends first: it does not take the open
    call's body, which the call takes at its own end (processor form: it sees the call open)."""
    pipeline = make_pipeline(LocalStore(tmp_path / "store"))
    try:
        body = _body("Weather in Oslo?")
        start = time.time_ns()
        open_call = pipeline.tracer.start_span(
            "callback", attributes=start_attributes("gpt-4o", provider="openai")
        )
        _send(body)
        _written_after(pipeline, "written-after", start, "Weather in Oslo?")
        open_call.end()
        found = _by_name(pipeline)
        assert found["written-after"][0] == names.SOURCE_INSTRUMENTATION
        source, view = found["callback"]
        assert source == names.SOURCE_WIRE
        assert _served_is(view, body)
    finally:
        pipeline.provider.shutdown()
        uninstall()


def _sent_at(size: int, at: int) -> Sent:
    return Sent("openai.chat", "api.openai.com", b"x" * size, at)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.integers(0, 20), st.integers(1, 4096)),
            st.tuples(st.just("hold"), st.integers(0, 20), st.integers(0, 50)),
            st.tuples(st.just("release"), st.integers(0, 20), st.integers(0, 50)),
        ),
        max_size=300,
    )
)
def test_held_bodies_outlast_the_count_bound_and_never_the_memory_bounds(
    steps: list[tuple[str, int, int]],
) -> None:
    """Whatever is added, held and released: the trace and byte bounds hold, no trace keeps more
    than 64 bodies nor more than 8 that no span holds, its byte count is exact, a body a span
    holds is dropped only past those hard bounds, and releasing every hold leaves no window."""
    table = LooseTable()
    for at, (verb, trace_id, value) in enumerate(steps, 1):
        if verb == "add":
            table.add(trace_id, _sent_at(value, at), None)
        elif verb == "hold":  # span (trace, value) holds what was sent in its last 10 ticks
            table.hold((trace_id, value), (trace_id,), at - 10, at)
        else:
            table.release([(trace_id, value)])
        for held_trace, kept in table._traces.items():
            assert len(kept) <= loose_module.MAX_KEPT_PER_TRACE
            free = [k for k in kept if not table._held(held_trace, k)]
            assert len(free) <= loose_module.MAX_PER_TRACE
    assert len(table._traces) <= loose_module.MAX_TRACES
    assert table._bytes <= loose_module.MAX_BYTES
    assert table._bytes == sum(len(k.sent.body) for kept in table._traces.values() for k in kept)
    table.release(list(table._holds))
    assert table._windows == {}


def test_a_held_body_outlasts_newer_bodies_and_its_age_until_released(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A body a span holds stays while twelve newer ones come and past the age bound; released,
    it is the first to go."""
    table = LooseTable()
    first = _sent_at(10, 1)
    table.add(7, first, None)
    table.hold((7, 1), (7,), 0, 1)
    for at in range(2, 14):
        table.add(7, _sent_at(10, at), None)
    assert table.waiting(7)[0].sent is first
    assert len(table.waiting(7)) == loose_module.MAX_PER_TRACE + 1
    now = time.monotonic_ns()
    monkeypatch.setattr(
        loose_module.time, "monotonic_ns", lambda: now + loose_module.MAX_AGE_NS + 1
    )
    assert [k.sent for k in table.waiting(7)] == [first]
    table.release([(7, 1)])
    assert table.waiting(7) == ()


def test_a_hold_of_traces_that_keep_nothing_is_not_kept() -> None:
    """An ended span whose traces keep no body holds nothing (the exporter form's common case)."""
    table = LooseTable()
    table.hold((3, 1), (3, 0), 0, 10)
    assert table._holds == {}
    assert table._windows == {}
