"""Session-wide test guards.

Strict mode: af_otel re-raises its own internal errors only when asked (``AF_OTEL_STRICT=1``);
the project's tests ask, so a bug fails a test instead of hiding in a log line. Tests that check
the lenient behaviour unset it.

No test writes into the repository: every test gets its own store through ``AF_OTEL_STORE``, so
an engine that falls back to the environment (the completion hook or `llm_call` with no
processor) never writes ``./.af_otel/store``; Hypothesis keeps no example database and its
caches go to the test cache folder outside the repository (see tests/sidevenv.py). The session
holds it: an untracked or ignored path that appears during the run fails it (tests/untouched.py;
under pytest-xdist the controller checks, once).

The fork tests (tests/reliability/test_fork.py) need a child that cannot hang silently. Handlers
registered with ``os.register_at_fork`` run in registration order, and every BatchSpanProcessor an
earlier test made registers one; this one is registered first, at collection, so a child forked
while ``FORK_WATCHDOG`` is set in the environment gets a faulthandler watchdog before any other
handler runs: a stuck child prints every thread's stack to stderr and exits instead of stalling.
"""

from __future__ import annotations

import concurrent.futures.thread  # noqa: F401 - see below
import faulthandler
import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings
from hypothesis.configuration import set_hypothesis_home_dir

from tests import untouched
from tests.sidevenv import cache_dir

# OpenTelemetry SDK 1.45's TracerProvider re-detects its resource in a forked child from an
# at-fork handler, through a ThreadPoolExecutor. concurrent.futures.thread holds its global
# shutdown lock across fork() and releases it in its own after-in-child handler; handlers run in
# registration order, so if that module is first imported after a TracerProvider exists, the
# provider's handler runs first and waits on the still-held lock forever. Importing it here, before
# any provider, puts its handler first. (An SDK ordering bug; docs/processor.md tells users.)

FORK_WATCHDOG = "AF_OTEL_TEST_FORK_WATCHDOG"

os.environ["AF_OTEL_STRICT"] = "1"
# Hypothesis keeps caches in ./.hypothesis unless told otherwise: keep them with the side venvs.
set_hypothesis_home_dir(cache_dir() / "hypothesis")
hypothesis_settings.register_profile("af-otel-tests", database=None)
hypothesis_settings.load_profile("af-otel-tests")


_BEFORE = pytest.StashKey[frozenset[str] | None]()


def _controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")  # an xdist worker has it; a plain run never does


def pytest_sessionstart(session: pytest.Session) -> None:
    if _controller(session.config):
        session.config.stash[_BEFORE] = untouched.snapshot(session.config.rootpath)


def pytest_sessionfinish(session: pytest.Session) -> None:
    before = session.config.stash.get(_BEFORE, None)
    if before is None or not _controller(session.config):
        return
    after = untouched.snapshot(session.config.rootpath)
    paths = untouched.appeared(before, after or frozenset())
    if paths:
        message = untouched.complaint(session.config.rootpath, paths)
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write("\n")
            reporter.write_sep("=", "the repository changed", red=True)
            reporter.write_line(message, red=True)
        else:
            sys.stderr.write(message + "\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def _store_outside_the_repository(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    store = tmp_path_factory.mktemp("af-otel-store")
    monkeypatch.setenv("AF_OTEL_STORE", str(store))
    return store


def _after_in_child() -> None:
    seconds = os.environ.get(FORK_WATCHDOG)
    if seconds:
        faulthandler.dump_traceback_later(int(seconds), exit=True, file=sys.stderr)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_in_child)
