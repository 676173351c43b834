"""A real Arize Phoenix server for live tests: pinned in a side venv, one per test session.

Phoenix is not a dependency of af_otel; it is a server the tests talk to over HTTP, so it lives in
its own side venv (tests/sidevenv.py: ``phoenix-venv`` in the test cache, never in the
repository), built from PyPI on first use under a file lock and reused while its pin is unchanged.
Each server gets free loopback ports and a temporary working directory, and runs offline.

    with running_phoenix(tmp_path) as base_url: ...     # or the `phoenix_url` fixture
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import httpx
import pytest

from tests.sidevenv import CACHE, Env, ensure

__all__ = ["PHOENIX_PIN", "phoenix_url", "phoenix_venv", "running_phoenix"]

# Bumping the pin rebuilds the side venv on the next run.
PHOENIX_PIN: Final = "arize-phoenix==20.26.1"
_STARTUP_SECONDS: Final = 180  # a cold start compiles and migrates its SQLite database


# The pin file keeps the name it had before the side venvs shared one build rule, so a venv
# built then is reused, not rebuilt.
PHOENIX: Final = Env("phoenix", CACHE / "phoenix-venv", (PHOENIX_PIN,), stamp_name=".af-otel-pin")


def phoenix_venv() -> Path:
    """The side venv's ``phoenix`` command, building the venv when missing or pinned otherwise."""
    return ensure(PHOENIX).parent / "phoenix"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def running_phoenix(tmp_path: Path) -> Iterator[str]:
    """Start Phoenix on free loopback ports with its data under ``tmp_path``; yield its base URL.

    The server is stopped (and its data left in ``tmp_path``) when the block exits. A server that
    does not come up raises with the end of its log.
    """
    command = phoenix_venv()
    port, grpc_port = _free_port(), _free_port()
    work = tmp_path / "phoenix"
    work.mkdir(parents=True, exist_ok=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PHOENIX_", "OTEL_"))  # a developer's shell must not steer it
    }
    env.update(
        PHOENIX_WORKING_DIR=str(work),
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(port),
        PHOENIX_GRPC_PORT=str(grpc_port),
        PHOENIX_TELEMETRY_ENABLED="false",
        OTEL_SDK_DISABLED="true",
    )
    log_path = work / "server.log"
    base_url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(command), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=work
        )
        try:
            _wait_until_up(base_url, process, log_path)
            yield base_url
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)


def _wait_until_up(base_url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + _STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"phoenix exited ({process.returncode}) before serving:\n{_tail(log_path)}"
            )
        try:
            if httpx.get(base_url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"phoenix did not answer {base_url}/healthz in time:\n{_tail(log_path)}")


def _tail(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")[-4000:]


@pytest.fixture(scope="session")
def phoenix_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Phoenix server for the session; tests keep apart by using their own project names."""
    with running_phoenix(tmp_path_factory.mktemp("phoenix")) as base_url:
        yield base_url
