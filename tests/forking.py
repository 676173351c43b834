"""Fork a child that must finish within a deadline: the parent polls it with ``os.waitpid(WNOHANG)``
and kills it when the deadline passes, so a child stuck on a lock fails its test and never hangs
the suite."""

from __future__ import annotations

import os
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

POLL_SECONDS = 0.005


@dataclass(frozen=True, slots=True)
class Child:
    """How a forked child ended: ``hung`` (killed at the deadline), else its exit code and what it
    wrote on failure."""

    hung: bool
    code: int | None
    error: str

    @property
    def ok(self) -> bool:
        return not self.hung and self.code == 0


def fork_within(work: Callable[[], None], seconds: float) -> Child:
    """Run ``work`` in a forked child; the child fails when ``work`` raises, and is killed as hung
    when it has not exited after ``seconds``."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        os.close(read)
        code = 0
        try:
            work()
        except BaseException:
            os.write(write, traceback.format_exc().encode()[-60_000:])
            code = 1
        os._exit(code)
    os.close(write)
    try:
        deadline = time.monotonic() + seconds
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return Child(hung=True, code=None, error="")
            time.sleep(POLL_SECONDS)
        error = _read_all(read)
    finally:
        os.close(read)
    code = os.waitstatus_to_exitcode(status)
    return Child(hung=False, code=code, error=error)


def _read_all(fd: int) -> str:
    chunks = []
    while chunk := os.read(fd, 65536):  # the child has exited: its end is closed
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")
