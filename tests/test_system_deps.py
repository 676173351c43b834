""".ci/system-deps, the step `make test` and `make bench` take first: with its packages missing and
no way to install them it stops at once, naming the one command that installs them, and never
tries apt-get as a user who cannot run it. (Installing as root is what every CI run does.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "system-deps"
NOBODY = ("--reuid=65534", "--regid=65534", "--clear-groups")  # setpriv(1), util-linux


@pytest.fixture
def only_apt_get() -> Iterator[Path]:
    """A PATH folder holding apt-get alone (when the machine has it), readable by any user; it
    lives in the system's temporary folder, as tmp_path is private to the user running pytest."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        folder.chmod(0o755)
        apt_get = shutil.which("apt-get")
        if apt_get is not None:
            (folder / "apt-get").symlink_to(apt_get)
        yield folder


def _run(target: str, path: Path, *, as_nobody: bool) -> subprocess.CompletedProcess[str]:
    prefix: tuple[str, ...] = ()
    if as_nobody and os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) runs the step as nobody"
        prefix = (setpriv, *NOBODY)
    return subprocess.run(
        [*prefix, "/bin/bash", "-s", target],  # the script on stdin: nobody may not read the tree
        input=SCRIPT.read_text(encoding="utf-8"),
        env={"PATH": str(path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("target", "packages"), [("test", "chromium prometheus"), ("bench", "valgrind")]
)
def test_a_user_who_cannot_install_is_told_the_command(
    target: str, packages: str, only_apt_get: Path
) -> None:
    """Without the commands and without root, the step exits 1 and prints the sudo apt-get line
    for exactly the missing packages, each once (prometheus provides two commands)."""
    done = _run(target, only_apt_get, as_nobody=True)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"make {target} needs the Debian package(s) {packages}; install them with:",
        f"  sudo apt-get update && sudo apt-get install -y --no-install-recommends {packages}",
    ]


def test_root_without_apt_get_is_told_the_command(tmp_path: Path) -> None:
    """Where apt-get is not on PATH the step installs nothing and names the command (no sudo for
    root)."""
    done = _run("test", tmp_path, as_nobody=False)
    assert done.returncode == 1
    expected = "apt-get install -y --no-install-recommends chromium prometheus"
    assert done.stderr.splitlines()[-1].endswith(expected)
    assert ("sudo" in done.stderr) is (os.geteuid() != 0)


def test_an_unknown_target_is_a_usage_error(tmp_path: Path) -> None:
    """Only `test` and `bench` have packages; anything else is exit 2 with the usage."""
    done = _run("lint", tmp_path, as_nobody=False)
    assert (done.returncode, done.stderr) == (2, "usage: system-deps test|bench\n")
