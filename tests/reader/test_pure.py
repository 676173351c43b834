"""The reader's core (fold, views, verify, report) imports and works with OpenTelemetry
unavailable: reading traces needs no SDK."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

BLOCKED = textwrap.dedent(
    """
    import importlib.abc
    import sys

    class NoOpenTelemetry(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ImportError(f"blocked for this test: {name}")
            return None

    sys.meta_path.insert(0, NoOpenTelemetry())
    from af_otel import served_views, verify, SERVED_GAPS
    from af_otel.cli.report import render_report
    from tests.reader.synthetic import synthetic_run

    requests = [{"messages": [{"role": "user", "content": "hi"}]},
                {"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "more"}]}]
    views = served_views(synthetic_run("pure", requests, [0, 1]), store="memory-free-dir")
    assert [verify(v).status.value for v in views] == ["verified", "verified"]
    assert "<html" in render_report(views)
    assert not [m for m in sys.modules if m.startswith("opentelemetry")]
    print("ok")
    """
)


def test_the_reader_needs_no_opentelemetry(tmp_path: Path) -> None:
    """With every opentelemetry import refused, spans still become verified views and a page."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(root), "PATH": ""},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
