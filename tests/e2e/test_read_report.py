"""The HTML report in a real browser: headless Chromium renders the page `af-otel report` wrote,
a prompt holding markup stays text (no script runs, no element appears), and the page is not
blank."""

from __future__ import annotations

from pathlib import Path

import pytest

from af_otel.cli import main
from af_otel.processor import run
from af_otel.store import LocalStore
from tests.reader.recordings import agent, file_recorder, user
from tests.web.browser import chromium, parsed, pixels

PROMPT = '<script>document.title="pwned";document.body.innerHTML=""</script><b id="injected">x</b>'


@pytest.fixture
def report(tmp_path: Path) -> Path:
    traces, store = tmp_path / "traces.jsonl", tmp_path / "store"
    with file_recorder(traces, LocalStore(store)) as rec:
        agent(rec, "browser-run", 3, base={"messages": [user(PROMPT)]})
        with run("blind"):
            rec.blind_chat()
    output = tmp_path / "report.html"
    assert main(["report", str(traces), "--store", str(store), "-o", str(output)]) == 0
    return output


def test_chromium_renders_the_prompt_as_text(report: Path, tmp_path: Path) -> None:
    """The DOM after load holds the prompt as text: the title is the report's, no script or
    injected element exists, every epoch is there with its badge."""
    dom = chromium(tmp_path, "--dump-dom", report.as_uri()).stdout.decode("utf-8")
    assert "<title>af_otel report</title>" in dom
    assert "pwned" in dom  # as text
    assert "<script" not in dom
    assert '<b id="injected"' not in dom
    assert "&lt;script&gt;document.title=" in dom
    assert dom.count('class="epoch"') == 4
    assert dom.count('data-verdict="verified"') >= 3
    assert 'data-verdict="reconstructed"' in dom


def test_chromium_paints_a_page_that_is_not_blank(report: Path, tmp_path: Path) -> None:
    """A screenshot of the report holds text and colour, not one flat background."""
    shot = tmp_path / "shot.png"
    chromium(tmp_path, "--window-size=1200,900", f"--screenshot={shot}", report.as_uri())
    colours = pixels(shot.read_bytes())
    assert len(colours) > 20


def test_chromium_shows_the_legend_digests_and_unique_ids(report: Path, tmp_path: Path) -> None:
    """After load the report holds its legend of seven terms, a digest per minted epoch, and no
    element id twice."""
    text = chromium(tmp_path, "--dump-dom", report.as_uri()).stdout.decode("utf-8")
    page = parsed(text)
    assert 'class="legend"' in text
    assert text.count("<dt>") == 7
    assert len(page.values("data-digest")) == 3
    ids = page.values("id")
    assert len(ids) == len(set(ids))
