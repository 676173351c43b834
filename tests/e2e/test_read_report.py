"""The HTML report in a real browser: headless Chromium renders the page `af-otel report` wrote,
a prompt holding markup stays text (no script runs, no element appears), and the page is not
blank."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from af_otel.cli import main
from af_otel.processor import run
from af_otel.store import LocalStore
from tests.reader.recordings import agent, file_recorder, user

PROMPT = '<script>document.title="pwned";document.body.innerHTML=""</script><b id="injected">x</b>'


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.fail("chromium is not installed (.ci/run installs it: apt-get install chromium)")
    profile = tmp_path / "chromium-profile"
    return subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )


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


def pixels(png: bytes) -> set[bytes]:
    """The distinct pixel values of an 8-bit RGB or RGBA PNG (what Chromium writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks, header = 8, [], b""
    while at < len(png):
        (size,) = struct.unpack(">I", png[at : at + 4])
        kind, body = png[at + 4 : at + 8], png[at + 8 : at + 8 + size]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        at += 12 + size
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert depth == 8
    assert color in (2, 6)
    step = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * step
    previous = bytearray(stride)
    seen: set[bytes] = set()
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - step] if i >= step else 0
            up = previous[i]
            corner = previous[i - step] if i >= step else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
                line[i] = (line[i] + pred) & 0xFF
        if row % 4 == 0:
            seen.update(bytes(line[i : i + step]) for i in range(0, stride, step * 4))
        previous = line
    return seen


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
