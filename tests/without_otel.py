"""Run Python code in a fresh interpreter in which every OpenTelemetry import fails: how a test
proves that a part of af_otel (the pure core, the reader) needs no SDK."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

BLOCKER = textwrap.dedent(
    """
    import importlib.abc
    import sys

    class NoOpenTelemetry(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ImportError(f"blocked for this test: {name}")
            return None

    sys.meta_path.insert(0, NoOpenTelemetry())
    for name in [m for m in sys.modules if m.startswith("opentelemetry")]:
        del sys.modules[name]
    """
)


def run_without_opentelemetry(code: str, **options: Any) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (dedented) after the blocker; ``options`` go to `subprocess.run` (cwd, env)."""
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        **options,
    )
