"""Fork safety: a child process made by os.fork() mints correctly, and no lock or half-written state
held by another thread of the parent at the moment of the fork can stall or corrupt it."""

from __future__ import annotations

import json
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from af_otel import names
from af_otel.processor import ReceiptSpanProcessor

from .agents import Collecting, provider_with, receipts_by_run, script

CHILD_SECONDS = 10
FORK_WATCHDOG = "AF_OTEL_TEST_FORK_WATCHDOG"  # read by tests/conftest.py


def _read_until_eof(fd: int, pid: int) -> bytes:
    """Read the child's answer; a child that outlives its own alarm by far is killed, not awaited."""
    deadline = time.monotonic() + CHILD_SECONDS + 30
    chunks: list[bytes] = []
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                os.kill(pid, signal.SIGKILL)
                break
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _in_child(work: Callable[[], Any]) -> Any:
    """Run ``work`` in a forked child; return its JSON result, or fail if it hangs or crashes."""
    read, write = os.pipe()
    # tests/conftest.py arms a faulthandler watchdog in the child before any other at-fork handler
    os.environ[FORK_WATCHDOG] = str(CHILD_SECONDS + 5)
    try:
        pid = os.fork()
    finally:
        if os.environ.get(FORK_WATCHDOG):
            os.environ.pop(FORK_WATCHDOG, None)
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        os.close(read)
        code = 0
        try:
            # Default action, whatever handler the parent had (pytest-timeout installs one): a
            # child stuck on a lock dies of SIGALRM instead of running the parent's handler.
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(CHILD_SECONDS)
            payload = json.dumps({"ok": work()}).encode()
        except BaseException as exc:
            payload = json.dumps({"error": repr(exc)}).encode()
            code = 1
        with os.fdopen(write, "wb") as out:
            out.write(payload)
        os._exit(code)
    os.close(write)
    data = _read_until_eof(read, pid)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        pytest.fail(
            f"the child died of signal {os.WTERMSIG(status)} (SIGALRM = a lock held across the fork)"
        )
    result = json.loads(data)
    assert "error" not in result, result["error"]
    return result["ok"]


def _mint_in(
    processor_inner: tuple[ReceiptSpanProcessor, Collecting], index: int
) -> dict[str, Any]:
    processor, inner = processor_inner
    tracer = provider_with(processor).get_tracer("agent")
    before = len(inner.spans)
    script(tracer, index).play()
    return receipts_by_run(inner.spans[before:])


def _expected(index: int) -> dict[str, Any]:
    inner = Collecting()
    tracer = provider_with(ReceiptSpanProcessor(inner)).get_tracer("agent")
    script(tracer, index).play()
    return json.loads(json.dumps(receipts_by_run(inner.spans)))


def test_child_mints_like_a_fresh_process() -> None:
    """After the parent has minted runs, a forked child mints a new run exactly as a fresh processor would."""
    inner = Collecting()
    processor = ReceiptSpanProcessor(inner)
    _mint_in((processor, inner), 1)
    got = _in_child(lambda: _mint_in((processor, inner), 2))
    assert got == _expected(2)


def _locks(processor: ReceiptSpanProcessor) -> dict[str, Any]:
    """The locks a parent thread may hold while it is inside the processor."""
    engine = processor.engine
    run = engine.runs.get("run-00003")
    return {
        "run table": engine.runs._lock,
        "open calls": engine._open_lock,
        "run state": run.lock,
        "digest memo": run.digests.lock,
    }


@pytest.mark.parametrize("which", ["run table", "open calls", "run state", "digest memo"])
def test_lock_held_by_another_thread_at_fork(which: str) -> None:
    """A parent thread inside the processor (holding one of its locks) at the moment of the fork
    does not stall the child: the child mints that same run correctly."""
    inner = Collecting()
    processor = ReceiptSpanProcessor(inner)
    lock = _locks(processor)[which]
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            holding.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait()
    try:
        got = _in_child(lambda: _mint_in((processor, inner), 3))
    finally:
        release.set()
        holder.join()
    assert got == _expected(3)


def test_fork_under_load() -> None:
    """Forking repeatedly while four threads mint through the same processor never stalls a child,
    whether the child uses a new processor or the parent's own."""
    expected = {index: _expected(index) for index in range(50, 55)}
    inner = Collecting(keep=False)
    processor = ReceiptSpanProcessor(inner)
    tracer = provider_with(processor).get_tracer("agent")
    stop = threading.Event()

    def busy(offset: int) -> None:
        index = offset
        while not stop.is_set():
            script(tracer, 100 + index).play()
            index += 4

    threads = [threading.Thread(target=busy, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    try:
        for index, want in expected.items():
            child_inner = Collecting()
            got = _in_child(
                lambda i=index, c=child_inner: _mint_in((ReceiptSpanProcessor(c), c), i)
            )
            assert got == want
            assert _in_child(lambda i=index: _count_in_child(processor, 10 + i)) == 5
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def _count_in_child(processor: ReceiptSpanProcessor, index: int) -> int:
    inner = Collecting()
    shared = ReceiptSpanProcessor(inner)
    shared.engine = processor.engine  # the parent's run table, locks and all
    tracer = provider_with(shared).get_tracer("agent")
    script(tracer, index).play()
    return sum(
        1
        for span in inner.spans
        if (span.attributes or {}).get(names.RECEIPT_STATE) == names.STATE_MINTED
    )
