"""The content-addressed store (docs/store.md): run bases and large commit payloads, by address.

Write-once, verified on every read, atomic writes, addresses checked before they reach a path.
The local directory store is the default; any fsspec URL works where one machine is not enough.
"""

from __future__ import annotations

from af_otel.store.address import address_of, validate_address
from af_otel.store.base import Store
from af_otel.store.fsspec import FsspecStore
from af_otel.store.local import LocalStore
from af_otel.store.url import open_store

__all__ = ["FsspecStore", "LocalStore", "Store", "address_of", "open_store", "validate_address"]
