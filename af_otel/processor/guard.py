"""The one guard around every emit-path hook: internal errors never reach the application.

Strict mode re-raises instead, so that a bug fails a test suite loudly: only on request
(``AF_OTEL_STRICT=1``; the project's own tests set it), never because of where af_otel runs, since
an application's own test suite is still an application. Otherwise each site logs its first
failure once, with the traceback, and stays quiet after that (a hook that fails on every span must
not flood the log).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from af_otel import forksafe
from af_otel.processor.settings import strict

__all__ = ["guard", "report", "settle", "strict"]

_logger = logging.getLogger("af_otel")
_logged: set[str] = set()
_logged_lock = forksafe.lock()


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


def settle(site: str, exc: BaseException) -> None:
    """Re-raise ``exc`` in strict mode, else log it once per ``site``."""
    if strict():
        raise exc
    report(site, exc)


@contextmanager
def guard(site: str) -> Iterator[None]:
    """Swallow (and log once) any exception raised inside, unless strict mode re-raises it."""
    try:
        yield
    except Exception as exc:
        settle(site, exc)
