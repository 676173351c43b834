"""The repository after a test session is as it was before: no test writes into it.

``git status --porcelain --ignored`` lists the untracked and the ignored entries of the work tree;
tests/conftest.py takes that list when the session starts and again when it finishes, and fails
the session (exit status 1) naming every entry that appeared, apart from the project's venv and
the caches of Python and its tools. Modified tracked files are left out: an editor saving a file
during a run is not a test writing one.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Final

# What may appear during a run: the project's venv (`make` builds it) and tool caches.
ALLOWED_TOP: Final = frozenset({".venv", ".mypy_cache", ".ruff_cache", ".pytest_cache"})
ALLOWED_ANYWHERE: Final = frozenset({"__pycache__"})


def snapshot(root: Path) -> frozenset[str] | None:
    """The untracked and ignored entries under ``root``, or None where git cannot tell (no git,
    or not a work tree: an unpacked sdist has nothing to guard)."""
    git = shutil.which("git")
    if git is None:
        return None
    done = subprocess.run(
        [git, "-C", str(root), "status", "--porcelain", "--ignored", "-z"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        return None
    entries = done.stdout.decode("utf-8", errors="surrogateescape").split("\0")
    return frozenset(entry[3:] for entry in entries if entry[:2] in ("??", "!!"))


def allowed(path: str) -> bool:
    parts = path.rstrip("/").split("/")
    return parts[0] in ALLOWED_TOP or any(part in ALLOWED_ANYWHERE for part in parts)


def appeared(before: frozenset[str], after: frozenset[str]) -> list[str]:
    """The entries new since ``before`` that no test may leave, sorted."""
    return sorted(path for path in after - before if not allowed(path))


def complaint(root: Path, paths: list[str]) -> str:
    listed = "\n".join(f"  {path}" for path in paths)
    return (
        f"the tests wrote into the repository {root}: these paths appeared during the session\n"
        f"{listed}\n"
        "(a test writes under tmp_path; side venvs and caches go to tests/sidevenv.py's cache "
        "folder; delete the paths before the next run)"
    )
