"""Fixtures for the store tests: local stores in both directory-walk modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from af_otel.store import local
from af_otel.store.local import LocalStore


@pytest.fixture(params=["dir_fd", "paths"])
def walk_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with descriptor walks (POSIX) and with the path-checking fallback (Windows)."""
    monkeypatch.setattr(local, "_USE_DIR_FD", request.param == "dir_fd")
    return str(request.param)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A store root that does not exist yet, inside a directory the test owns."""
    return tmp_path / "store"


@pytest.fixture
def store(root: Path, walk_mode: str) -> LocalStore:
    """A fresh local store, once per walk mode."""
    return LocalStore(root)
