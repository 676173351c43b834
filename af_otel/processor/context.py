"""The explicit run of `af_otel.run`, carried in a context variable so threads and asyncio tasks
each see their own."""

from __future__ import annotations

from contextvars import ContextVar

current_run: ContextVar[str | None] = ContextVar("af_otel_run", default=None)
