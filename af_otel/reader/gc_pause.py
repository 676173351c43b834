"""The reader's bulk builds run with CPython's cyclic garbage collector paused.

Rebuilding a run's views allocates tens of thousands of containers (a message is a dict, its parts
a tuple of dicts) that all live until the views are dropped and never form a cycle. The collector
counts container allocations and, every 700, walks the young ones; every tenth such pass it walks
the middle generation, and once the survivors outgrow a quarter of the heap, all of it. On a
1,000-turn run it makes about 170 passes that free nothing and take a tenth of the read, and each
pass over the old generation pushes the reader's own data out of the CPU caches, so the read grows
faster than the run. Reference counting still frees everything that is dropped; only cycles
(which the reader does not make) wait for the collector, and it runs again as soon as the build
ends. The same pause is what Mercurial's ``nogc`` does for its large builds.

The collector's switch is one per process: the pause nests (concurrent reads in threads keep it
paused until the last one ends) and restores what it found, so a process that turned the collector
off keeps it off.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


class _Pause:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.resume = False


_PAUSE = _Pause()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector for the block; the outermost pause restores it."""
    with _PAUSE.lock:
        if _PAUSE.depth == 0:
            _PAUSE.resume = gc.isenabled()
            gc.disable()
        _PAUSE.depth += 1
    try:
        yield
    finally:
        with _PAUSE.lock:
            _PAUSE.depth -= 1
            if _PAUSE.depth == 0 and _PAUSE.resume:
                gc.enable()
