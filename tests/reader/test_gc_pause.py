"""The reader pauses CPython's cyclic collector while it builds views and verdicts, and gives it
back as it found it: on, off, nested, across threads, after an error."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from af_otel.reader.gc_pause import collector_paused
from af_otel.reader.verify import VerdictStatus, verify
from af_otel.reader.view import served_views
from af_otel.store import LocalStore

from .recordings import record_agent

BASE = {
    "system": [{"type": "text", "content": "You are terse."}],
    "messages": [{"role": "user", "parts": [{"type": "text", "content": "earlier"}]}],
}


class WatchingStore(LocalStore):
    """A local store that notes whether the collector was on at each read."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.collector_on: list[bool] = []

    def get(self, address: str) -> bytes:
        self.collector_on.append(gc.isenabled())
        return super().get(address)


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if not was:
            gc.disable()


@pytest.mark.usefixtures("collector_on")
def test_views_are_built_with_the_collector_paused_and_it_runs_again_after(
    tmp_path: Path,
) -> None:
    store = WatchingStore(tmp_path / "store")
    spans = record_agent(store, turns=3, base=BASE)
    store.collector_on.clear()
    views = served_views(spans, store=store)
    assert store.collector_on  # the base was read
    assert not any(store.collector_on)  # with the collector paused
    assert gc.isenabled()
    verdicts = verify(views)
    assert [v.status for v in verdicts] == [VerdictStatus.VERIFIED] * len(views)
    assert gc.isenabled()


def test_a_process_that_turned_the_collector_off_keeps_it_off(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    spans = record_agent(store, turns=2, base=BASE)
    was = gc.isenabled()
    gc.disable()
    try:
        verify(served_views(spans, store=store))
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


@pytest.mark.usefixtures("collector_on")
def test_pauses_nest_and_an_error_still_resumes() -> None:
    held: list[bool] = []

    def nested() -> None:
        with collector_paused():
            with collector_paused():
                held.append(gc.isenabled())
            held.append(gc.isenabled())  # the outer pause still holds
            raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        nested()
    assert held == [False, False]
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_overlapping_reads_in_threads_resume_when_the_last_one_ends() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with collector_paused():
            second_in.set()
            first_out.wait(5)
            seen["after the first ended"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == {"after the first ended": False}
    assert gc.isenabled()
