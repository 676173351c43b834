"""The embedded default store: a local directory, one read-only file per blob.

Layout ``<root>/sha256/<first 2 hex>/<remaining 62 hex>``. A blob appears only through an atomic
rename of a fully written, fsynced temporary file, and nothing below the root is ever reached
through a symbolic link; docs/store.md states the guarantees.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final

from af_otel import forksafe
from af_otel.errors import BlobNotFoundError, StoreError
from af_otel.store.address import blob_parts
from af_otel.store.base import Store, blob_bytes, check_blob, decode_json, encode_json

__all__ = ["LocalStore"]

# On POSIX every step below the root goes through a directory file descriptor opened with
# O_NOFOLLOW, so a symlink planted in the store is refused even if it appears between a check and
# a use. Where the platform lacks dir_fd (Windows) each component is checked with lstat on its
# path instead, which leaves that window open; docs/store.md says so. Tests flip this flag to
# exercise both ways.
_USE_DIR_FD = (
    os.open in os.supports_dir_fd
    and os.rename in os.supports_dir_fd
    and os.mkdir in os.supports_dir_fd
    and hasattr(os, "O_NOFOLLOW")
    and hasattr(os, "O_DIRECTORY")
)
_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY: Final = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_BINARY: Final = getattr(os, "O_BINARY", 0)
# O_NONBLOCK so that a FIFO planted at a blob path is refused by the fstat check instead of
# blocking the open; it changes nothing for regular files.
_READ_FLAGS: Final = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _BINARY | getattr(os, "O_NONBLOCK", 0)
# Blobs are created read-only: write-once, visible to anyone who lists the directory.
_BLOB_MODE: Final = 0o444
# Temporary names start with a dot and hold dots, so they can never equal the 62-hex name that
# `get` derives from an address: a half-written file is unreachable by construction.
_TEMP_PREFIX: Final = ".tmp."
# Addresses a store object wrote or found in place, so a blob put again (the same spelling every
# call, a message another call stored) costs a look-up instead of three directory opens and an
# lstat. Write-once makes the knowledge hold: a blob is never rewritten or removed by the store
# (docs/store.md). Past 4,096 addresses (~0.6 MiB) the set starts over.
_MAX_KNOWN: Final = 4096


class _Dir:
    """A directory below the root, held open by descriptor where the platform allows it."""

    __slots__ = ("fd", "path")

    def __init__(self, path: str, fd: int | None) -> None:
        self.path = path
        self.fd = fd

    def child(self, name: str) -> str:
        return os.path.join(self.path, name)

    def open(self, name: str, flags: int, mode: int = 0o666) -> int:
        if self.fd is None:
            return os.open(self.child(name), flags, mode)
        return os.open(name, flags, mode, dir_fd=self.fd)

    def lstat(self, name: str) -> os.stat_result:
        if self.fd is None:
            return os.lstat(self.child(name))
        return os.stat(name, dir_fd=self.fd, follow_symlinks=False)

    def mkdir(self, name: str) -> None:
        if self.fd is None:
            os.mkdir(self.child(name))
        else:
            os.mkdir(name, dir_fd=self.fd)

    def replace(self, src: str, dst: str) -> None:
        if self.fd is None:
            os.replace(self.child(src), self.child(dst))
        else:
            os.replace(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def unlink(self, name: str) -> None:
        if self.fd is None:
            os.unlink(self.child(name))
        else:
            os.unlink(name, dir_fd=self.fd)

    def sync(self) -> None:
        # Makes the rename itself durable; some platforms cannot fsync a directory, which only
        # weakens durability after a power cut, never atomicity.
        if self.fd is not None:
            with suppress(OSError):
                os.fsync(self.fd)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _refuse_symlink(path: str) -> StoreError:
    return StoreError(f"refusing to follow a symbolic link inside the store: {path}")


class LocalStore:
    """The content-addressed store in a local directory; the root is created on the first put."""

    __slots__ = ("_known", "_root", "_url")

    def __init__(self, root: str | os.PathLike[str]) -> None:
        # Absolute now, so a later chdir cannot move the store; symlinks above the root are the
        # user's choice and are followed, those below it never are.
        self._root = os.path.abspath(os.path.expanduser(os.fspath(root)))
        self._url = Path(self._root).as_uri()
        self._known: dict[str, None] = {}  # `_MAX_KNOWN`

    @property
    def root(self) -> Path:
        """The directory that holds ``sha256/``."""
        return Path(self._root)

    @property
    def url(self) -> str:
        return self._url

    def __repr__(self) -> str:
        return f"LocalStore({self._root!r})"

    def put(self, data: bytes) -> str:
        data, address = blob_bytes(data)
        if address in self._known:
            return address
        _, shard, name = blob_parts(address)
        with self._shard(shard, create=True) as directory:
            if directory is None:  # the root was removed under us
                raise StoreError(f"store root {self._root} vanished while writing")
            if not self._present(directory, name):
                self._write(directory, name, data, address)
        self._know(address)
        return address

    def _know(self, address: str) -> None:
        known = self._known
        if len(known) >= _MAX_KNOWN:
            known.clear()
        known[address] = None

    def get(self, address: str) -> bytes:
        _, shard, name = blob_parts(address)
        with self._shard(shard, create=False) as directory:
            if directory is None:
                raise BlobNotFoundError(f"no blob {address} in {self._root}")
            return _read_blob(self._root, directory, name, address)

    @contextmanager
    def reading(self) -> Iterator[Store]:
        """This store for a pass that reads many blobs (the reader's pass over a trace): `get`
        and `get_json` as here, with the directories above the blobs opened once for the pass
        (the root's ``sha256`` and each shard met) instead of once a blob. Opened by descriptor
        with O_NOFOLLOW as every read is, so the guarantees are those of `get`; a shard that is
        not there is looked for again at the next blob. Writes go to this store as they are.
        A subclass with reads of its own is that store itself."""
        if type(self).get is not LocalStore.get or type(self).get_json is not LocalStore.get_json:
            yield self
            return
        held = _Held(self)
        try:
            yield held
        finally:
            held.close()

    def has(self, address: str) -> bool:
        if address in self._known:
            return True
        _, shard, name = blob_parts(address)
        with self._shard(shard, create=False) as directory:
            found = directory is not None and self._present(directory, name)
        if found:
            self._know(address)
        return found

    def check_exists(self) -> None:
        """Raise StoreError unless the root is an existing directory (a reader's check: a put
        creates the root, a read from a root that is not there finds nothing)."""
        if os.path.isdir(self._root):
            return
        if os.path.lexists(self._root):
            raise StoreError(f"{self._root} is not a directory, so it cannot be a store")
        raise StoreError(f"no store directory at {self._root}")

    def put_json(self, value: object) -> str:
        return self.put(encode_json(value))

    def get_json(self, address: str) -> object:
        return decode_json(address, self.get(address), self._path_of(address))

    def _path_of(self, address: str) -> str:
        return os.path.join(self._root, *blob_parts(address))

    def _present(self, directory: _Dir, name: str) -> bool:
        path = directory.child(name)
        try:
            info = directory.lstat(name)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StoreError(f"cannot inspect {path}: {_why(exc)}") from exc
        if stat.S_ISLNK(info.st_mode):
            raise _refuse_symlink(path)
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"blob path {path} is not a regular file")
        return True

    def _write(self, directory: _Dir, name: str, data: bytes, address: str) -> None:
        path = directory.child(name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | _BINARY
        temp = _temp_name(name)
        try:
            try:
                fd = directory.open(temp, flags, _BLOB_MODE)
            except FileExistsError:  # another thread counted alike (or a leftover): a fresh name
                temp = f"{temp}.{secrets.token_hex(8)}"
                fd = directory.open(temp, flags, _BLOB_MODE)
        except OSError as exc:
            raise StoreError(f"cannot write blob {address} at {path}: {_why(exc)}") from exc
        renamed = False
        try:
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                directory.replace(temp, name)
                renamed = True
            except OSError:
                # Where a rename cannot replace a read-only file (Windows), a concurrent put of
                # the same bytes may have won the race; its blob is as good as ours.
                if not self._present(directory, name):
                    raise
            directory.sync()
        except OSError as exc:
            raise StoreError(f"cannot write blob {address} at {path}: {_why(exc)}") from exc
        finally:
            if not renamed:
                with suppress(OSError):
                    directory.unlink(temp)

    @contextmanager
    def _shard(self, shard: str, *, create: bool) -> Iterator[_Dir | None]:
        """Yield the shard directory ``<root>/sha256/<shard>``, or None when it does not exist."""
        root = self._open_root()
        if root is None and create:
            try:
                os.makedirs(self._root, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create store root {self._root}: {_why(exc)}") from exc
            root = self._open_root()
        if root is None:
            yield None
            return
        held = [root]
        try:
            current: _Dir | None = root
            for name in ("sha256", shard):
                assert current is not None
                current = self._open_child(current, name, create=create)
                if current is None:
                    break
                held.append(current)
            yield current
        finally:
            for directory in reversed(held):
                directory.close()

    def _open_root(self) -> _Dir | None:
        if not _USE_DIR_FD:
            if not os.path.exists(self._root):
                return None
            if not os.path.isdir(self._root):
                raise StoreError(f"store root {self._root} is not a directory")
            return _Dir(self._root, None)
        try:
            fd = os.open(self._root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot open store root {self._root}: {_why(exc)}") from exc
        return _Dir(self._root, fd)

    def _open_child(self, parent: _Dir, name: str, *, create: bool) -> _Dir | None:
        path = parent.child(name)
        try:
            return self._enter(parent, name)
        except FileNotFoundError:
            if not create:
                return None
        except OSError as exc:
            raise StoreError(f"cannot open store directory {path}: {_why(exc)}") from exc
        try:
            parent.mkdir(name)
        except FileExistsError:
            pass  # a concurrent put made it first
        except OSError as exc:
            raise StoreError(f"cannot create store directory {path}: {_why(exc)}") from exc
        try:
            return self._enter(parent, name)
        except OSError as exc:
            raise StoreError(f"cannot open store directory {path}: {_why(exc)}") from exc

    @staticmethod
    def _enter(parent: _Dir, name: str) -> _Dir:
        path = parent.child(name)
        if parent.fd is None:
            _check_directory(parent, name, path)
            return _Dir(path, None)
        try:
            # No lstat first: the open refuses a link or a file itself, and only then is the
            # entry looked at, to say which (FileNotFoundError is the caller's to create it).
            fd = parent.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                _check_directory(parent, name, path)
                # A directory now: it was a link or a file at the open, swapped since.
                raise _refuse_symlink(path) from exc
            raise
        return _Dir(path, fd)


def _check_directory(parent: _Dir, name: str, path: str) -> None:
    """Raise unless ``name`` in ``parent`` is a directory itself (not a link to one)."""
    info = parent.lstat(name)  # raises FileNotFoundError for the caller to create it
    if stat.S_ISLNK(info.st_mode):
        raise _refuse_symlink(path)
    if not stat.S_ISDIR(info.st_mode):
        raise StoreError(f"store path {path} is not a directory")


def _read_blob(root: str, directory: _Dir, name: str, address: str) -> bytes:
    """The checked bytes of the blob ``name`` in the shard ``directory`` of the store at ``root``."""
    path = directory.child(name)
    if directory.fd is None and os.path.islink(path):
        raise _refuse_symlink(path)
    try:
        fd = directory.open(name, _READ_FLAGS)
    except FileNotFoundError:
        raise BlobNotFoundError(f"no blob {address} in {root}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse_symlink(path) from exc
        raise StoreError(f"cannot read blob {address} at {path}: {_why(exc)}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StoreError(f"blob {address} at {path} is not a regular file")
        data = _read_all(fd)
    except OSError as exc:
        raise StoreError(f"cannot read blob {address} at {path}: {_why(exc)}") from exc
    finally:
        os.close(fd)
    return check_blob(address, data, path)


class _Held:
    """A `LocalStore` with its ``sha256`` directory and the shards met held open (`reading`).
    Where the platform has no directory descriptors, or the store has no ``sha256`` directory
    yet, each read is the store's own."""

    __slots__ = ("_blobs", "_shards", "_store")

    def __init__(self, store: LocalStore) -> None:
        self._store = store
        self._shards: dict[str, _Dir] = {}
        self._blobs: _Dir | None = None
        try:
            root = store._open_root() if _USE_DIR_FD else None
            if root is not None:
                try:
                    self._blobs = store._open_child(root, "sha256", create=False)
                finally:
                    root.close()
        except StoreError:
            # Said by the first read that needs a blob, as without the pass, or never.
            self._blobs = None

    @property
    def url(self) -> str:
        return self._store.url

    def put(self, data: bytes) -> str:
        return self._store.put(data)

    def put_json(self, value: object) -> str:
        return self._store.put_json(value)

    def has(self, address: str) -> bool:
        return self._store.has(address)

    def get(self, address: str) -> bytes:
        if self._blobs is None:
            return self._store.get(address)
        _, shard, name = blob_parts(address)
        directory = self._shards.get(shard)
        if directory is None:
            directory = self._store._open_child(self._blobs, shard, create=False)
            if directory is None:
                raise BlobNotFoundError(f"no blob {address} in {self._store._root}")
            self._shards[shard] = directory
        return _read_blob(self._store._root, directory, name, address)

    def get_json(self, address: str) -> object:
        return decode_json(address, self.get(address), self._store._path_of(address))

    def close(self) -> None:
        for directory in (*self._shards.values(), self._blobs):
            if directory is not None:
                directory.close()
        self._shards.clear()
        self._blobs = None


def _write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd``, with plain writes: no buffered file object (its fstat and
    buffer cost more than a blob's one write)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Temps:
    """Temporary names unique to this process: its pid and a random token, taken once (and
    again in a forked child), then a count; a put takes no random bytes and no pid of its own."""

    __slots__ = ("__weakref__", "count", "stem")

    def __init__(self) -> None:
        self.renew()

    def renew(self) -> None:
        self.stem = f"{os.getpid()}.{secrets.token_hex(6)}"
        self.count = 0


_TEMPS: Final = _Temps()
forksafe.on_fork(_TEMPS, _Temps.renew)


def _temp_name(name: str) -> str:
    _TEMPS.count += 1  # a race between threads can only repeat a name, which O_EXCL refuses
    return f"{_TEMP_PREFIX}{name[:8]}.{_TEMPS.stem}.{_TEMPS.count}"


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)
