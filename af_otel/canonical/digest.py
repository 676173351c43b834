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
from collections.abc import Callable
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
    return salted_hash(salt, key=key)(text)


def salted_hash(salt: str, *, key: bytes | str | None = None) -> Callable[[str | bytes], str]:
    """`receipt_hash` with its salt and key bound, for the thousands of hashes of one run: the
    salt's bytes are prepared once. Raises ValueError for an empty salt or an empty key."""
    if not salt:
        raise ValueError("receipt_hash needs a non-empty salt (the run id)")
    prefix = fix_surrogates(salt).encode("utf-8") + b"\x1f"
    secret = key_bytes(key)
    if secret is not None and not secret:
        raise ValueError("receipt_hash needs a non-empty key, or key=None for the plain scheme")
    sha256 = hashlib.sha256

    def hash_text(text: str | bytes) -> str:
        body = text if isinstance(text, bytes) else fix_surrogates(text).encode("utf-8")
        if secret is None:
            return sha256(prefix + body).hexdigest()[:DIGITS]
        return hmac.new(secret, prefix + body, sha256).hexdigest()[:DIGITS]

    return hash_text


def address_of(data: bytes) -> str:
    """The unsalted store address of ``data``: ``sha256:`` + 64 lowercase hex digits."""
    return "sha256:" + hashlib.sha256(data).hexdigest()
