"""The Pythons the wire scenarios run in: the project's venv, or a pinned side venv for an
instrumentation that cannot share it.

opentelemetry-instrumentation-openai-v2 2.4b0 imports util-genai's ``instruments`` module, which
util-genai 1.2b0 renamed and 1.3b0 (needed by genai-openai and genai-anthropic) does not have, so
it runs against util-genai 1.1b0 in a venv of its own; OpenLLMetry's anthropic instrumentation
gets one too, as its openai one does in tests/semconv. Side venvs live under
``${XDG_CACHE_HOME:-~/.cache}/af-otel-tests/``, are built from the package registry on first use
and reused while their pins are unchanged. af_otel itself is not installed there: the agent finds
it on ``PYTHONPATH`` (the repository root), with its dependencies pinned below.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

CACHE: Final = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "af-otel-tests"
# What af_otel and the agent need besides the instrumentation, at the project venv's releases.
_AGENT_NEEDS: Final = (
    "opentelemetry-sdk==1.45.2",
    "opentelemetry-exporter-otlp-json-file==0.66b1",
    "orjson>=3.10",
)


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


MAIN: Final = Env("main")
OPENAI_V2: Final = Env(
    "openai-v2",
    CACHE / "wire-openai-v2",
    (
        "opentelemetry-instrumentation-openai-v2==2.4b0",
        "opentelemetry-util-genai==1.1b0",
        "openai==3.57.0",
        "httpx>=0.27",  # openai-v2 reads URLs with httpx, whichever HTTP library openai uses
        *_AGENT_NEEDS,
    ),
)
OPENLLMETRY_OPENAI: Final = Env(
    "openllmetry-openai",
    CACHE / "wire-openllmetry-openai",
    ("opentelemetry-instrumentation-openai==0.62.4", "openai==3.57.0", *_AGENT_NEEDS),
)
OPENLLMETRY_ANTHROPIC: Final = Env(
    "openllmetry-anthropic",
    CACHE / "wire-openllmetry-anthropic",
    ("opentelemetry-instrumentation-anthropic==0.62.4", "anthropic==2.14.0", *_AGENT_NEEDS),
)


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
