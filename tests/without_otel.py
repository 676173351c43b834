"""Run Python code in a fresh interpreter in which every OpenTelemetry import fails (or another
package's): how a test proves that a part of af_otel (the pure core, the reader) needs no SDK, or
that an optional extra is optional."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

BLOCKER = textwrap.dedent(
    """
    import importlib.abc
    import sys

    class Blocked(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] == BLOCKED:
                raise ImportError(f"blocked for this test: {name}")
            return None

    sys.meta_path.insert(0, Blocked())
    for name in [m for m in sys.modules if m.split(".")[0] == BLOCKED]:
        del sys.modules[name]
    """
)


def run_without(
    code: str, *, blocked: str = "opentelemetry", **options: Any
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (dedented) after the blocker of the top-level package ``blocked``;
    ``options`` go to `subprocess.run` (cwd, env)."""
    return subprocess.run(
        [sys.executable, "-c", f"BLOCKED = {blocked!r}\n" + BLOCKER + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        **options,
    )
