"""The run table's bounds (LRU past max_runs, idle expiry, release when the root ends), the
parent rule (the longest message prefix) and the lane each run state numbers in."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from af_otel.model import Request
from af_otel.processor.run_table import HISTORY_DEPTH, STATE_DEPTH, Finished, RunState, RunTable
from af_otel.receipts import Receipt


def test_least_recently_used_run_is_evicted_past_the_bound() -> None:
    """The table never holds more than max_runs runs; the oldest goes first."""
    table = RunTable(max_runs=3)
    a, b, _ = (table.get(run_id) for run_id in ("a", "b", "c"))
    table.get("a")
    table.get("d")
    assert len(table) == 3
    assert table.get("a") is a
    assert table.get("b") is not b  # evicted: served afresh


def test_idle_runs_expire() -> None:
    """A run untouched for longer than idle_seconds is gone at the next access."""
    table = RunTable(idle_seconds=0.01)
    old = table.get("old")
    time.sleep(0.02)
    table.get("new")
    assert table.get("old") is not old


def test_release_waits_for_open_calls() -> None:
    """Releasing a run with a call still open frees it only when that call finishes."""
    table = RunTable()
    run = table.get("r")
    run.number((1, 1), 10)
    table.release("r")
    assert table.get("r") is run
    run.finish((1, 1), Finished(20, 1, None, None))
    table.settle(run)
    assert table.get("r") is not run


def test_finished_history_is_bounded() -> None:
    """A run keeps HISTORY_DEPTH end times and only STATE_DEPTH requests, however long it runs."""
    table = RunTable()
    run = table.get("r")
    for epoch in range(1, 1000):
        key = (1, epoch)
        run.number(key, epoch * 10)
        run.finish(key, Finished(epoch * 10 + 5, epoch, None, None))
    assert len(run.finished) == HISTORY_DEPTH
    assert run.parent_of(10**9) is not None
    assert sum(1 for f in run.finished if f.request is not None) <= STATE_DEPTH


def test_out_of_order_numbering_is_reported() -> None:
    """Numbering a call that started before one already numbered says start order broke."""
    run = RunTable().get("r")
    assert run.number((1, 1), 100) == (1, False)
    assert run.number((1, 2), 50) == (2, True)
    assert run.number((1, 2), 50) == (2, True)


def _finished(run: RunState, end: int, epoch: int, *texts: str) -> None:
    request = Request.from_dict({"messages": [{"role": "user", "content": t} for t in texts]})
    run.finish((1, epoch), Finished(end, epoch, request, None))


def _request(*texts: str) -> Request:
    return Request.from_dict({"messages": [{"role": "user", "content": t} for t in texts]})


def test_parent_is_the_longest_message_prefix_among_calls_finished_before() -> None:
    """After a fan-in the parent is the call the messages grew from, not the last to finish; ties
    go to the latest finished; a call that finished after the start is never the parent."""
    run = RunTable().get("r")
    _finished(run, 10, 1, "plan")
    _finished(run, 20, 2, "plan", "a")
    _finished(run, 30, 3, "plan", "b")
    _finished(run, 40, 4, "plan", "c")
    _finished(run, 60, 5, "plan", "a", "more")
    found = run.parent_of(50, _request("plan", "a", "more", "next"))
    assert found is not None
    assert found.epoch == 2  # 5 is longer but finished after 50
    found = run.parent_of(70, _request("plan", "a", "more", "next"))
    assert found is not None
    assert found.epoch == 5
    _finished(run, 45, 6, "plan", "b")
    found = run.parent_of(50, _request("plan", "b", "x"))
    assert found is not None
    assert found.epoch == 6  # 3 and 6 hold the same prefix: the latest finished


def test_without_a_prefix_the_last_finished_call_is_the_basis() -> None:
    """When no held request is a prefix (the history was rewritten), the call that finished last
    before the start is named, so the commits still diff against a state the run holds."""
    run = RunTable().get("r")
    _finished(run, 10, 1, "a")
    _finished(run, 20, 2, "b")
    found = run.parent_of(30, _request("summary", "c"))
    assert found is not None
    assert found.epoch == 2
    assert run.parent_of(5, _request("a")) is None


@given(st.lists(st.lists(st.sampled_from("xyz"), max_size=4), min_size=1, max_size=8))
def test_the_parent_found_is_a_prefix_and_none_longer_is(histories: list[list[str]]) -> None:
    """Whatever the finished calls held, the parent named holds a prefix of the new call's
    messages and no finished call holds a longer one."""
    run = RunTable().get("r")
    for epoch, texts in enumerate(histories, start=1):
        _finished(run, epoch * 10, epoch, *texts)
    new = ["x", "y", "z", "x", "y"]
    found = run.parent_of(10**6, _request(*new))
    assert found is not None
    prefixes = [len(t) for t in histories if new[: len(t)] == t]
    if prefixes:
        assert found.request is not None
        held = [m["parts"][0]["content"] for m in found.request.messages]
        assert new[: len(held)] == held
        assert len(held) == max(prefixes)


def test_each_run_state_numbers_in_a_lane_of_its_own() -> None:
    """A run freed and served again starts a new lane, so its numbers never collide with the
    numbers it gave before."""
    table = RunTable()
    first = table.get("r")
    assert len(first.lane) == 16
    table.release("r")
    again = table.get("r")
    assert again is not first
    assert again.lane != first.lane


def test_calls_starting_together_on_two_threads_are_no_break_of_order() -> None:
    """Numbered in on_start, a call whose start time is a hair earlier than one numbered just
    before it is not flagged: neither can be the other's parent."""
    run = RunTable().get("r")
    assert run.number((1, 1), 100, at_start=True) == (1, False)
    assert run.number((1, 2), 99, at_start=True) == (2, False)
    assert run.number((1, 3), 98) == (3, True)


def _receipt(epoch: int, entries: tuple[str, ...]) -> Receipt:
    return Receipt("minted", "r", epoch, 0, entries=entries, bytes=len(entries))


@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["extend", "branch", "odd"]), st.integers(0, 40), st.integers(1, 3)
        ),
        min_size=1,
        max_size=3 * STATE_DEPTH,
    )
)
def test_recent_calls_share_their_history_and_give_it_back_exactly(
    steps: list[tuple[str, int, int]],
) -> None:
    """Calls that extend the last call's messages share one tuple with it (and their entries, when
    the receipts agree); each record still gives back its own request and receipt, and the parent
    rule names the same calls as for records that share nothing. ``odd``: an extension whose
    receipt disagrees on the shared entries (kept apart)."""
    shared, apart = RunState("r"), RunState("r")
    made: list[tuple[Request, Receipt]] = []
    for epoch, (kind, pick, added) in enumerate(steps, start=1):
        if kind == "branch" or not made:
            base = made[pick % len(made)][0].messages if made else ()
            prefix = None
            # A full read: equal messages, new objects.
            base = _request(*[m["parts"][0]["content"] for m in base]).messages
        else:
            base = made[-1][0].messages
            prefix = base
        new = _request(*[f"m{epoch}.{i}" for i in range(added)]).messages
        request = Request(messages=base + new)
        entries = tuple(m["parts"][0]["content"] for m in request.messages)
        if kind == "odd":
            entries = ("x", *entries[1:])
        receipt = _receipt(epoch, entries)
        made.append((request, receipt))
        shared.finish((1, epoch), Finished(epoch * 10, epoch, request, receipt), prefix)
        apart.finish((1, epoch), Finished(epoch * 10, epoch, request, receipt))
        for record in shared.finished[-STATE_DEPTH:]:
            want_request, want_receipt = made[record.epoch - 1]
            assert record.request == want_request
            got = record.request
            assert got is not None
            assert all(a is b for a, b in zip(got.messages, want_request.messages, strict=True))
            assert record.receipt == want_receipt
            assert record.receipt is not None
            assert record.receipt.entries == want_receipt.entries
        probe = Request(messages=request.messages + new)
        found = shared.parent_of(10**9, probe, None)
        other = apart.parent_of(10**9, probe, None)
        assert (found and found.epoch) == (other and other.epoch)
    # A conversation that only grows keeps one tuple for all its recent calls.
    if all(kind == "extend" for kind, _, _ in steps):
        tuples = {id(f.messages()[0]) for f in shared.finished[-STATE_DEPTH:] if f.messages()}
        assert len(tuples) == 1
