"""The salted receipt hash ``H(salt, text)`` of docs/receipt-spec.md §2 and §12, plain or keyed.

``H`` = SHA-256 over the UTF-8 of ``salt + "\\x1f" + text`` (lone surrogates replaced by U+FFFD
first), in lowercase hex: its first 16 digits in scheme ``af-1``, all 64 in ``af-2``. With a key,
HMAC-SHA256 keyed by it over the same bytes, same digits. The salt is the run id; it is never
empty (an unsalted hash of a short prompt is a guess away from its content), so an empty salt
raises; so does an empty key (an HMAC anyone can compute would be named ``-hmac`` and promise a
secret there is not).

Why af-2 keeps all 256 bits: the salt is on the span, so whoever controls part of a request can
search for two contents with one hash offline. That costs about 2^(b/2) hashes for b bits: 2^32
at af-1's 64, 2^64 at 128 (within reach of a rented GPU farm), 2^128 at 256.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import Final

from af_otel import names
from af_otel.canonical.jcs import fix_surrogates

DIGITS: Final = 16  # af-1
DIGITS_2: Final = 64  # af-2
# The preimage prefix of a key id (§12.4): the id names a key without being usable as one.
KEY_ID_SEED: Final = b"af.key-id.v1\x1f"
KEY_ID_DIGITS: Final = 16


def key_bytes(key: bytes | str | None) -> bytes | None:
    """The HMAC key as bytes: a ``str`` is UTF-8 (lone surrogates as U+FFFD); None stays None."""
    if key is None or isinstance(key, bytes):
        return key
    return fix_surrogates(key).encode("utf-8")


def digits_of(scheme: str) -> int:
    """How many hex digits the hashes of ``scheme`` keep (16 in af-1, 64 in af-2); ValueError
    for a scheme that is not one of `names.SCHEMES`."""
    if scheme in (names.SCHEME_PLAIN, names.SCHEME_HMAC):
        return DIGITS
    if scheme in (names.SCHEME_2, names.SCHEME_2_HMAC):
        return DIGITS_2
    raise ValueError(f"unknown receipt scheme {scheme!r} (known: {', '.join(names.SCHEMES)})")


def receipt_hash(
    salt: str,
    text: str | bytes,
    *,
    key: bytes | str | None = None,
    scheme: str = names.SCHEME_PLAIN,
) -> str:
    """Return ``H(salt, text)`` of ``scheme``: SHA-256 (or HMAC-SHA256 with ``key``), 16 hex
    digits in ``af-1``, 64 in ``af-2``.

    The default stays ``af-1``, the hash this function has always returned: a value someone
    stored or published (agentfootprint's hash vectors) keeps its meaning; ``scheme="af-2"`` gives
    the hashes of the receipts minted now. ``scheme`` names the family; a ``-hmac`` scheme needs
    ``key``. ``text`` given as bytes is hashed as it is (it is already UTF-8, e.g. canonical JSON).
    Raises ValueError for an empty salt or key, an unknown scheme, or a keyed scheme without key.
    """
    if scheme in names.KEYED_SCHEMES and key is None:
        raise ValueError(f"receipt_hash: scheme {scheme} needs a key")
    return salted_hash(salt, key=key, digits=digits_of(scheme))(text)


def _prepared(salt: str, key: bytes | str | None) -> tuple[bytes, bytes | None]:
    """The preimage's prefix (``salt + "\\x1f"`` in UTF-8) and the key as bytes; raises
    ValueError for an empty salt or key."""
    if not salt:
        raise ValueError("receipt_hash needs a non-empty salt (the run id)")
    prefix = fix_surrogates(salt).encode("utf-8") + b"\x1f"
    secret = key_bytes(key)
    if secret is not None and not secret:
        raise ValueError("receipt_hash needs a non-empty key, or key=None for the plain scheme")
    return prefix, secret


def salted_hash(
    salt: str, *, key: bytes | str | None = None, digits: int = DIGITS
) -> Callable[[str | bytes], str]:
    """`receipt_hash` with its salt, key and length bound, for the thousands of hashes of one
    run: the salt's bytes are prepared once. Raises ValueError for an empty salt or key."""
    prefix, secret = _prepared(salt, key)
    sha256 = hashlib.sha256

    if digits >= DIGITS_2:  # no slice: af-2 keeps the whole digest

        def hash_whole(text: str | bytes) -> str:
            body = text if isinstance(text, bytes) else fix_surrogates(text).encode("utf-8")
            if secret is None:
                return sha256(prefix + body).hexdigest()
            return hmac.new(secret, prefix + body, sha256).hexdigest()

        return hash_whole

    def hash_text(text: str | bytes) -> str:
        body = text if isinstance(text, bytes) else fix_surrogates(text).encode("utf-8")
        if secret is None:
            return sha256(prefix + body).hexdigest()[:digits]
        return hmac.new(secret, prefix + body, sha256).hexdigest()[:digits]

    return hash_text


def salted_digest(
    salt: str, *, key: bytes | str | None = None, digits: int = DIGITS
) -> Callable[[bytes], bytes]:
    """`salted_hash` giving the raw digest bytes whose hex is its text (``digits // 2`` bytes):
    what the emit path keeps per message (`af_otel.receipts.entries`). Raises as `salted_hash`."""
    prefix, secret = _prepared(salt, key)
    sha256, width = hashlib.sha256, digits // 2

    def hash_raw(body: bytes) -> bytes:
        if secret is None:
            whole = sha256(prefix + body).digest()
        else:
            whole = hmac.new(secret, prefix + body, sha256).digest()
        return whole if width >= len(whole) else whole[:width]

    return hash_raw


def key_id(key: bytes | str) -> str:
    """The id of an HMAC key (``af.receipt.key_id``): 16 hex digits of SHA-256 over
    ``"af.key-id.v1" ‖ 0x1f ‖ key``. It names the key in a key ring and is not secret; it tells
    about the key no more than any keyed hash of known content does (so keys must be random).
    Raises ValueError for an empty key."""
    secret = key_bytes(key)
    if not secret:
        raise ValueError("key_id needs a non-empty key")
    return hashlib.sha256(KEY_ID_SEED + secret).hexdigest()[:KEY_ID_DIGITS]


def address_of(data: bytes) -> str:
    """The unsalted store address of ``data``: ``sha256:`` + 64 lowercase hex digits."""
    return "sha256:" + hashlib.sha256(data).hexdigest()
