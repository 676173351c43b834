"""The store on any fsspec file system (S3, GCS, Azure, memory, SFTP, ...), for those who outgrow
one machine; same layout and checks as the local store, with fsspec imported only when used.
"""

from __future__ import annotations

import secrets
from typing import Any, Final

from af_otel.errors import AfOtelError, BlobNotFoundError, StoreError
from af_otel.store.address import blob_parts
from af_otel.store.base import blob_bytes, check_blob, decode_json, encode_json

__all__ = ["FsspecStore"]

# Object stores where one PUT is all-or-nothing and a "rename" is a copy plus a delete: a direct
# write is the atomic choice there. Every other file system gets a temporary key and a move.
_OBJECT_STORES: Final = frozenset(
    {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oci", "oss", "r2"}
)
_TEMP_PREFIX: Final = ".tmp."


def _load_fsspec() -> Any:
    try:
        import fsspec  # noqa: PLC0415 - an optional extra, loaded only for fsspec URLs
    except ImportError as exc:
        raise StoreError(
            "this store URL needs fsspec, which is not installed: pip install 'af-otel[fsspec]'"
        ) from exc
    return fsspec


class FsspecStore:
    """The content-addressed store under an fsspec URL, e.g. ``s3://bucket/af-store``.

    Credentials and options come from the file system's own configuration (environment, fsspec
    config files) or from ``storage_options``.
    """

    __slots__ = ("_atomic_put", "_fs", "_root", "_url")

    def __init__(self, url: str, **storage_options: Any) -> None:
        fsspec = _load_fsspec()
        self._url = url.rstrip("/")
        try:
            self._fs, root = fsspec.core.url_to_fs(url, **storage_options)
        except Exception as exc:
            # A missing backend (s3fs, gcsfs, ...) surfaces as ImportError, an unknown protocol
            # as ValueError, a backend's own configuration trouble as anything at all.
            raise StoreError(f"cannot open store {url}: {exc}") from exc
        self._root = str(root).rstrip("/")
        protocols = self._fs.protocol
        names = {protocols} if isinstance(protocols, str) else set(protocols)
        self._atomic_put = bool(names & _OBJECT_STORES)

    @property
    def url(self) -> str:
        return self._url

    def __repr__(self) -> str:
        return f"FsspecStore({self._url!r})"

    def put(self, data: bytes) -> str:
        data, address = blob_bytes(data)
        shard, name = self._keys(address)
        key = f"{shard}/{name}"
        try:
            if self._fs.exists(key):
                return address
            if self._atomic_put:
                self._fs.pipe_file(key, data)
                return address
            self._fs.makedirs(shard, exist_ok=True)
            temp = f"{shard}/{_TEMP_PREFIX}{name[:8]}.{secrets.token_hex(8)}"
            self._fs.pipe_file(temp, data)
            try:
                self._fs.mv(temp, key)
            finally:
                if self._fs.exists(temp):
                    self._fs.rm_file(temp)
        except AfOtelError:
            raise
        except Exception as exc:
            # Backends raise their own exception types (botocore, azure, ...); the read path
            # promises one typed error naming the URL.
            raise StoreError(f"cannot write blob {address} to {self._where(key)}: {exc}") from exc
        return address

    def get(self, address: str) -> bytes:
        key = self._key(address)
        try:
            data = self._fs.cat_file(key)
        except FileNotFoundError:
            raise BlobNotFoundError(f"no blob {address} in {self._url}") from None
        except Exception as exc:
            raise StoreError(f"cannot read blob {address} at {self._where(key)}: {exc}") from exc
        return check_blob(address, bytes(data), self._where(key))

    def has(self, address: str) -> bool:
        key = self._key(address)
        try:
            return bool(self._fs.isfile(key))
        except Exception as exc:
            raise StoreError(f"cannot inspect blob {address} at {self._where(key)}: {exc}") from exc

    def check_exists(self) -> None:
        """Raise StoreError unless the store's root is there (on object stores: holds a key)."""
        try:
            found = bool(self._fs.isdir(self._root or "/"))
        except Exception as exc:
            raise StoreError(f"cannot inspect store {self._url}: {exc}") from exc
        if not found:
            raise StoreError(f"no store at {self._url}: nothing is stored under it")

    def put_json(self, value: object) -> str:
        return self.put(encode_json(value))

    def get_json(self, address: str) -> object:
        return decode_json(address, self.get(address), self._where(self._key(address)))

    def _keys(self, address: str) -> tuple[str, str]:
        """The shard directory key and the blob's name in it."""
        algorithm, shard, name = blob_parts(address)
        base = f"{self._root}/{algorithm}" if self._root else algorithm
        return f"{base}/{shard}", name

    def _key(self, address: str) -> str:
        return "/".join(self._keys(address))

    def _where(self, key: str) -> str:
        return str(self._fs.unstrip_protocol(key))
