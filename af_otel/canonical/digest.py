"""The salted receipt hash ``H(salt, text)`` of docs/receipt-spec.md §2, plain or keyed.

``H`` = the first 16 lowercase hex digits of SHA-256 over the UTF-8 of ``salt + "\\x1f" + text``
(lone surrogates replaced by U+FFFD first). With a key, HMAC-SHA256 keyed by it over the same bytes,
same 16 digits. The salt is the run id; it is never empty (an unsalted hash of a short prompt is a
guess away from its content), so an empty salt raises; so does an empty key (an HMAC anyone can
compute would be named ``af-1-hmac`` and promise a secret there is not).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from af_otel.canonical.jcs import fix_surrogates

DIGITS: Final = 16


def key_bytes(key: bytes | str | None) -> bytes | None:
    """The HMAC key as bytes: a ``str`` is UTF-8 (lone surrogates as U+FFFD); None stays None."""
    if key is None or isinstance(key, bytes):
        return key
    return fix_surrogates(key).encode("utf-8")


def receipt_hash(salt: str, text: str | bytes, *, key: bytes | str | None = None) -> str:
    """Return ``H(salt, text)``: 16 hex digits of SHA-256 (or HMAC-SHA256 with ``key``).

    ``text`` given as bytes is hashed as it is (it is already UTF-8, e.g. canonical JSON).
    Raises ValueError for an empty salt or an empty key.
    """
    if not salt:
        raise ValueError("receipt_hash needs a non-empty salt (the run id)")
    body = text if isinstance(text, bytes) else fix_surrogates(text).encode("utf-8")
    data = fix_surrogates(salt).encode("utf-8") + b"\x1f" + body
    if key is None:
        return hashlib.sha256(data).hexdigest()[:DIGITS]
    secret = key_bytes(key)
    if not secret:
        raise ValueError("receipt_hash needs a non-empty key, or key=None for the plain scheme")
    return hmac.new(secret, data, hashlib.sha256).hexdigest()[:DIGITS]


def address_of(data: bytes) -> str:
    """The unsalted store address of ``data``: ``sha256:`` + 64 lowercase hex digits."""
    return "sha256:" + hashlib.sha256(data).hexdigest()
