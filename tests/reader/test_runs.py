"""Runs several writers served: each writer numbers its calls in a lane of its own, and the reader
numbers the run by start time and joins the lanes into one tree by content, naming a gap wherever
the record cannot prove a link (never a wrong parent)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan

from af_otel import names
from af_otel.processor import run
from af_otel.reader import ServedView, served_views, verify
from af_otel.reader.sources import read_spans
from af_otel.store import LocalStore, Store
from tests.processor.conftest import Pipeline, make_pipeline
from tests.processor.helpers import assistant, end_attributes, llm_spans, start_chat, user

RUN = "conv-1"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return LocalStore(tmp_path / "store")


def _call(pipeline: Pipeline, messages: Sequence[dict[str, Any]], *, block: bool) -> None:
    """One LLM call on one writer; ``block`` serves it inside ``af_otel.run`` (freed after it)."""
    if block:
        with run(RUN):
            span = start_chat(pipeline.tracer)
            span.set_attributes(end_attributes(messages))
            span.end()
        return
    span = start_chat(pipeline.tracer, **{names.RUN_ID: RUN})
    span.set_attributes(end_attributes(messages))
    span.end()


def _conversation(
    writers: Sequence[Pipeline], schedule: Sequence[tuple[int, bool]]
) -> list[list[dict[str, Any]]]:
    """A conversation whose turn k is served by ``writers[schedule[k][0]]``; the requests sent."""
    sent: list[list[dict[str, Any]]] = []
    history: list[dict[str, Any]] = []
    for turn, (writer, block) in enumerate(schedule):
        history.append(user(f"q{turn}"))
        sent.append(list(history))
        _call(writers[writer], history, block=block)
        history.append(assistant(f"a{turn}"))
    return sent


def _views(spans: Sequence[ReadableSpan], store: Store) -> list[ServedView]:
    return list(served_views(read_spans(list(spans)), store=store))


def _label(view: ServedView) -> str:
    assert view.messages is not None
    return str(view.messages[-1]["parts"][0]["content"])


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    schedule=st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=8),
    writers=st.integers(1, 4),
)
def test_any_schedule_over_writers_is_one_verified_chain(
    tmp_path: Path, schedule: list[tuple[int, bool]], writers: int
) -> None:
    """Whichever writer serves each turn, freed or not between turns: epochs 1..n in start order,
    each call's parent the turn before, every call verified."""
    store = LocalStore(tmp_path / f"store-{len(list(tmp_path.iterdir()))}")
    pipelines = [make_pipeline(store) for _ in range(writers)]
    schedule = [(w % writers, block) for w, block in schedule]
    _conversation(pipelines, schedule)
    views = _views([s for p in pipelines for s in p.spans()], store)
    assert [v.epoch for v in views] == list(range(1, len(schedule) + 1))
    for view in views:
        assert _label(view) == f"q{view.epoch - 1}"
        assert view.parent == view.epoch - 1
        assert verify(view).status.value == "verified", verify(view).reason
        assert names.GAP_NO_RUN_LOG not in view.gap_kinds
    for pipeline in pipelines:
        pipeline.provider.shutdown()


def test_one_writer_keeps_its_own_numbers(store: Store) -> None:
    """A run one writer served reads as before: the epochs and parents it wrote."""
    pipeline = make_pipeline(store)
    _conversation([pipeline], [(0, False)] * 3)
    views = _views(pipeline.spans(), store)
    spans = {s.context.span_id: s for s in llm_spans(pipeline.spans())}
    for view in views:
        span = spans[int(view.span_id, 16)]
        assert view.epoch == span.attributes[names.EPOCH]  # type: ignore[index]
        assert view.parent == view.basis == span.attributes[names.EPOCH_PARENT]  # type: ignore[index]


def _sent_label(span: ReadableSpan) -> str:
    messages = json.loads(str((span.attributes or {})["gen_ai.input.messages"]))
    return str(messages[-1]["parts"][0]["content"])


def _alternating(store: Store, *lost: str) -> dict[str, ServedView]:
    """Six turns alternating over two writers, read without the calls named ``lost``."""
    writers = [make_pipeline(store), make_pipeline(store)]
    _conversation(writers, [(turn % 2, False) for turn in range(6)])
    spans = [s for p in writers for s in llm_spans(p.spans())]
    kept = [s for s in spans if _sent_label(s) not in lost]
    return {_label(v): v for v in _views(kept, store)}


def test_a_hole_in_a_writers_numbering_links_nothing_after_it(store: Store) -> None:
    """q2, writer 0's second call, is lost: it started after q0 and may have ended before any
    later call started, so none of them can be linked: parent 0 and a no-run-log gap each, never
    an earlier call."""
    views = _alternating(store, "q2")
    assert views["q0"].parent == 0
    assert names.GAP_NO_RUN_LOG not in views["q0"].gap_kinds
    for label in ("q1", "q3", "q4", "q5"):
        assert views[label].parent == 0
        assert names.GAP_NO_RUN_LOG in views[label].gap_kinds


def test_a_writers_last_call_lost_is_noticed_from_the_answers(store: Store) -> None:
    """q4, writer 0's last call, is lost (no hole shows in its numbering): q5 extends q3 by two
    model answers, so a call in between is missing: parent 0 and a gap that says so."""
    views = _alternating(store, "q4")
    assert views["q3"].parent == views["q2"].epoch
    assert views["q5"].parent == 0
    gap = views["q5"].gap(names.GAP_NO_RUN_LOG)
    assert gap is not None
    assert "2 model answers" in (gap.detail or "")


def test_a_fan_in_names_the_call_it_grew_from_across_writers(store: Store) -> None:
    """Three overlapping calls on one writer, then the follow-up on another writer, grown from the
    second branch: its parent is that branch, and the branches share the call before them."""
    writers = [make_pipeline(store), make_pipeline(store)]
    history = [user("plan")]
    _call(writers[0], history, block=False)
    history.append(assistant("plan ready"))
    branches = [start_chat(writers[1].tracer, **{names.RUN_ID: RUN}) for _ in range(3)]
    for index, span in enumerate(branches):
        span.set_attributes(end_attributes([*history, user(f"branch {index}")]))
    for span in reversed(branches):
        span.end()
    _call(writers[0], [*history, user("branch 1"), assistant("b1"), user("merge")], block=False)
    views = {_label(v): v for v in _views([s for w in writers for s in w.spans()], store)}
    for index in range(3):
        assert views[f"branch {index}"].parent == views["plan"].epoch
    assert views["merge"].parent == views["branch 1"].epoch
    assert all(verify(v).status.value == "verified" for v in views.values())
