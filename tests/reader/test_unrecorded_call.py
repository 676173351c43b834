"""A model call that left no span is named on the call that carries its answer (`unrecorded-call`),
whatever instrumentation wrote the run; tool loops and chats whose every call is on record are not."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from af_otel import names
from af_otel.reader.verify import VerdictStatus, verify
from af_otel.reader.view import ServedView, model_turns, served_views
from af_otel.store import LocalStore

from .recordings import assistant, user
from .synthetic import synthetic_run


def call(call_id: str) -> dict[str, Any]:
    part = {"type": "tool_call", "id": call_id, "name": "get_weather", "arguments": {"city": "x"}}
    return {"role": "assistant", "parts": [part]}


def result(call_id: str, role: str = "tool") -> dict[str, Any]:
    part = {"type": "tool_call_response", "id": call_id, "response": "sunny"}
    return {"role": role, "parts": [part]}


def views_of(
    requests: Sequence[Sequence[Any]],
    parents: Sequence[int],
    source: str = names.SOURCE_INSTRUMENTATION,
) -> list[ServedView]:
    """The run's views; ``source`` is where the writer read each request (wire: the body the
    client sent)."""
    with tempfile.TemporaryDirectory() as directory:
        spans = synthetic_run(
            "run-u",
            [{"messages": list(m), "model": "m"} for m in requests],
            parents,
            store=LocalStore(directory),
            source=source,
        )
        return list(served_views(spans, store=LocalStore(directory)))


def test_a_tool_loop_and_a_chat_are_one_model_turn_each() -> None:
    """The parent's answer: tool calls and their results (one message of calls, calls replayed
    one item at a time, Anthropic's results as a user turn), or an answer and the next question."""
    assert model_turns([call("a"), result("a"), result("b")]) == [0]
    assert model_turns([call("a"), result("a"), call("b"), result("b")]) == [0]
    assert model_turns([call("a"), result("a", role="user"), assistant("done")]) == [0]
    assert model_turns([assistant("hi"), user("and?")]) == [0]
    assert model_turns([user("q"), assistant("a"), user("q2")], 1) == [1]


def test_two_answers_after_new_input_are_two_turns() -> None:
    """A model message after a user, system or developer message starts a turn of its own."""
    assert model_turns([assistant("a"), user("go on"), assistant("b"), user("q")]) == [0, 2]
    system = {"role": "system", "parts": [{"type": "text", "content": "note"}]}
    assert model_turns([assistant("a"), system, assistant("b")]) == [0, 2]
    assert model_turns([call("a"), result("a"), assistant("b"), user("q"), call("c")]) == [0, 4]


def test_a_call_missing_between_two_recorded_calls_is_named() -> None:
    """Epoch 2 grew from epoch 1 by two answers: the call that gave the second is not on record,
    the gap says where its answer starts, and the epoch is reconstructed, not verified."""
    first = [user("q1")]
    last = [*first, assistant("a1"), user("q2"), assistant("a2"), user("q3")]
    one, two = views_of([first, last], [0, 1])
    assert one.gap(names.GAP_UNRECORDED_CALL) is None
    found = two.gap(names.GAP_UNRECORDED_CALL)
    assert found is not None, two.gap_kinds
    assert "since epoch 1" in found.detail, found.detail
    assert "#3" in found.detail, found.detail
    assert verify(one).status is VerdictStatus.VERIFIED
    verdict = verify(two)
    assert verdict.status is VerdictStatus.RECONSTRUCTED
    assert "unrecorded-call" in verdict.reason


@pytest.mark.parametrize(
    ("source", "status"),
    [
        (names.SOURCE_WIRE, VerdictStatus.VERIFIED),
        (names.SOURCE_INSTRUMENTATION, VerdictStatus.RECONSTRUCTED),
    ],
)
def test_the_hole_holds_back_only_a_call_minted_from_its_record(
    source: str, status: VerdictStatus
) -> None:
    """The same hole on a call minted from the body its client sent: the gap is about the call
    in between, and this call's receipt fingerprints its whole request, so it verifies with the
    gap standing; minted from an instrumentation's record, the record around it is partial."""
    first = [user("q1")]
    last = [*first, assistant("a1"), user("q2"), assistant("a2"), user("q3")]
    _, two = views_of([first, last], [0, 1], source)
    assert two.source == source
    assert two.gap(names.GAP_UNRECORDED_CALL) is not None, two.gap_kinds
    assert verify(two).status is status


def test_a_source_rewritten_to_wire_after_minting_is_damage() -> None:
    """Claiming the wire for a call minted from a record, to slip the hole past `verified`:
    af-2's digest binds ``af.receipt.source``, so the edit reads damaged, never verified."""
    first = [user("q1")]
    last = [*first, assistant("a1"), user("q2"), assistant("a2"), user("q3")]
    with tempfile.TemporaryDirectory() as directory:
        store = LocalStore(directory)
        spans = synthetic_run(
            "run-u", [{"messages": m, "model": "m"} for m in (first, last)], [0, 1], store=store
        )
        edited = replace(
            spans[1], attributes={**spans[1].attributes, names.RECEIPT_SOURCE: names.SOURCE_WIRE}
        )
        _, two = served_views((spans[0], edited), store=store)
        assert two.source == names.SOURCE_WIRE
        verdict = verify(two)
    assert verdict.status is VerdictStatus.DAMAGED, verdict.reason


def test_the_same_conversation_with_every_call_on_record_is_verified() -> None:
    """With the middle call's span there, no gap and every epoch verified."""
    first = [user("q1")]
    middle = [*first, assistant("a1"), user("q2")]
    last = [*middle, assistant("a2"), user("q3")]
    views = views_of([first, middle, last], [0, 1, 2])
    assert [v.gap(names.GAP_UNRECORDED_CALL) for v in views] == [None, None, None]
    assert {verify(v).status for v in views} == {VerdictStatus.VERIFIED}


def test_a_recorded_call_whose_history_was_edited_since_still_counts() -> None:
    """The call that gave the second answer is on record, but the history carried on edited an
    earlier turn, so its request is not a prefix: same length and same last message clear it."""
    first = [user("q1")]
    middle = [*first, assistant("a1"), user("q2")]
    last = [user("q1"), assistant("a1, trimmed"), user("q2"), assistant("a2"), user("q3")]
    views = views_of([first, middle, last], [0, 1, 1])
    assert views[2].gap(names.GAP_UNRECORDED_CALL) is None, views[2].gap_kinds


def test_a_fan_in_the_application_merged_is_not_counted() -> None:
    """Two calls beside the last one were served the same history and a branch question each;
    the answer the application merged from theirs is accounted for. Without them it is not."""
    first = [user("task")]
    turn = [*first, assistant("a0"), user("f0")]
    history = [*turn, assistant("a1"), user("f1")]
    left, right = [*history, user("left")], [*history, user("right")]
    final = [*history, assistant("merged")]
    views = views_of([first, turn, left, right, final], [0, 1, 2, 2, 2])
    assert [v.epoch for v in views if v.gap(names.GAP_UNRECORDED_CALL)] == []
    alone = views_of([first, turn, final], [0, 1, 2])
    assert alone[2].gap(names.GAP_UNRECORDED_CALL) is not None


def test_a_request_that_drops_part_of_its_parent_is_not_counted() -> None:
    """What a request appends is counted only when it carries all of its parent's messages."""
    first = [user("q1"), assistant("a0"), user("q1b")]
    last = [user("q1"), assistant("a1"), user("q2"), assistant("a2"), user("q3")]
    views = views_of([first, last], [0, 1])
    assert views[1].gap(names.GAP_UNRECORDED_CALL) is None, views[1].gap_kinds


# -- a simulated agent: every call recorded, then one left out --------------------------------


@st.composite
def conversations(draw: st.DrawFn) -> list[tuple[list[Any], bool]]:
    """Each model call's request, and whether it asked after new input (a user turn): an agent
    that answers, or calls tools (in one message, or one item a call with its result after it)."""
    history: list[Any] = [user("start")]
    calls: list[tuple[list[Any], bool]] = []
    for index in range(draw(st.integers(2, 8))):
        after_input = history[-1]["role"] == "user" and history[-1]["parts"][0]["type"] == "text"
        calls.append((list(history), after_input))
        style = draw(st.sampled_from(["answer", "calls", "items", "interleaved"]))
        ids = [f"c{index}_{n}" for n in range(draw(st.integers(1, 3)))]
        if style == "answer":
            history += [assistant(f"answer {index}"), user(f"question {index}")]
        elif style == "calls":
            parts = [call(i)["parts"][0] for i in ids]
            history += [{"role": "assistant", "parts": parts}, *(result(i) for i in ids)]
        elif style == "items":
            history += [*(call(i) for i in ids), *(result(i) for i in ids)]
        else:
            for i in ids:
                history += [call(i), result(i)]
    return calls


@given(conversations())
@settings(max_examples=40, deadline=None)
def test_no_gap_while_every_call_is_on_record(calls: list[tuple[list[Any], bool]]) -> None:
    """An agent's calls, chats and tool loops of every shape, all recorded: no unrecorded-call."""
    views = views_of([r for r, _ in calls], list(range(len(calls))))
    assert not [v.epoch for v in views if v.gap(names.GAP_UNRECORDED_CALL)]


@given(conversations(), st.data())
@settings(max_examples=40, deadline=None)
def test_a_call_asked_after_new_input_and_left_out_is_named(
    calls: list[tuple[list[Any], bool]], data: st.DataObject
) -> None:
    """Leave out one call that answered a user turn (not the first or last): the next call,
    whose parent is now the one before, carries the gap; no other call does."""
    inner = [k for k in range(1, len(calls) - 1) if calls[k][1]]
    assume(inner)  # a draw with no such call to leave out tests nothing: draw another
    gone = data.draw(st.sampled_from(inner))
    kept = [r for k, (r, _) in enumerate(calls) if k != gone]
    views = views_of(kept, list(range(len(kept))))
    flagged = [v.epoch for v in views if v.gap(names.GAP_UNRECORDED_CALL)]
    assert flagged == [gone + 1], (gone, flagged)  # epochs count from 1; the next call's
