"""Pinned side venvs for the instrumentations that cannot share the project's venv.

A side venv lives in a cache folder outside the repository (``$AF_OTEL_TEST_CACHE``, else
``${XDG_CACHE_HOME:-~/.cache}/af-otel-tests``; ``make clean`` removes it), is built from the
package registry on first use and reused while its pins are unchanged. tests/semconv/envs.py and
tests/wire/envs.py name the venvs and their pins.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final


def cache_dir() -> Path:
    """Where the side venvs live: outside the repository, so tests leave it as they found it."""
    explicit = os.environ.get("AF_OTEL_TEST_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "af-otel-tests"


CACHE: Final = cache_dir()


@dataclass(frozen=True, slots=True)
class Env:
    """A Python with one instrumentation installed; ``directory`` None is the project's venv."""

    name: str
    directory: Path | None = None
    requirements: tuple[str, ...] = ()

    @property
    def python(self) -> Path:
        if self.directory is None:
            return Path(sys.executable)
        return self.directory / "bin" / "python"


def ensure(env: Env) -> Path:
    """The env's python, creating or rebuilding its venv when its pins changed."""
    if env.directory is None:
        return env.python
    stamp = env.directory / ".af-otel-pins"
    wanted = "\n".join(env.requirements)
    env.directory.parent.mkdir(parents=True, exist_ok=True)
    with open(env.directory.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two pytest runs must not build one venv together
        if env.python.exists() and stamp.exists() and stamp.read_text() == wanted:
            return env.python
        _run([sys.executable, "-m", "venv", "--clear", str(env.directory)])
        _run([str(env.python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
              *env.requirements])  # fmt: skip
        stamp.write_text(wanted)
    return env.python


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-4000:]}"
        )
