"""Canonical JSON (RFC 8785) and the salted receipt hash: the encodings every fingerprint rests on."""

from af_otel.canonical.digest import (
    address_of,
    digits_of,
    key_bytes,
    key_id,
    receipt_hash,
    salted_hash,
)
from af_otel.canonical.jcs import canonical_json, fix_surrogates, format_number

__all__ = [
    "address_of",
    "canonical_json",
    "digits_of",
    "fix_surrogates",
    "format_number",
    "key_bytes",
    "key_id",
    "receipt_hash",
    "salted_hash",
]
