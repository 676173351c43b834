"""Fork safety, written once: every lock af_otel holds is made here, and a child made by
``os.fork()`` gets each one back unlocked, with the state it guarded reset by its owner.

A fork copies the whole memory but only the thread that forked: a lock another thread held at that
moment stays held in the child forever, and what it guarded may be half-updated. Prefork servers
(gunicorn, uWSGI, Celery) fork after set-up, while export threads may be inside af_otel. So no
other module of the package makes a lock, a queue or a thread (tests/reliability/test_fork.py walks
the source for one, and the live objects for any lock not made here):

* `lock` / `rlock` ``(owner)``: a lock that lives as long as ``owner`` (held weakly, so a freed run
  costs nothing here); with no owner, as long as the process (a module's lock);
* `on_fork` ``(owner, reset)``: what the child does for ``owner`` once every lock is fresh. Each
  owner resets only its own state, so the order of owners does not matter;
* `thread_pool`: worker threads for one call, which a child (that has none of them) never waits on;
* `process_pool`: worker processes for one command, forked from a fork server (a fresh interpreter
  with no thread of this process to copy mid-flight), never from the caller.

One at-fork handler serves the whole package. CPython resets its own locks in a child the same way
(``_at_fork_reinit``: threading, logging, concurrent.futures), in place, so no reference to a lock
held anywhere goes stale. Nothing here takes a lock: registering is a few dict and list steps, each
atomic under the GIL, and a lock is handed to its owner only once registered, so a fork between two
steps finds nothing half-written and no lock held that the child will not reset.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar, cast

__all__ = [
    "Lock",
    "RLock",
    "ThreadPool",
    "lock",
    "locks",
    "on_fork",
    "process_pool",
    "rlock",
    "thread_pool",
]

Lock = threading.Lock
RLock = threading.RLock
T = TypeVar("T")
R = TypeVar("R")


class _Reinit(Protocol):
    def _at_fork_reinit(self) -> None: ...


class _Owner(weakref.ref):  # type: ignore[type-arg]
    """The registry's weak reference to one owner, with what the child resets for it."""

    __slots__ = ("key", "locks", "reset")

    key: int
    locks: list[_Reinit]
    reset: Callable[[Any], None] | None

    def __new__(cls, owner: object, key: int) -> _Owner:
        self = super().__new__(cls, owner, _forget)
        self.key = key
        self.locks = []
        self.reset = None
        return self


_process: list[_Reinit] = []  # the modules' locks: made once, kept for the life of the process
_owned: dict[int, _Owner] = {}  # id(owner) -> its entry, dropped when the owner is freed


def _forget(ref: weakref.ref[Any]) -> None:
    # Called while the owner is being freed, before its id can name another object; the entry
    # is dropped only if it is still this owner's.
    key = cast(_Owner, ref).key
    if _owned.get(key) is ref:
        del _owned[key]


def _entry(owner: object) -> _Owner:
    key = id(owner)
    found = _owned.get(key)
    if found is None or found() is not owner:
        found = _owned[key] = _Owner(owner, key)
    return found


def _register(made: T, owner: object | None) -> T:
    if owner is None:
        _process.append(cast(_Reinit, made))
    else:
        _entry(owner).locks.append(cast(_Reinit, made))
    return made


def lock(owner: object | None = None) -> threading.Lock:
    """A new lock of ``owner`` (weakly referenced), or of the process; unlocked in a forked child."""
    return _register(threading.Lock(), owner)


def rlock(owner: object | None = None) -> threading.RLock:
    """A new re-entrant lock, as `lock`."""
    return _register(threading.RLock(), owner)


def on_fork(owner: T, reset: Callable[[T], None]) -> None:
    """In a forked child, once every lock is fresh, call ``reset(owner)`` while ``owner`` lives."""
    _entry(owner).reset = reset


def locks() -> list[object]:
    """Every lock a forked child would get back unlocked now (what the fork test checks against)."""
    owned = [made for entry in list(_owned.values()) for made in entry.locks]
    return [*_process, *owned]


class ThreadPool:
    """Worker threads for one call (`thread_pool`); a forked child does the work itself."""

    def __init__(self, workers: int, name: str) -> None:
        self._pid = os.getpid()
        self._pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix=name)

    def submit(self, work: Callable[[], R]) -> Callable[[], R]:
        """Start ``work`` on a worker; the call returned waits for its result. In a child forked
        since, it does ``work`` on the caller's thread instead: the child has none of the pool's
        threads, so a future still in flight there would never finish (and its condition may be
        held by a thread the child does not have, so it is not even asked)."""
        if os.getpid() != self._pid:
            return work
        future = self._pool.submit(work)

        def result() -> R:
            return work() if os.getpid() != self._pid else future.result()

        return result

    def close(self) -> None:
        """Shut the pool down, in the process that started its threads (a child leaves it)."""
        if os.getpid() == self._pid:
            self._pool.shutdown(wait=True, cancel_futures=True)


@contextmanager
def thread_pool(workers: int, name: str) -> Iterator[ThreadPool]:
    """A `ThreadPool` of ``workers`` threads named ``name``, closed when the block ends."""
    pool = ThreadPool(workers, name)
    try:
        yield pool
    finally:
        pool.close()


def process_pool(
    workers: int,
    *,
    preload: list[str],
    initializer: Callable[..., object],
    initargs: tuple[Any, ...],
) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes forked from a fork server that imports ``preload`` once;
    each worker runs ``initializer(*initargs)`` first. The caller closes it (``with``)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(preload)
    return ProcessPoolExecutor(
        workers, mp_context=context, initializer=initializer, initargs=initargs
    )


def _after_fork_in_child() -> None:
    for made in _process:
        made._at_fork_reinit()
    owners = [(entry(), entry) for entry in list(_owned.values())]
    live = [(owner, entry) for owner, entry in owners if owner is not None]
    for _, entry in live:
        for made in entry.locks:
            made._at_fork_reinit()
    failed: list[Exception] = []
    for owner, entry in live:
        if entry.reset is not None:
            try:
                entry.reset(owner)
            except Exception as exc:  # one owner failing leaves the others reset
                failed.append(exc)
    if failed:
        raise failed[0]  # Python reports it; the child carries on with every lock fresh


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)
