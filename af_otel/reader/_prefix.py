"""How much of one epoch's message list is its parent's: the one question that keeps reading linear.

An epoch's messages are nearly always its parent's messages (the same objects, shared by the fold)
plus a few new ones. Comparing tuples at C speed finds that prefix without a Python loop over the
conversation, so per-epoch work depends on what changed, not on how long the run has been going.
"""

from __future__ import annotations

from typing import Any

__all__ = ["common_prefix"]


def common_prefix(new: tuple[Any, ...], old: tuple[Any, ...]) -> int:
    """The number of leading items ``new`` and ``old`` share (``==``, identity first)."""
    size = min(len(new), len(old))
    if size == 0:
        return 0
    # One slice at most: the shorter list is compared whole (usually the parent's, all shared).
    if (new if len(new) == size else new[:size]) == (old if len(old) == size else old[:size]):
        return size
    # Binary search on slices: each probe is one C-level tuple comparison.
    low, high = 0, size  # new[:low] == old[:low] holds; new[:high] == old[:high] does not
    while high - low > 1:
        middle = (low + high) // 2
        if new[:middle] == old[:middle]:
            low = middle
        else:
            high = middle
    return low
