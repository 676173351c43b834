"""Counting the calls a piece of code makes, a measure the machine's load does not move: used by
tests/processor/test_flat_work.py and by the cost curves of benchmarks/processor.py
(benchmarks/lanes.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType


def calls_in(action: Callable[[], object]) -> int:
    """How many Python functions and builtins ``action`` calls on this thread
    (``sys.setprofile``)."""
    count = 0

    def counted(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(counted)
    try:
        action()
    finally:
        sys.setprofile(None)
    return count
