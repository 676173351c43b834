"""The HTML report escapes every value it renders: prompts, tool schemas, model and run names and
damaged values holding markup are shown as text by a real browser (headless Chromium), and the
page runs no script at all."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import af_otel
from af_otel.store import LocalStore

from .agents import provider_with
from .tamper.generator import attribute, call_span, commits, dump, load

MARK = "pwned"
HOSTILE = [
    f"<script>document.title='{MARK}'</script>",
    f"<img src=x onerror=\"document.title='{MARK}'\">",
    f'"><svg onload="document.title=\'{MARK}\'"></svg>',
    f"</pre></details><iframe srcdoc=\"<script>parent.document.title='{MARK}'</script>\"></iframe>",
    f"<a href=\"javascript:document.title='{MARK}'\">click</a>",
]
RUN = "run-<b>bold</b>&amp;"


def _record(directory: Path) -> tuple[Path, Path]:
    trace_path, store_root = directory / "trace.jsonl", directory / "store"
    provider = provider_with(
        af_otel.ReceiptSpanProcessor(
            SimpleSpanProcessor(FileSpanExporter(trace_path)), store=LocalStore(store_root)
        )
    )
    tracer = provider.get_tracer("agent")
    history: list[dict[str, object]] = []
    with af_otel.run(RUN), tracer.start_as_current_span("agent"):
        for turn, text in enumerate(HOSTILE):
            history.append({"role": "user", "parts": [{"type": "text", "content": text}]})
            attributes = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": f"<i>model</i>{HOSTILE[0]}",
                "gen_ai.provider.name": "openai",
                "gen_ai.system_instructions": json.dumps(
                    [{"type": "text", "content": HOSTILE[turn - 1]}]
                ),
                "gen_ai.tool.definitions": json.dumps(
                    [
                        {
                            "type": "function",
                            "name": f"tool{HOSTILE[1]}",
                            "description": HOSTILE[2],
                            "parameters": {
                                "type": "object",
                                "properties": {HOSTILE[3]: {"type": "string"}},
                            },
                        }
                    ]
                ),
                "gen_ai.input.messages": json.dumps(history),
            }
            with tracer.start_as_current_span("chat model", attributes=attributes):
                pass
            history.append(
                {
                    "role": "assistant",
                    "parts": [
                        {
                            "type": "tool_call",
                            "id": f"c{turn}",
                            "name": HOSTILE[4],
                            "arguments": {"q": text},
                        }
                    ],
                }
            )
    provider.shutdown()
    return trace_path, store_root


def _damage(trace_path: Path) -> None:
    """Edit one recorded message so the report also renders a damaged epoch's values."""
    lines = load(trace_path)
    event = commits(call_span(lines, RUN, 3), "messages")[0]
    value = attribute(event, "af.commit.value")
    messages = json.loads(value["stringValue"])
    messages[-1]["parts"][0]["content"] = f"<script>document.title='{MARK}-damaged'</script>"
    value["stringValue"] = json.dumps(messages)
    dump(lines, trace_path)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("report")
    trace_path, store_root = _record(directory)
    _damage(trace_path)
    out = directory / "report.html"
    af_otel_cli = Path(sys.executable).with_name("af-otel")
    done = subprocess.run(
        [str(af_otel_cli), "report", str(trace_path), "--store", str(store_root), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.exists(), done.stderr
    return out


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "headless Chromium is needed (make test installs it: .ci/system-deps)"
    return found


def _rendered(page: Path) -> str:
    """The DOM after Chromium loaded the page and ran whatever it would run."""
    done = subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--user-data-dir=" + str(page.parent / "chromium-profile"),
            "--virtual-time-budget=2000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<html" in done.stdout.lower(), done.stderr[-2000:]
    return done.stdout


def test_report_has_no_live_markup(report: Path) -> None:
    """The page as written holds no script, iframe, svg or img element and no javascript: link."""
    page = report.read_text("utf-8").lower()
    for tag in ("<script", "<iframe", "<svg", "<img", 'href="javascript', "href='javascript"):
        assert tag not in page, tag


def test_browser_shows_hostile_values_as_text(report: Path) -> None:
    """In headless Chromium nothing ran (the title is untouched, no element was injected) and each
    hostile prompt, tool name, model name and run id is there as visible text."""
    dom = _rendered(report)
    title = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert title is not None
    assert MARK not in title.group(1)
    lowered = dom.lower()
    for tag in ("<script", "<iframe", "<svg", "<img"):
        assert tag not in lowered, tag
    # The DOM serializer writes text nodes with &lt; &gt; &amp; escaped: the values are text.
    for text in [*HOSTILE, RUN, f"<script>document.title='{MARK}-damaged'</script>"]:
        escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert escaped in dom, text
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
    assert "run-&lt;b&gt;bold&lt;/b&gt;&amp;amp;" in dom
    assert "damaged" in lowered
