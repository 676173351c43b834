"""`open_store`: from an argument, the ``AF_OTEL_STORE`` variable or the default to a `Store`.

A plain path or ``file://`` URL opens the embedded local store, which needs nothing beyond the
standard library; any other URL goes to fsspec, imported only then.
"""

from __future__ import annotations

import os
import re
import urllib.parse
import urllib.request
from typing import Final

from af_otel import names
from af_otel.errors import StoreError
from af_otel.store.base import Store
from af_otel.store.fsspec import FsspecStore
from af_otel.store.local import LocalStore

__all__ = ["open_store"]

# Two letters at least, so that a Windows drive (``C://data``) stays a path.
_URL: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+://")
_LOCAL_HOSTS: Final = frozenset({"", "localhost"})


def open_store(url: str | os.PathLike[str] | None = None, *, must_exist: bool = False) -> Store:
    """Open the store at ``url``; without one, ``$AF_OTEL_STORE``, else ``./.af_otel/store``.

    Nothing is created until the first put. An empty variable counts as unset; an explicit empty
    string, a ``file://`` URL naming another host, or an fsspec URL without fsspec installed
    raises StoreError. ``must_exist`` (for readers) also raises StoreError when the store is not
    there: a path that does not exist or is not a directory, a URL with nothing under it.
    """
    store = _open(url)
    if must_exist:
        store.check_exists()
    return store


def _open(url: str | os.PathLike[str] | None) -> LocalStore | FsspecStore:
    if url is None:
        url = os.environ.get(names.ENV_STORE) or names.DEFAULT_STORE
    if not isinstance(url, str):
        return LocalStore(url)
    if not url:
        raise StoreError("empty store URL: give a directory or an fsspec URL")
    # Chained fsspec URLs (``simplecache::s3://...``) are fsspec's business too.
    if "::" in url:
        return FsspecStore(url)
    if _URL.match(url) is None:
        return LocalStore(url)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() != "file":
        return FsspecStore(url)
    if parts.netloc.lower() not in _LOCAL_HOSTS:
        raise StoreError(
            f"store URL {url!r} names host {parts.netloc!r}; a local store is "
            "file:///absolute/path or a plain path"
        )
    return LocalStore(urllib.request.url2pathname(parts.path))
