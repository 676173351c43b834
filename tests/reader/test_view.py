"""`served_views`: one frozen view per LLM call, rebuilt from the record alone, with its gaps."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from af_otel import names
from af_otel.model import Request
from af_otel.processor import run
from af_otel.reader.gaps import CAUSE_NOT_COMMITTED, CAUSE_SHAPE_REJECTED
from af_otel.reader.records import SpanKind, SpanRecord
from af_otel.reader.verify import verify
from af_otel.reader.view import ServedView, served_views
from af_otel.store import LocalStore, Store

from .recordings import (
    SYSTEM,
    WEATHER,
    agent,
    assistant,
    record_agent,
    recorder,
    replace_span,
    span_of,
    tool_turn,
    user,
    with_attributes,
)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return LocalStore(tmp_path / "store")


def test_each_call_is_rebuilt_as_sent(store: Store) -> None:
    """The view's request equals the request the call was made with, field for field."""
    sent: list[dict[str, Any]] = []
    with recorder(store) as rec, run("r"):
        history = [user("first")]
        for turn in range(3):
            rec.chat(history)
            sent.append({"system": SYSTEM, "messages": list(history), "tools": [WEATHER]})
            history = [*history, *tool_turn(turn), assistant(f"a{turn}"), user(f"q{turn}")]
        spans = rec.records()
    views = served_views(spans, store=store)
    assert [(v.run_id, v.epoch, v.parent) for v in views] == [("r", 1, 0), ("r", 2, 1), ("r", 3, 2)]
    for view, request in zip(views, sent, strict=True):
        expected = Request.from_dict(
            {
                **request,
                "params": {"temperature": 0.2},
                "model": "gpt-4o-mini",
                "provider": "anthropic",
            }
        )
        assert view.request == expected
        assert view.model == "gpt-4o-mini"
        assert view.provider == "anthropic"
        span = span_of(spans, view.epoch)
        assert (view.span_id, view.trace_id, view.name) == (span.span_id, span.trace_id, span.name)
        assert view.service == span.service_name


def test_parallel_calls_share_a_parent_and_keep_their_own_turns(store: Store) -> None:
    """A fan-out's two calls both build on the call before and each shows only its own turns."""
    spans = record_agent(store, turns=3, fan_out_at=2)
    views = {v.epoch: v for v in served_views(spans, store=store)}
    assert views[2].parent == views[3].parent == 1
    assert views[3].messages is not None
    assert views[2].messages is not None
    assert views[3].messages[: len(views[2].messages)] == views[2].messages
    assert views[3].messages[-1]["parts"][0]["content"] == "(a parallel branch)"
    assert views[4].parent == 2


def test_a_run_with_a_base_shows_what_the_base_held(store: Store) -> None:
    """The base's turns are part of every view, and the view names the base's address."""
    base = {"messages": [user("from before"), assistant("ok")]}
    spans = record_agent(store, turns=2, base=base)
    views = served_views(spans, store=store)
    assert views[0].base is not None
    assert views[0].base.startswith("sha256:")
    assert views[0].messages is not None
    assert views[0].messages[0]["parts"][0]["content"] == "from before"
    assert "no-fold-base" not in views[0].gap_kinds


def test_views_are_immutable(store: Store) -> None:
    """Neither the view nor anything inside it can be changed, so later epochs stay as recorded."""
    views = served_views(record_agent(store, turns=3), store=store)
    view = views[0]
    assert view.messages is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.model = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        view.messages[0]["role"] = "system"  # type: ignore[index]
    with pytest.raises(TypeError):
        view.messages[0]["parts"][0]["content"] = "edited"  # type: ignore[index]
    with pytest.raises(AttributeError):
        view.messages.append(user("x"))  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        view.params["temperature"] = 1.0  # type: ignore[index]
    assert views[2].messages is not None
    assert views[2].messages[0]["parts"][0]["content"] == "question 1"


def test_a_call_without_captured_content_is_unknown_not_empty(store: Store) -> None:
    """No receipt and no changes: the view's content is None with no-conversation-on-record, and
    the receipt's absence carries its cause."""
    with recorder(store) as rec, run("blind"):
        rec.chat([user("hello")])
        rec.blind_chat()
        spans = rec.records()
    second = served_views(spans, store=store)[1]
    assert second.messages is None
    assert second.system is None
    assert second.tools is None
    assert second.gap_kinds[:2] == ("no-conversation-on-record", "no-receipt-on-chart")
    no_receipt = second.gap("no-receipt-on-chart")
    assert no_receipt is not None
    assert no_receipt.cause == CAUSE_NOT_COMMITTED
    assert "content-not-captured" in no_receipt.detail
    assert verify(second).status.value == "reconstructed"


def test_a_malformed_receipt_is_rejected_with_its_cause(store: Store) -> None:
    """Receipt attributes that do not add up are rejected, not trusted: the cause says so."""
    spans = record_agent(store, turns=2)
    span = span_of(spans, 2)
    bad = with_attributes(span, af__receipt__messages__count=999)
    view = served_views(replace_span(spans, span, bad), store=store)[1]
    gap = view.gap("no-receipt-on-chart")
    assert gap is not None
    assert gap.cause == CAUSE_SHAPE_REJECTED
    assert view.messages is not None  # the rebuild does not depend on the receipt


def test_content_none_records_no_content(store: Store) -> None:
    """With ``content="none"`` the receipts exist but no payload does: the views say unknown."""
    with recorder(store, content="none") as rec:
        agent(rec, "quiet", 2)
        spans = rec.records()
    views = served_views(spans, store=store)
    assert all(v.messages is None for v in views)
    assert all(v.gap_kinds[0] == "no-conversation-on-record" for v in views)
    assert {verify(v).status.value for v in views} == {"reconstructed"}


def test_a_missing_parent_span_gives_no_run_log_down_its_path(store: Store) -> None:
    """Dropping epoch 2's span marks epochs built on it, not the ones before."""
    spans = record_agent(store, turns=4)
    views = {
        v.epoch: v for v in served_views(replace_span(spans, span_of(spans, 2), None), store=store)
    }
    assert "no-run-log" not in views[1].gap_kinds
    assert "no-run-log" in views[3].gap_kinds
    assert "no-run-log" in views[4].gap_kinds
    assert "epoch 2" in (views[3].gap("no-run-log") or views[1].gaps[0]).detail
    assert verify(views[3]).status.value == "reconstructed"


@pytest.mark.parametrize(
    ("reported", "expected"),
    [(True, [False, False, True, True]), (False, [False, True, True, True])],
)
def test_a_hole_in_the_commit_sequence_gives_no_run_log(
    store: Store, reported: bool, expected: list[bool]
) -> None:
    """A commit event lost from epoch 3 leaves a hole in af.commit.seq: epoch 3 and what builds on
    it carry no-run-log; so does epoch 2 (whose last commit it might have been) unless epoch 3's
    span reports the dropped event."""
    from .recordings import commit_events, edit_events

    spans = record_agent(store, turns=4)
    span = span_of(spans, 3)
    lost = commit_events(span)[0]
    damaged = edit_events(span, lambda e: None if e is lost else e)
    if reported:
        damaged = dataclasses.replace(damaged, dropped_events_count=1)
    views = {v.epoch: v for v in served_views(replace_span(spans, span, damaged), store=store)}
    assert ["no-run-log" in views[e].gap_kinds for e in (1, 2, 3, 4)] == expected
    detail = (views[4].gap("no-run-log") or views[4].gaps[0]).detail
    assert "epoch 3" in detail or "seq 8" in detail


def test_a_missing_base_gives_no_fold_base_and_a_damaged_one_damage(
    store: Store, tmp_path: Path
) -> None:
    """A base the store does not have raises no-fold-base everywhere; one it gives back altered
    is damage, never that gap: every view names the blob and is damaged."""
    base = {"messages": [user("from before")]}
    spans = record_agent(store, turns=2, base=base)
    empty = LocalStore(tmp_path / "empty")
    views = served_views(spans, store=empty)
    assert all(v.gap_kinds[0] == "no-fold-base" for v in views)
    assert all(v.damaged == () for v in views)
    assert {verify(v).status.value for v in views} == {"reconstructed"}
    address = views[0].base
    assert address is not None
    blob = next(p for p in (tmp_path / "store").rglob("*") if p.is_file() and address[9:] == p.name)
    blob.chmod(0o644)
    blob.write_bytes(b'{"messages":[]}')
    damaged = served_views(spans, store=store)
    assert all("no-fold-base" not in v.gap_kinds for v in damaged)
    assert all([d.address for d in v.damaged] == [address] for v in damaged)
    verdicts = [verify(v) for v in damaged]
    assert {v.status.value for v in verdicts} == {"damaged"}
    assert all(address in v.reason and v.field == "base" for v in verdicts)


def test_spans_that_are_not_llm_calls_are_ignored_and_runless_calls_kept(store: Store) -> None:
    """Plain spans give no view; an LLM-call span naming no run gives one that says so."""
    spans = record_agent(store, turns=1)
    plain = SpanRecord("a" * 32, "b" * 16, None, "db.query", SpanKind.CLIENT, 1, 2)
    loose = SpanRecord(
        "a" * 32,
        "c" * 16,
        None,
        "chat x",
        SpanKind.CLIENT,
        3,
        4,
        attributes={names.RECEIPT_STATE: "absent", names.RECEIPT_ABSENT_REASON: "no-run-id"},
    )
    views = served_views((*spans, plain, loose), store=store)
    assert len(views) == 2
    assert views[1].run_id is None
    assert views[1].messages is None
    assert views[1].gap_kinds[:3] == (
        "no-run-log",
        "no-conversation-on-record",
        "no-receipt-on-chart",
    )


def test_the_store_may_be_given_as_a_url_or_taken_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``store`` accepts a URL; without one, AF_OTEL_STORE is used."""
    store = LocalStore(tmp_path / "s")
    spans = record_agent(store, turns=1, base={"messages": [user("x")]})
    assert "no-fold-base" not in served_views(spans, store=str(tmp_path / "s"))[0].gap_kinds
    monkeypatch.setenv(names.ENV_STORE, str(tmp_path / "s"))
    assert "no-fold-base" not in served_views(spans)[0].gap_kinds


def test_sealed_reasoning_and_forced_tools_are_caveats(store: Store) -> None:
    """Reasoning without content raises thinking-replay; a forced tool with no schema on record
    raises forced-tool-schema; both leave the epoch verified."""
    reasoning = {
        "role": "assistant",
        "parts": [{"type": "reasoning", "content": ""}, {"type": "text", "content": "ok"}],
    }
    with recorder(store) as rec:
        with run("think"):
            rec.chat([user("q"), reasoning, user("again")])
        with run("forced"):
            rec.openinference_chat(
                [{"role": "user", "content": "weather?"}],
                [{"type": "function", "function": {"name": "lookup"}}],
                {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
            )
        spans = rec.records()
    think, forced = served_views(spans, store=store)
    assert "thinking-replay" in think.gap_kinds
    assert "forced-tool-schema" in forced.gap_kinds
    assert verify(think).status.value == verify(forced).status.value == "verified"


def test_a_second_span_claiming_an_epoch_is_not_trusted(store: Store) -> None:
    """Two spans with one epoch number (a restarted writer, a copy) both get no-run-log."""
    spans = record_agent(store, turns=2)
    copy = dataclasses.replace(span_of(spans, 2), span_id="f" * 16)
    views = served_views((*spans, copy), store=store)
    twos = [v for v in views if v.epoch == 2]
    assert len(twos) == 2
    assert all("no-run-log" in v.gap_kinds for v in twos)


def test_the_parent_view_is_reachable(store: Store) -> None:
    """Each view links to the view its changes apply to (None at the base)."""
    views = served_views(record_agent(store, turns=3), store=store)
    assert views[0].parent_view is None
    assert views[2].parent_view is views[1]
    assert isinstance(views[1], ServedView)
