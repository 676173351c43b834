"""Pairing a sent body with an LLM span that is not current (docs/processor.md, Pairing): the
body goes to the span started last in the context that sent it, within that span's window, and
every case that rule cannot settle falls back to the instrumentation's record. Each scenario runs
under the processor and under the exporter form (`RunTagger` around its processor hands the tap
the span starts), behind a simple processor and behind a batch processor that exports each span
in a batch of its own. Real SDK spans, a real httpx client (its MockTransport answers), the
tap."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import ReceiptSpanExporter, RunTagger, names, read_spans, served_views, verify
from af_otel.reader.verify import VerdictStatus
from af_otel.store import LocalStore
from af_otel.wire import uninstall
from tests.builders import Pipeline, make_pipeline, start_attributes, tapped_pipeline
from tests.wire.convert import differences, from_openai, from_view

CHAT = "https://api.openai.com/v1/chat/completions"


FORMS = ("processor", "exporter", "exporter-batched")


class Flushed(Pipeline):
    """A pipeline whose spans are read after its batch processor exported what has ended."""

    def spans(self) -> Any:
        self.processor.force_flush()
        return super().spans()


def exporter_pipeline(store: LocalStore, *, tagged: bool = True, batched: bool = False) -> Pipeline:
    """The exporter form: `ReceiptSpanExporter` behind a SimpleSpanProcessor (``batched``: a
    BatchSpanProcessor exporting each span in a batch of its own), in a `RunTagger` unless
    ``tagged`` is False."""
    memory = InMemorySpanExporter()
    exporter = ReceiptSpanExporter(memory, store=store)
    processor: Any = (
        BatchSpanProcessor(exporter, max_export_batch_size=1, schedule_delay_millis=600_000)
        if batched
        else SimpleSpanProcessor(exporter)
    )
    if tagged:
        processor = RunTagger(processor)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    made = Flushed if batched else Pipeline
    return made(provider, provider.get_tracer("test"), memory, processor, store)


@pytest.fixture(params=FORMS)
def pipeline(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pipeline]:
    store = LocalStore(tmp_path / "store")
    if request.param == "processor":
        made = make_pipeline(store)
    else:
        made = exporter_pipeline(store, batched=request.param == "exporter-batched")
    yield made
    made.provider.shutdown()
    uninstall()


def _body(question: str, model: str = "gpt-4o") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": question}]}


def _send(body: dict[str, Any]) -> None:
    answer = httpx.Response(200, json={"id": "x", "choices": []})
    with httpx.Client(transport=httpx.MockTransport(lambda _: answer)) as client:
        client.post(CHAT, content=orjson.dumps(body))


def _llm_span(pipeline: Pipeline, name: str, context: Any = None, model: str = "gpt-4o") -> Any:
    """An LLM span started as a callback-based instrumentation starts it: never made current."""
    return pipeline.tracer.start_span(
        name, context=context, attributes=start_attributes(model, provider="openai")
    )


def _by_name(pipeline: Pipeline) -> dict[str, Any]:
    spans = pipeline.spans()
    views = served_views(tuple(read_spans(spans)), store=pipeline.store)
    ids = {format(span.context.span_id, "016x"): span.name for span in spans}
    found = {}
    for view in views:
        span = next(s for s in spans if format(s.context.span_id, "016x") == view.span_id)
        found[ids[view.span_id]] = (span.attributes.get(names.RECEIPT_SOURCE), view)
    return found


def _served_is(view: Any, body: dict[str, Any]) -> bool:
    return differences(from_openai(body), from_view(view)) == []


def test_a_span_never_made_current_gets_the_body_sent_where_it_started(
    pipeline: Pipeline,
) -> None:
    """A body sent with no current span, in the context that started the LLM span, is that call's:
    minted from the wire and verified, its served view the body field by field."""
    body = _body("Weather in Oslo?")
    span = _llm_span(pipeline, "chat")
    _send(body)
    span.end()
    source, view = _by_name(pipeline)["chat"]
    assert source == names.SOURCE_WIRE
    assert verify(view).status == VerdictStatus.VERIFIED
    assert _served_is(view, body)


def test_two_concurrent_calls_in_one_trace_each_get_their_own_body(pipeline: Pipeline) -> None:
    """Two LLM spans of one trace open at once in two threads, their bodies sent while both are
    open: each call is minted from the body its own thread sent."""
    bodies = {"a": _body("Weather in Oslo?"), "b": _body("Weather in Lima?")}
    with pipeline.tracer.start_as_current_span("agent"):
        parent = otel_context.get_current()
        both_open, both_sent = threading.Barrier(2), threading.Barrier(2)

        def call(name: str) -> None:
            token = otel_context.attach(parent)  # the agent span is current in each thread
            try:
                span = _llm_span(pipeline, name)
                both_open.wait()
                _send(bodies[name])
                both_sent.wait()
                span.end()
            finally:
                otel_context.detach(token)

        threads = [threading.Thread(target=call, args=(name,)) for name in bodies]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    found = _by_name(pipeline)
    for name, body in bodies.items():
        source, view = found[name]
        assert source == names.SOURCE_WIRE
        assert _served_is(view, body), name
        assert verify(view).status == VerdictStatus.VERIFIED


def test_a_span_that_ends_before_its_request_is_sent_takes_no_other_body(
    pipeline: Pipeline,
) -> None:
    """A call whose span ended before its client sent the body (a streamed call ended early) falls
    back to its record, and its late body is never the one of another call open at that time."""
    late, other = _body("Weather in Oslo?"), _body("Weather in Lima?")
    open_other, late_sent = threading.Event(), threading.Event()

    def other_call() -> None:
        span = _llm_span(pipeline, "other")
        open_other.set()
        late_sent.wait(10)
        _send(other)
        span.end()

    thread = threading.Thread(target=other_call)
    early = _llm_span(pipeline, "early")
    early.end()
    thread.start()
    open_other.wait(10)
    _send(late)  # sent while "other" is open, after its own span ended
    late_sent.set()
    thread.join()
    found = _by_name(pipeline)
    assert found["early"][0] == names.SOURCE_INSTRUMENTATION
    source, view = found["other"]
    assert source == names.SOURCE_WIRE
    assert _served_is(view, other)


def test_a_span_started_after_the_llm_span_where_it_sends_leaves_the_call_to_its_record(
    pipeline: Pipeline,
) -> None:
    """A nested span started after the LLM span in the sending context is closer to the body than
    the LLM span: the tap cannot say the body is the call's, so the record stands."""
    llm = _llm_span(pipeline, "chat")
    inner = pipeline.tracer.start_span("prepare", context=trace.set_span_in_context(llm))
    _send(_body("Weather in Oslo?"))
    inner.end()
    llm.end()
    assert _by_name(pipeline)["chat"][0] == names.SOURCE_INSTRUMENTATION


def test_a_body_for_another_model_than_the_record_is_not_the_calls(pipeline: Pipeline) -> None:
    """Where the record names the model and the paired body another, the body is not taken."""
    span = _llm_span(pipeline, "chat", model="gpt-4o")
    _send(_body("Weather in Oslo?", model="gpt-4.1"))
    span.end()
    assert _by_name(pipeline)["chat"][0] == names.SOURCE_INSTRUMENTATION


def test_a_body_sent_outside_the_spans_window_is_not_the_calls(pipeline: Pipeline) -> None:
    """A span whose recorded end (a callback's own clock) comes before the body was sent does not
    hold that body in its window: the record stands."""
    span = _llm_span(pipeline, "chat")
    ended = time.time_ns()
    _send(_body("Weather in Oslo?"))
    span.end(end_time=ended)
    assert _by_name(pipeline)["chat"][0] == names.SOURCE_INSTRUMENTATION


def test_under_a_remote_parent_the_span_started_where_it_sends_gets_the_body(
    pipeline: Pipeline,
) -> None:
    """A worker that attached an incoming trace context (a remote parent, no span object of its
    own) and runs a callback-based instrumentation: the body still goes to the LLM span."""
    remote = trace.SpanContext(
        0x1234, 0x5678, is_remote=True, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED)
    )
    token = otel_context.attach(trace.set_span_in_context(trace.NonRecordingSpan(remote)))
    try:
        body = _body("Weather in Oslo?")
        span = _llm_span(pipeline, "chat")
        _send(body)
        span.end()
    finally:
        otel_context.detach(token)
    source, view = _by_name(pipeline)["chat"]
    assert source == names.SOURCE_WIRE
    assert _served_is(view, body)


def test_a_streamed_span_holds_the_body_sent_before_its_first_token(pipeline: Pipeline) -> None:
    """A streamed span that records its end when the stream is handed out, before the request
    goes out, and its first token as an event (OpenInference's LlamaIndex one): its window runs
    to that event, so the body sent in between is its."""
    body = _body("Weather in Oslo?")
    span = _llm_span(pipeline, "astream_chat")
    recorded_end = time.time_ns()
    _send(body)
    span.add_event("First Token Stream Event", timestamp=time.time_ns())
    span.end(end_time=recorded_end)
    source, view = _by_name(pipeline)["astream_chat"]
    assert source == names.SOURCE_WIRE
    assert _served_is(view, body)


def test_an_event_before_the_send_does_not_stretch_the_window_to_it(pipeline: Pipeline) -> None:
    """A span whose recorded end and every event come before the body was sent: not its body."""
    span = _llm_span(pipeline, "astream_chat")
    span.add_event("First Token Stream Event", timestamp=time.time_ns())
    recorded_end = time.time_ns()
    _send(_body("Weather in Oslo?"))
    span.end(end_time=recorded_end)
    assert _by_name(pipeline)["astream_chat"][0] == names.SOURCE_INSTRUMENTATION


@pytest.fixture
def processor_form(tmp_path: Path) -> Iterator[Pipeline]:
    yield from tapped_pipeline(tmp_path)


def _looked_at(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The spans the tap classifies by their attributes at a send, recorded."""
    from af_otel.processor import wire_source

    seen: list[str] = []
    real = wire_source._is_llm

    def is_llm(span: Any) -> bool:
        seen.append(span.name)
        return real(span)

    monkeypatch.setattr(wire_source, "_is_llm", is_llm)
    return seen


def test_a_current_call_known_at_its_start_takes_its_body_without_a_second_look(
    processor_form: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The current span is the LLM call its engine saw start in this context: the body sent is
    its own, and its attributes are not classified again at the send."""
    seen = _looked_at(monkeypatch)
    body = _body("Weather in Oslo?")
    with processor_form.tracer.start_as_current_span(
        "chat", attributes=start_attributes("gpt-4o", provider="openai")
    ):
        _send(body)
    source, view = _by_name(processor_form)["chat"]
    assert seen == []
    assert source == names.SOURCE_WIRE
    assert _served_is(view, body)


def test_a_current_span_that_becomes_a_call_after_its_start_still_takes_its_body(
    processor_form: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A current span with no GenAI attributes at its start, given them before the send: the tap
    looks at its attributes then, and the body is its."""
    seen = _looked_at(monkeypatch)
    body = _body("Weather in Lima?")
    with processor_form.tracer.start_as_current_span("chat") as span:
        span.set_attributes(start_attributes("gpt-4o", provider="openai"))
        _send(body)
    source, view = _by_name(processor_form)["chat"]
    assert seen == ["chat"]
    assert source == names.SOURCE_WIRE
    assert _served_is(view, body)
