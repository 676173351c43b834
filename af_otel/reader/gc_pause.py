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

from af_otel import forksafe

__all__ = ["collector_paused"]


class _Pause:
    """The process's one pause: how many pauses each thread holds open, and whether the
    collector was on before the first (``resume``; None while no pause is open)."""

    def __init__(self) -> None:
        self.lock = forksafe.lock(self)
        self.depths: dict[int, int] = {}
        self.resume: bool | None = None
        forksafe.on_fork(self, _Pause._keep_own)

    def enter(self) -> None:
        me = threading.get_ident()
        with self.lock:
            if self.resume is None:
                self.resume = gc.isenabled()
                gc.disable()
            self.depths[me] = self.depths.get(me, 0) + 1

    def leave(self) -> None:
        me = threading.get_ident()
        with self.lock:
            left = self.depths.pop(me) - 1
            if left:
                self.depths[me] = left
            elif not self.depths:
                self._restore()

    def _restore(self) -> None:
        # The collector first, then the mark: a fork between the two (see `_keep_own`) still
        # finds the mark and turns the collector on again, which changes nothing.
        if self.resume:
            gc.enable()
        self.resume = None

    def _keep_own(self) -> None:
        """In a forked child only the thread that forked goes on: the pauses the parent's other
        threads held never end there, so they are dropped, and with no pause of its own open
        the collector is as it was before the first (whatever step of `enter` or `leave`
        another thread was at)."""
        me = threading.get_ident()
        own = self.depths.get(me, 0)
        self.depths = {me: own} if own else {}
        if not own and self.resume is not None:
            self._restore()


_PAUSE = _Pause()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector for the block; the outermost pause restores it."""
    _PAUSE.enter()
    try:
        yield
    finally:
        _PAUSE.leave()
