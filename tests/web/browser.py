"""Headless Chromium for the page tests (Debian's chromium, no sandbox, no network of its own):
the DOM after load, a screenshot, and the distinct colours of a PNG."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.fail("chromium is not installed (make test installs it: .ci/system-deps)")
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


def dom(tmp_path: Path, url: str) -> str:
    """The document Chromium holds after loading ``url`` (scripts, if any, have run)."""
    return chromium(tmp_path, "--dump-dom", url).stdout.decode("utf-8")


def screenshot(tmp_path: Path, url: str, name: str = "shot.png", size: str = "1200,900") -> Path:
    """A screenshot of ``url`` at ``size``, written in ``tmp_path``."""
    shot = tmp_path / name
    chromium(tmp_path, f"--window-size={size}", f"--screenshot={shot}", url)
    return shot


class Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.attrs: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.attrs.append((tag, dict(attrs)))

    def values(self, name: str) -> list[str]:
        return [a[name] or "" for _, a in self.attrs if name in a]


def parsed(text: str) -> Dom:
    found = Dom()
    found.feed(text)
    return found
