"""Load: 32 threads and 1,000 asyncio tasks interleave 2,000 runs with parallel calls through one
processor; nothing is lost, every receipt equals the one minted for the same run alone, no run's
content or epochs leak into another, and state stays within its documented bounds."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest

from af_otel import ReceiptDigests, Request, forksafe, mint_receipt, names
from af_otel.processor import ReceiptSpanProcessor
from af_otel.processor.run_table import MAX_RUNS

from .agents import (
    Collecting,
    play_concurrently,
    provider_with,
    receipts_by_run,
    run_name,
    script,
)

THREADS = 32
TASKS = 1_000
RUNS = 2_000


def _sequential(indexes: range, **options: Any) -> dict[str, dict[int, dict[str, Any]]]:
    inner = Collecting()
    tracer = provider_with(ReceiptSpanProcessor(inner, **options)).get_tracer("agent")
    for index in indexes:
        script(tracer, index).play()
    return receipts_by_run(inner.spans)


def _concurrent(indexes: range, **options: Any) -> tuple[Collecting, ReceiptSpanProcessor, int]:
    """Half the runs on 32 threads, half as 1,000 asyncio tasks on a loop in its own thread, all
    at once through one processor. Returns the inner processor, the processor and the span count."""
    inner = Collecting()
    processor = ReceiptSpanProcessor(inner, **options)
    tracer = provider_with(processor).get_tracer("agent")
    scripts = [script(tracer, index) for index in indexes]
    failures = play_concurrently(scripts, THREADS, TASKS)
    assert failures == []
    return inner, processor, sum(s.span_count for s in scripts)


@pytest.fixture(scope="module")
def loaded() -> tuple[Collecting, ReceiptSpanProcessor, int]:
    return _concurrent(range(RUNS))


class TestInterleavedRuns:
    def test_every_span_reaches_inner(
        self, loaded: tuple[Collecting, ReceiptSpanProcessor, int]
    ) -> None:
        """Every span started and ended reaches the inner processor, once."""
        inner, _, expected = loaded
        assert inner.started == expected
        assert inner.ended == expected
        assert len({(s.context.trace_id, s.context.span_id) for s in inner.spans}) == expected

    def test_every_call_minted(self, loaded: tuple[Collecting, ReceiptSpanProcessor, int]) -> None:
        """Every LLM call carries a minted receipt: load makes no call fall back to error or absent."""
        inner, _, _ = loaded
        states = [
            s.attributes.get(names.RECEIPT_STATE)
            for s in inner.spans
            if s.attributes and names.EPOCH in s.attributes
        ]
        assert len(states) == RUNS * 5
        assert set(states) == {names.STATE_MINTED}

    def test_receipts_equal_one_at_a_time(
        self, loaded: tuple[Collecting, ReceiptSpanProcessor, int]
    ) -> None:
        """Each run's receipts, epochs, parents, gaps and commits equal those of the run played alone."""
        inner, _, _ = loaded
        assert receipts_by_run(inner.spans) == _sequential(range(RUNS))

    def test_no_leak_between_runs(
        self, loaded: tuple[Collecting, ReceiptSpanProcessor, int]
    ) -> None:
        """Epochs are 1..5 and commit seqs 1..n per run, and no commit carries another run's content."""
        inner, _, _ = loaded
        runs = receipts_by_run(inner.spans)
        assert sorted(runs) == [run_name(i) for i in range(RUNS)]
        for run, epochs in runs.items():
            assert sorted(epochs) == [1, 2, 3, 4, 5], run
            # Fan-out: the two parallel calls share the parent that finished before both started.
            assert epochs[3][names.EPOCH_PARENT] == epochs[4][names.EPOCH_PARENT] == 2
            # The final call's messages extend turn 1's (epoch 2), neither branch's.
            assert epochs[5][names.EPOCH_PARENT] == 2
            seqs = sorted(
                e[1][names.COMMIT_SEQ] for epoch in epochs.values() for e in epoch["events"]
            )
            assert seqs == list(range(1, len(seqs) + 1)), run
            for epoch in epochs.values():
                assert epoch[names.RUN_ID] == run
                for _, event in epoch["events"]:
                    value = str(event.get(names.COMMIT_VALUE, ""))
                    for other in ("run-",):
                        # every run name in a payload is this run's own
                        at = value.find(other)
                        while at != -1:
                            assert value[at : at + len(run)] == run, (run, value)
                            at = value.find(other, at + 1)


def test_run_table_bounded_without_release() -> None:
    """Runs named only by af.run.id (never released) are capped by the run table's bound, and a run
    evicted while idle comes back as a fresh run log, never a wrong one."""
    inner = Collecting(keep=False)
    processor = ReceiptSpanProcessor(inner)
    processor.engine.runs.max_runs = 50
    tracer = provider_with(processor).get_tracer("agent")
    for index in range(400):
        script(tracer, index).play()
    assert len(processor.engine.runs) <= 50
    assert inner.ended == 400 * 6
    assert MAX_RUNS == 10_000  # the documented default bound


def _held(snapshot: tracemalloc.Snapshot) -> int:
    # forksafe's registry of lock owners is one dict for the whole process: its table is sized
    # by every owner alive (other tests' processors included) and resizes in steps, so it is
    # held apart and its owners are counted instead (`_retained_after`).
    skip = tracemalloc.Filter(inclusive=False, filename_pattern=forksafe.__file__)
    return sum(stat.size for stat in snapshot.filter_traces([skip]).statistics("filename"))


def _retained_after(runs: int) -> tuple[int, int, int]:
    """Traced memory held by a processor (and its run table) after ``runs`` runs, its table
    size, and how many more owners forksafe's registry holds than before."""
    inner = Collecting(keep=False)
    processor = ReceiptSpanProcessor(inner)
    processor.engine.runs.max_runs = 100
    tracer = provider_with(processor).get_tracer("agent")
    gc.collect()
    owners = len(forksafe._owned)
    tracemalloc.start()
    try:
        before = _held(tracemalloc.take_snapshot())
        for index in range(runs):
            script(tracer, index, turns=0).play()
        gc.collect()
        held = _held(tracemalloc.take_snapshot()) - before
    finally:
        tracemalloc.stop()
    return held, len(processor.engine.runs), len(forksafe._owned) - owners


def test_memory_flat_past_the_bound() -> None:
    """Memory held after 1,500 runs is within 15% of that after 500: past the run table's bound
    (here 100 runs) nothing grows with the number of runs (benchmarks/soak.py goes to 10,000),
    and the fork registry holds the same number of owners (those of the 100 runs kept)."""
    small, small_runs, small_owners = _retained_after(500)
    large, large_runs, large_owners = _retained_after(1_500)
    assert small_runs == large_runs == 100
    assert large < small * 1.15 + 64 * 1024, (small, large)
    assert large_owners == small_owners, (small_owners, large_owners)


def test_memo_holds_about_what_it_keeps() -> None:
    """A run's digest memo over 1,000 short messages holds well under 1 KiB per message: the pieces
    it keeps cost their own size, not the canonical writer's buffer."""
    messages = [{"role": "user", "content": f"message {i}"} for i in range(1_000)]
    request = Request.from_dict({"messages": messages, "system": "be brief"})
    gc.collect()
    tracemalloc.start()
    try:
        memo = ReceiptDigests()
        before = tracemalloc.get_traced_memory()[0]
        mint_receipt(request, run_id="r", epoch=1, digests=memo)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert memo.retained() >= 1_000
    assert held < 1_000 * 1024, held
