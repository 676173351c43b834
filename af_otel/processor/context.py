"""What an open `af_otel.run` block declares: the run id (a context variable, so threads and
asyncio tasks each see their own) and the base the run starts from (read at the run's first call)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextvars import ContextVar
from typing import Final

from af_otel.model import Request

current_run: ContextVar[str | None] = ContextVar("af_otel_run", default=None)

# Bounded like the run table: a block that never exits must not hold memory forever.
MAX_DECLARED: Final = 10_000
_declared: OrderedDict[str, Request] = OrderedDict()
_declared_lock = threading.Lock()


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
