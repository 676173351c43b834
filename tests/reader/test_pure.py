"""The reader's core (fold, views, verify, report) imports and works with OpenTelemetry
unavailable: reading traces needs no SDK."""

from __future__ import annotations

from pathlib import Path

from tests.without_otel import run_without

READ = """
    from af_otel import served_views, verify, SERVED_GAPS
    from af_otel.present import render_report
    from tests.reader.synthetic import synthetic_run

    requests = [{"messages": [{"role": "user", "content": "hi"}]},
                {"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "more"}]}]
    views = served_views(synthetic_run("pure", requests, [0, 1]), store="memory-free-dir")
    assert [verify(v).status.value for v in views] == ["verified", "verified"]
    assert "<html" in render_report(views)
    assert not [m for m in sys.modules if m.startswith("opentelemetry")]
    print("ok")
"""


def test_the_reader_needs_no_opentelemetry(tmp_path: Path) -> None:
    """With every opentelemetry import refused, spans still become verified views and a page."""
    root = Path(__file__).resolve().parents[2]
    done = run_without(READ, cwd=tmp_path, env={"PYTHONPATH": str(root), "PATH": ""})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
