"""The order of a cost curve's calls, and its flatness line, shared by the curve benchmarks.

A curve is a long run's added CPU per call at several turns; its line is turn 1,000 over turn 10.
Turn 10 is measured twice. A fresh run's calls come between the long run's last ones (`beside`),
so both sides of the ratio see the machine at the same minute, each right after a call of its own
size on a sibling run (not counted), so that it does not meet the cache a turn-1,000 call left.
And the long run's own turn 10 is kept, at its start (`AT_START`), minutes earlier. Each ratio
must hold against both (`flat_line`).

A curve may also run a "cold" fresh run (`COLD`), each of its calls made right after the
application serialized, elsewhere and untimed, a history of the largest turn's size, as the largest
turn's own call follows the serialization of its own text. It says how much of a line is the cache
that work leaves rather than work of the caller's that grows (printed, no target). And the Python
calls one call makes, counted at the largest turn and at the smallest (`calls_in`), show without a
clock whether a step walks the history (`flat_calls`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.counted import calls_in  # the count tests/processor/test_flat_work.py bounds too

__all__ = ["AT_START", "COLD", "beside", "calls_in", "flat_calls", "flat_line", "lane_histories"]

AT_START = 0  # the point of the long run's own turn 10, printed beside the fresh run's
COLD = -1  # the point of the cold run's turn 10, after the application's work of turn 1,000


def beside(
    turns: tuple[int, ...], window: int, *, cold: bool = False
) -> Iterator[tuple[str, int, int | None]]:
    """A curve's calls in the order they are made, as ``(lane, turn, point)``: the long run's
    turns 1 to ``max(turns) + window - 1``, and between its last ones two fresh runs' turns from
    1, each fresh call n right after the long run's n + (``max(turns) - min(turns)``), so that
    its turns from ``min(turns)`` run beside the long run's from ``max(turns)``. The "warm"
    run's call comes first and is not counted: the counted "fresh" call then follows a call of
    its own size, as the long run's own turn 10 followed its turn 9, not a turn-1,000 call.
    ``point``: the window of ``turns`` the call counts for (the smallest the fresh run's, the
    long run's own as `AT_START`), None outside every window. ``cold``: a "cold" run's call of
    the same turn follows each fresh one (`COLD` its point), for the caller to make after the
    application's work."""
    small, large = min(turns), max(turns)
    lead = large - small
    for number in range(1, large + window):
        point = next((n for n in turns if n <= number < n + window), None)
        yield "long", number, AT_START if point == small else point
        if number > lead:
            turn = number - lead
            yield "warm", turn, None
            counted = small <= turn < small + window
            yield "fresh", turn, small if counted else None
            if cold:
                yield "cold", turn, COLD if counted else None


def lane_histories(
    shape: Callable[..., list[Any]], turns: tuple[int, ...], window: int, *, cold: bool = False
) -> dict[str, list[Any]]:
    """Each lane's messages, ``shape(turns, first=...)``: the long run's to its last call, the
    fresh runs' to theirs, each lane's content its own (``first``: where its turns count from)."""
    small, large = min(turns), max(turns)
    out = {
        "long": shape(large + window),
        "warm": shape(small + window, first=2 * 10**6),
        "fresh": shape(small + window, first=10**6),
    }
    if cold:
        out["cold"] = shape(small + window, first=3 * 10**6)
    return out


def flat_line(label: str, at: dict[int, float], turns: tuple[int, ...]) -> bool:
    """Print the largest turn over the smallest on both of its bases, the fresh run's beside it
    and the long run's own at its start; whether both are within 2x. Neither base alone is the
    truth: the fresh run's runs at the same minute as the largest turn but in a process whose heap
    a long run has spread (its warm-up call on a sibling run takes the cold cache a long call
    leaves, which made it read up to twice the long run's own before), while the long run's own
    ran minutes earlier on another minute's machine."""
    small, large = min(turns), max(turns)
    beside_it, own = at[large] / at[small], at[large] / at[AT_START]
    ok = beside_it <= 2.0 and own <= 2.0
    print(
        f"  {label}turn {large:,} / turn {small}   {beside_it:8.2f}x beside it, {own:.2f}x"
        f" against the long run's own turn {small}   target <= 2x (both)"
        f"   {'PASS' if ok else 'FAIL'}"
    )
    if COLD in at:
        print(
            f"  {label}turn {large:,} / turn {small} made after the application's work of turn"
            f" {large:,}   {at[large] / at[COLD]:8.2f}x   (no target: the cache that work leaves)"
        )
    return ok


def flat_calls(label: str, counts: dict[int, int]) -> bool:
    """Print the Python calls of one call at the largest turn and at the smallest (a call at
    turn n sends 2n - 1 messages, as every curve's history has it); whether it makes fewer than
    one more per ten more messages (a step over every message makes one or more per message; C
    work on the bytes, a hash or a serialization, makes a few per piece)."""
    small, large = min(counts), max(counts)
    grown, more = counts[large] - counts[small], 2 * (large - small)
    ok = grown < more / 10
    print(
        f"  {label}Python calls per call: turn {large:,} {counts[large]:,}, turn {small}"
        f" {counts[small]:,}: {grown:+,} for {more:+,} messages   target < 1 per 10"
        f"   {'PASS' if ok else 'FAIL'}"
    )
    return ok
