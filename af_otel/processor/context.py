"""What an open `af_otel.run` block declares: the run id (a context variable, so threads and
asyncio tasks each see their own) and the base the run starts from (read at the run's first call)."""

from __future__ import annotations

from collections import OrderedDict
from contextvars import ContextVar
from typing import Final

from af_otel import forksafe
from af_otel.model import Request

current_run: ContextVar[str | None] = ContextVar("af_otel_run", default=None)

# Bounded like the run table: a block that never exits must not hold memory forever.
MAX_DECLARED: Final = 10_000
_declared: OrderedDict[str, Request] = OrderedDict()
_declared_lock = forksafe.lock()


def declare_base(run_id: str, base: Request | None) -> None:
    """Record (or with ``None`` withdraw) the base of run ``run_id``."""
    with _declared_lock:
        if base is None:
            _declared.pop(run_id, None)
            return
        _declared[run_id] = base
        while len(_declared) > MAX_DECLARED:
            _declared.popitem(last=False)


def declared_base(run_id: str) -> Request | None:
    """The base an open `af_otel.run` block declared for ``run_id``, if any."""
    with _declared_lock:
        return _declared.get(run_id)


# -- what the exporter form cannot see: which run each span started in -------------------------
#
# The exporter runs on the export thread, after the `af_otel.run` block may have exited, and sees
# no span start. `RunTagger` (around the batch processor) records, for each span started inside a
# block, its run and the base that block declared; the exporter reads and drops the entry when it
# exports the span. Bounded: spans never exported (dropped by a full queue) are evicted oldest first.
MAX_TAGGED: Final = 65_536
_tagged: OrderedDict[tuple[int, int], tuple[str, Request | None]] = OrderedDict()
_tagged_lock = forksafe.lock()
# How many `af_otel.run` blocks were entered: an exporter without a tagger that sees this grow
# knows it cannot place calls in their runs, and says so (see `exporter.py`).
_entries = 0


def tag(key: tuple[int, int], run_id: str) -> None:
    """Record that span ``key`` started inside `af_otel.run` block ``run_id``."""
    base = declared_base(run_id)
    with _tagged_lock:
        _tagged[key] = (run_id, base)
        if len(_tagged) > MAX_TAGGED:
            _tagged.popitem(last=False)


def tagged(key: tuple[int, int]) -> tuple[str, Request | None] | None:
    """The run (and declared base) span ``key`` started in, if a tagger saw it start."""
    with _tagged_lock:
        return _tagged.get(key)


def untag(keys: list[tuple[int, int]]) -> None:
    with _tagged_lock:
        for key in keys:
            _tagged.pop(key, None)


def run_entered() -> None:
    """An `af_otel.run` block opened."""
    global _entries
    with _tagged_lock:
        _entries += 1


def run_entries() -> int:
    with _tagged_lock:
        return _entries
