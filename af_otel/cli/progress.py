"""A progress counter on stderr for long reads: one line, only on a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TextIO, TypeVar

__all__ = ["Progress"]

_T = TypeVar("_T")


class Progress:
    """A one-line counter on stderr, only when stderr is a terminal, at most five times a second."""

    def __init__(self, what: str, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty()
        self.what = what
        self.last = 0.0
        self.shown = False

    def tick(self, done: int, total: int | None = None) -> None:
        now = time.monotonic()
        if not self.live or now - self.last < 0.2:
            return
        self.last = now
        self.shown = True
        of = f"/{total:,}" if total else ""
        self.stream.write(f"\r{self.what} {done:,}{of}")
        self.stream.flush()

    def done(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def over(self, items: Iterable[_T], total: int | None = None) -> Iterator[_T]:
        """``items``, counted as they are handed on (``total``: how many there are, if known)."""
        try:
            for index, item in enumerate(items, start=1):
                yield item
                self.tick(index, total)
        finally:
            self.done()
