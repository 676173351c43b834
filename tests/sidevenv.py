"""Pinned side venvs for the instrumentations and servers that cannot share the project's venv.

A side venv lives in a cache folder outside the repository (``$AF_OTEL_TEST_CACHE``, else
``${XDG_CACHE_HOME:-~/.cache}/af-otel-tests``; ``make clean`` removes it), is built from the
package registry on first use and reused while its pins are unchanged. tests/semconv/envs.py,
tests/wire/envs.py, tests/agents/stack.py, tests/backends/phoenix.py and tests/stacks/gb_envs.py
name the venvs and their pins. A build holds a file lock, so two pytest runs or two xdist workers
never build one venv together: the second waits and then finds it built.

    python -m tests.sidevenv     # the line `make test` prints when some side venv is not built yet
"""

from __future__ import annotations

import fcntl
import importlib
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

# The modules that define side venvs, and what a cold run costs: `make test` prints it.
DEFINED_IN: Final = (
    "tests.semconv.envs",
    "tests.wire.envs",
    "tests.agents.stack",
    "tests.backends.phoenix",
    "tests.stacks.gb_envs",
    "tests.stacks.soa.envs",
)
COLD_RUN: Final = (
    "a cold run (every side venv built, pip's cache empty) took 15 min on this 2-core machine"
    " while other work loaded it (load about 7), a warm one 12"
)


@dataclass(frozen=True, slots=True)
class Env:
    """A Python with one instrumentation installed; ``directory`` None is the project's venv."""

    name: str
    directory: Path | None = None
    requirements: tuple[str, ...] = ()
    stamp_name: str = ".af-otel-pins"  # the file holding the pins the venv was built with

    @property
    def python(self) -> Path:
        if self.directory is None:
            return Path(sys.executable)
        return self.directory / "bin" / "python"

    @property
    def built(self) -> bool:
        """The venv exists and was built with today's pins."""
        if self.directory is None:
            return True
        stamp = self.directory / self.stamp_name
        return self.python.exists() and stamp.exists() and stamp.read_text() == self._pins

    @property
    def _pins(self) -> str:
        return "\n".join(self.requirements)


def ensure(env: Env) -> Path:
    """The env's python, creating or rebuilding its venv when its pins changed."""
    if env.directory is None:
        return env.python
    env.directory.parent.mkdir(parents=True, exist_ok=True)
    with open(env.directory.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two pytest runs must not build one venv together
        if env.built:
            return env.python
        _run([sys.executable, "-m", "venv", "--clear", str(env.directory)])
        _run([str(env.python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
              *env.requirements])  # fmt: skip
        (env.directory / env.stamp_name).write_text(env._pins)
    return env.python


def side_envs() -> tuple[Env, ...]:
    """Every side venv the suite uses, from the modules that define them."""
    found: dict[str, Env] = {}
    for module in DEFINED_IN:
        for value in vars(importlib.import_module(module)).values():
            if isinstance(value, Env) and value.directory is not None:
                found[str(value.directory)] = value
    return tuple(found.values())


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=1200, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-4000:]}"
        )


def main() -> int:
    """Print one line when some side venv is not built yet (this run builds it), else nothing."""
    missing = [env.name for env in side_envs() if not env.built]
    if missing:
        print(
            f"make test: {len(missing)} side venv(s) not built yet ({', '.join(missing)}): this run "
            f"builds them into {CACHE}; {COLD_RUN}."
        )
    return 0


if __name__ == "__main__":  # run as a module: use the importable copy, whose Env the envs name
    from tests.sidevenv import main as imported_main

    sys.exit(imported_main())
