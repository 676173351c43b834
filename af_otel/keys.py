"""Where the secret of keyed receipts comes from, written once for the writer and the reader.

The processor and the reading commands look in the same places, in the same order: a file named
by the caller (``--key-file``), else ``AF_OTEL_KEY``, else the file ``AF_OTEL_KEY_FILE`` names.
A named file that cannot be read is a `KeyProblem`, not an exception: the emit path warns and
mints plain receipts, the read path stops with the problem as its message.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from af_otel import names


@dataclass(frozen=True, slots=True)
class KeyProblem:
    """A key file that was named but cannot be read: who named it, the path, and why."""

    named_by: str
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.named_by}={self.path}: the key file cannot be read ({self.reason})"


def find_key(key_file: str | os.PathLike[str] | None = None) -> bytes | KeyProblem | None:
    """The key: the file ``key_file`` (``--key-file``), else ``$AF_OTEL_KEY``, else the file
    ``$AF_OTEL_KEY_FILE``; None when none is set or the file is empty (surrounding white space
    is not part of a key read from a file)."""
    if key_file:
        return _read(os.fspath(key_file), "--key-file")
    secret = os.environ.get(names.ENV_KEY)
    if secret:
        return secret.encode("utf-8")
    path = os.environ.get(names.ENV_KEY_FILE)
    return _read(path, names.ENV_KEY_FILE) if path else None


def _read(path: str, named_by: str) -> bytes | KeyProblem | None:
    try:
        return Path(path).read_bytes().strip() or None
    except OSError as exc:
        return KeyProblem(named_by, path, exc.strerror or type(exc).__name__)
