"""Where the secret of keyed receipts comes from, written once for the writer and the reader.

The processor and the reading commands look in the same places, in the same order: a file named
by the caller (``--key-file``), else ``AF_OTEL_KEY``, else the file ``AF_OTEL_KEY_FILE`` names.
A named file that cannot be read is a `KeyProblem`, not an exception: the emit path warns and
mints plain receipts, the read path stops with the problem as its message.

A reader may hold several keys (keys are rotated; old receipts keep the key they were minted
with): a `KeyRing`, from several ``--key-file`` options or the ring file ``AF_OTEL_KEY_RING``
(one secret a line). Each key is found by its id (``af.receipt.key_id``), derived from the key
(`af_otel.canonical.key_id`), so a ring file holds secrets only and no id can name the wrong key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from af_otel import names
from af_otel.canonical.digest import key_bytes, key_id


@dataclass(frozen=True, slots=True)
class KeyRing:
    """Several HMAC keys, each found by its id: what `verify` takes to check receipts minted
    under keys rotated over time. Empty keys are left out."""

    keys: tuple[bytes, ...]

    @staticmethod
    def of(keys: Iterable[bytes | str]) -> KeyRing:
        found: list[bytes] = []
        for key in keys:
            secret = key_bytes(key)
            if secret and secret not in found:
                found.append(secret)
        return KeyRing(tuple(found))

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(key_id(key) for key in self.keys)

    def find(self, ident: str) -> bytes | None:
        """The key whose id is ``ident``, if the ring holds it."""
        return next((key for key in self.keys if key_id(key) == ident), None)


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


def find_keys(key_files: Iterable[str | os.PathLike[str]] = ()) -> KeyRing | KeyProblem | None:
    """Every key the reader is given: each file of ``key_files`` (``--key-file``, repeatable),
    else `find_key`'s key; and the secrets of the ring file ``$AF_OTEL_KEY_RING`` (one a line,
    blank lines skipped). None when there is none; a named file that cannot be read is a
    `KeyProblem`."""
    keys: list[bytes] = []
    files = [os.fspath(path) for path in key_files]
    for path in files:
        found = _read(path, "--key-file")
        if isinstance(found, KeyProblem):
            return found
        if found:
            keys.append(found)
    if not files:
        single = find_key()
        if isinstance(single, KeyProblem):
            return single
        if single:
            keys.append(single)
    ring = os.environ.get(names.ENV_KEY_RING)
    if ring:
        try:
            lines = Path(ring).read_bytes().splitlines()
        except OSError as exc:
            return KeyProblem(names.ENV_KEY_RING, ring, exc.strerror or type(exc).__name__)
        keys.extend(line.strip() for line in lines if line.strip())
    return KeyRing.of(keys) if keys else None
