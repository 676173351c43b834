"""Test helpers for the store: a file-system spy built on audit hooks, and a tree snapshot."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Audit events that mean a path was opened, created, renamed, removed or listed. os.stat raises no
# audit event, so tests pair this spy with a snapshot of the directory tree.
_FS_EVENTS = frozenset(
    {
        "open",
        "os.mkdir",
        "os.rename",
        "os.remove",
        "os.rmdir",
        "os.listdir",
        "os.scandir",
        "os.chmod",
        "os.symlink",
        "os.link",
        "os.truncate",
        "os.utime",
    }
)
_recording: list[list[tuple[str, tuple[object, ...]]]] = []


def _audit(event: str, args: tuple[object, ...]) -> None:
    if _recording and event in _FS_EVENTS:
        _recording[-1].append((event, args))


# An audit hook cannot be removed; it records only while a test holds `fs_events()` open.
sys.addaudithook(_audit)


@contextmanager
def fs_events() -> Iterator[list[tuple[str, tuple[object, ...]]]]:
    """Collect the file-system audit events raised inside the block."""
    events: list[tuple[str, tuple[object, ...]]] = []
    _recording.append(events)
    try:
        yield events
    finally:
        _recording.pop()


def tree(path: Path) -> dict[str, bytes | None]:
    """Every file (with its bytes) and directory (None) below ``path``, by relative name."""
    found: dict[str, bytes | None] = {}
    for item in sorted(path.rglob("*")):
        name = str(item.relative_to(path))
        found[name] = None if item.is_dir() or item.is_symlink() else item.read_bytes()
    return found
