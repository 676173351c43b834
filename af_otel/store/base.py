"""The `Store` seam and the checks every store shares: verification on read and JSON blobs.

The reader and the processor depend on this Protocol only; the local directory and fsspec stores
are two implementations of it, and a test double is a third.
"""

from __future__ import annotations

import hashlib
from typing import Protocol

import orjson

from af_otel.canonical import canonical_json
from af_otel.errors import BlobDamagedError, BlobShapeError
from af_otel.store.address import PREFIX, address_of

__all__ = ["Store", "blob_bytes", "check_blob", "decode_json", "encode_json"]


class Store(Protocol):
    """A content-addressed, write-once blob store whose reads are verified against the address."""

    @property
    def url(self) -> str:
        """Where the store lives: a ``file://`` URL for a local directory, else the fsspec URL."""
        ...

    def put(self, data: bytes) -> str:
        """Store ``data`` once and return its address; an existing blob is never rewritten."""
        ...

    def get(self, address: str) -> bytes:
        """Return the bytes at ``address``, checked against it; raise if missing or damaged."""
        ...

    def has(self, address: str) -> bool:
        """Tell whether a blob is present at ``address``; its bytes are not checked until `get`."""
        ...

    def put_json(self, value: object) -> str:
        """Store the RFC 8785 canonical JSON of ``value``; equal values share one address."""
        ...

    def get_json(self, address: str) -> object:
        """Return the JSON value stored at ``address``, checked like `get`."""
        ...


def blob_bytes(data: bytes) -> tuple[bytes, str]:
    """What `put` stores for ``data`` and its address; anything but bytes is a TypeError."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"a store holds bytes, not {type(data).__name__}")
    data = bytes(data)
    return data, address_of(data)


def check_blob(address: str, data: bytes, where: str) -> bytes:
    """Return ``data`` if it hashes to ``address``; otherwise raise BlobDamagedError naming both."""
    actual = PREFIX + hashlib.sha256(data).hexdigest()
    if actual != address:
        raise BlobDamagedError(
            f"blob {address} at {where} is damaged: its {len(data)} bytes hash to {actual}"
        )
    return data


def encode_json(value: object) -> bytes:
    """The bytes `put_json` stores: canonical JSON, so that equal values deduplicate."""
    return canonical_json(value)


def decode_json(address: str, data: bytes, where: str) -> object:
    """Parse a verified blob as JSON; a blob that is not JSON raises BlobShapeError naming it."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BlobShapeError(f"blob {address} at {where} is not JSON: {exc}") from exc
