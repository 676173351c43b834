"""af_otel.forksafe: locks made there come back unlocked in a forked child, each live owner resets
its own state there, nothing keeps a freed owner alive, and a pool's work is never waited for on
threads the child does not have."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from af_otel import forksafe
from af_otel.reader.gc_pause import _PAUSE, collector_paused
from tests.forking import fork_within

SECONDS = 10.0


class Owner:
    def __init__(self) -> None:
        self.lock = forksafe.lock(self)
        self.rlock = forksafe.rlock(self)
        self.state = ["half", "written"]
        forksafe.on_fork(self, Owner.reset)

    def reset(self) -> None:
        self.state = []


class Failing:
    def __init__(self) -> None:
        forksafe.on_fork(self, Failing.reset)

    def reset(self) -> None:
        raise RuntimeError("this owner's reset fails")


@contextmanager
def held(*locks: threading.Lock | threading.RLock) -> Iterator[None]:
    """Each lock held on another thread for the block."""
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        for lock in locks:
            lock.acquire()
        holding.set()
        release.wait()
        for lock in locks:
            lock.release()

    thread = threading.Thread(target=hold)
    thread.start()
    holding.wait()
    try:
        yield
    finally:
        release.set()
        thread.join()


def _ok(work: Callable[[], None]) -> None:
    child = fork_within(work, SECONDS)
    assert not child.hung
    assert child.code == 0, child.error


def test_a_child_gets_every_lock_unlocked_and_each_owner_reset() -> None:
    """Locks another thread holds at the fork (an owner's, a re-entrant one, a process one) are
    free in the child, and each live owner's reset ran, even after another owner's failed."""
    failing = Failing()
    owner = Owner()
    process = forksafe.lock()
    later = Owner()

    def child() -> None:
        for lock in (owner.lock, owner.rlock, process, later.lock):
            assert lock.acquire(blocking=False)
        assert owner.state == []
        assert later.state == []

    with held(owner.lock, owner.rlock, process, later.lock):
        _ok(child)
    assert owner.state == ["half", "written"]  # the parent keeps its own
    del failing


def test_the_registry_does_not_keep_an_owner_alive() -> None:
    """An owner freed is gone from the registry with its locks: a freed run costs nothing here."""
    owner = Owner()
    lock, alive = owner.lock, weakref.ref(owner)
    assert any(made is lock for made in forksafe.locks())
    del owner
    gc.collect()
    assert alive() is None
    assert not any(made is lock for made in forksafe.locks())


def test_a_child_does_the_pools_work_in_flight_itself() -> None:
    """A child forked while the pool's only thread is busy and more work waits in its queue gets
    that work's result by doing it on its own thread, and never waits on the parent's threads."""
    busy, release = threading.Event(), threading.Event()

    def block() -> str:
        busy.set()
        release.wait()
        return "blocked"

    with forksafe.thread_pool(1, "af-otel-test") as pool:
        pool.submit(block)
        busy.wait()
        waiting = pool.submit(lambda: threading.current_thread().name)

        def child() -> None:
            assert waiting() == threading.main_thread().name

        try:
            _ok(child)
        finally:
            release.set()
        assert waiting().startswith("af-otel-test")


def test_a_child_keeps_only_its_own_collector_pauses() -> None:
    """A pause another thread held at the fork never ends in the child, so the child has the
    collector on again; a pause the forking thread itself holds stays until it ends."""
    assert gc.isenabled()
    paused, release = threading.Event(), threading.Event()

    def pause() -> None:
        with collector_paused():
            paused.set()
            release.wait()

    thread = threading.Thread(target=pause)
    thread.start()
    paused.wait()
    try:

        def child() -> None:
            assert gc.isenabled()

        _ok(child)
        _PAUSE.enter()  # the forking thread's own pause, open across the fork
        try:

            def inside() -> None:
                assert not gc.isenabled()
                _PAUSE.leave()
                assert gc.isenabled()  # the other thread's pause no longer counts

            _ok(inside)
        finally:
            _PAUSE.leave()
    finally:
        release.set()
        thread.join()
    assert gc.isenabled()
