"""How far two sequences start with the very same (or equal) items, at C speed.

A run's calls share their history's objects (the emit path reads only what is new, see
af_otel/semconv/incremental.py), so "the same item as last call" is mostly an identity test.
Done item by item in Python, that test is what makes a 1,000-turn call slower than a 10-turn one;
``map(operator.is_, ...)`` runs it inside the interpreter's C loop.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

__all__ = ["common_prefix", "equal_prefix", "identical_prefix"]


def identical_prefix(before: Sequence[Any], now: Sequence[Any]) -> int:
    """How many leading items of ``now`` are the very objects at the same place in ``before``."""
    return _first_false(list(map(operator.is_, before, now)))


def equal_prefix(before: Sequence[str], now: Sequence[str]) -> int:
    """How many leading strings of ``now`` equal those at the same place in ``before``."""
    size = min(len(before), len(now))
    # The common case, one tuple comparison (identity first, then ``==``, as below) in C.
    if type(before) is tuple and type(now) is tuple and before[:size] == now[:size]:
        return size
    return _first_false(list(map(operator.eq, before, now)))


def _first_false(flags: list[bool]) -> int:
    if all(flags):  # the common case, at C speed
        return len(flags)
    return flags.index(False)


def common_prefix(new: tuple[Any, ...], old: tuple[Any, ...]) -> int:
    """The number of leading items ``new`` and ``old`` share (``==``, identity first).

    The reader asks this of each epoch and its parent: their messages are nearly always the same
    objects plus a few new ones, so one whole-tuple comparison usually answers it, and otherwise a
    binary search whose every probe is one C-level tuple comparison."""
    size = min(len(new), len(old))
    if size == 0:
        return 0
    if (new if len(new) == size else new[:size]) == (old if len(old) == size else old[:size]):
        return size
    low, high = 0, size  # new[:low] == old[:low] holds; new[:high] == old[:high] does not
    while high - low > 1:
        middle = (low + high) // 2
        if new[:middle] == old[:middle]:
            low = middle
        else:
            high = middle
    return low
