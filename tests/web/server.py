"""``af-otel serve`` as a real process: Uvicorn on a free loopback port, started and stopped by
the test that needs it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

# How long the server may take to answer its first request on a loaded two-core machine.
START_SECONDS = 90.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_serve(arguments: Sequence[str], folder: Path) -> Iterator[str]:
    """Run ``af-otel serve ARGUMENTS --port P`` and yield ``http://127.0.0.1:P`` once it answers."""
    port = free_port()
    log = folder / f"serve-{port}.log"
    command = [
        sys.executable,
        "-c",
        "import sys; from af_otel.cli import main; sys.exit(main(sys.argv[1:]))",
        "serve",
        *arguments,
        "--port",
        str(port),
    ]
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            if process.poll() is not None:
                pytest.fail(f"af-otel serve exited {process.returncode}: {log.read_text()}")
            try:
                if httpx.get(base + "/", timeout=2.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"af-otel serve did not answer on {base}: {log.read_text()}")
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
