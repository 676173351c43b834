"""The one guard around every emit-path hook: internal errors never reach the application.

Like logfire, the guard re-raises when strictness is on, so that a bug fails the test suite loudly
instead of hiding behind a log line: strict when running under pytest (``PYTEST_CURRENT_TEST`` is
set) or when ``AF_OTEL_STRICT=1``. Otherwise each site logs its first failure once, with the
traceback, and stays quiet after that (a hook that fails on every span must not flood the log).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

ENV_STRICT: Final = "AF_OTEL_STRICT"  # "1": re-raise internal errors (also implied under pytest)

_logger = logging.getLogger("af_otel")
_logged: set[str] = set()
_logged_lock = threading.Lock()


def strict() -> bool:
    """Whether internal errors re-raise: under pytest, or with ``AF_OTEL_STRICT=1``."""
    return os.environ.get(ENV_STRICT) == "1" or "PYTEST_CURRENT_TEST" in os.environ


def report(site: str, exc: BaseException) -> None:
    """Log ``exc`` once per ``site``; the caller has already decided not to re-raise."""
    with _logged_lock:
        first = site not in _logged
        _logged.add(site)
    if first:
        _logger.warning(
            "af_otel: internal error in %s; spans still flow, this site logs once",
            site,
            exc_info=exc,
        )


@contextmanager
def guard(site: str) -> Iterator[None]:
    """Swallow (and log once) any exception raised inside, unless strict mode re-raises it."""
    try:
        yield
    except Exception as exc:
        if strict():
            raise
        report(site, exc)
