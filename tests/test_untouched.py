"""The session guard of tests/conftest.py fails a run whose tests write into the repository, and
only such a run: proved on a scratch git repository holding the project's conftest and pytest
settings, with planted tests, run by a real pytest in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import untouched

ROOT = Path(__file__).resolve().parents[1]
COPIED = (
    "pyproject.toml",
    ".gitignore",
    "tests/conftest.py",
    "tests/sidevenv.py",
    "tests/untouched.py",
)


def _scratch_repository(tmp_path: Path, planted: str) -> Path:
    repo = tmp_path / "repo"
    for name in COPIED:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, repo / name)
    (repo / "tests" / "test_planted.py").write_text(planted, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    return repo


def _pytest(repo: Path, *workers: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *(workers or ("-p", "no:xdist")), "tests"],
        cwd=repo,
        env=env,  # bytecode caches appear in the scratch tree: they are allowed
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


WRITES = """
from pathlib import Path

def test_writes_a_file_at_the_root():
    Path("stray.jsonl").write_text("{}")

def test_writes_an_ignored_store():
    Path(".af_otel/store").mkdir(parents=True)
    Path(".af_otel/store/blob").write_bytes(b"x")
"""

KEEPS_TO_TMP = """
def test_writes_under_tmp_path(tmp_path):
    (tmp_path / "stray.jsonl").write_text("{}")
"""


@pytest.mark.parametrize("workers", [(), ("-n", "2", "--dist", "loadfile")], ids=["one", "xdist"])
def test_a_session_that_writes_into_the_repository_fails_and_names_the_paths(
    tmp_path: Path, workers: tuple[str, ...]
) -> None:
    """The planted tests pass, yet the session exits 1 and names the untracked file and the
    ignored directory they left; under xdist the controller sees what a worker wrote, as
    `make test` runs it."""
    done = _pytest(_scratch_repository(tmp_path, WRITES), *workers)
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    assert "the repository changed" in done.stdout
    assert "  stray.jsonl\n" in done.stdout
    assert "  .af_otel/\n" in done.stdout


def test_a_session_that_writes_under_tmp_path_passes(tmp_path: Path) -> None:
    """The same run with the test writing under tmp_path exits 0 and says nothing of the
    repository, though bytecode caches appeared in it."""
    repo = _scratch_repository(tmp_path, KEEPS_TO_TMP)
    done = _pytest(repo)
    assert done.returncode == pytest.ExitCode.OK, done.stdout + done.stderr
    assert "the repository changed" not in done.stdout
    assert any(repo.rglob("__pycache__"))


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        (".venv/", True),
        (".ruff_cache/", True),
        ("tests/wire/__pycache__/", True),
        ("garbage.txt", False),
        (".hypothesis/", False),
        ("af-otel-demo/", False),
        ("tests/.venv/", False),
    ],
)
def test_only_the_venv_and_tool_caches_may_appear(path: str, allowed: bool) -> None:
    """What may appear is the project's venv at the root and the caches of Python and its tools;
    a Hypothesis folder or a demo's output in the tree fails the session."""
    assert untouched.allowed(path) is allowed
    assert untouched.appeared(frozenset(), frozenset({path})) == ([] if allowed else [path])


def test_entries_there_before_the_session_are_not_blamed() -> None:
    """A stray file the developer left before the run is not the run's doing."""
    assert untouched.appeared(frozenset({"notes.txt"}), frozenset({"notes.txt", "new.txt"})) == [
        "new.txt"
    ]
