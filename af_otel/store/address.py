"""Store addresses (docs/store.md, Addresses): ``sha256:`` + 64 lowercase hex digits of the stored bytes.

An address is checked here before any store turns it into a path or key, so only 64 hex digits
ever reach the file system: no separator, dot, NUL or drive letter can get through to traverse.
"""

from __future__ import annotations

from typing import Final

from af_otel.canonical import address_of
from af_otel.errors import InvalidAddressError

__all__ = ["ALGORITHM", "PREFIX", "address_of", "blob_parts", "validate_address"]

ALGORITHM: Final = "sha256"
PREFIX: Final = "sha256:"
_HEX_DIGITS: Final = 64
_HEX: Final = frozenset("0123456789abcdef")
# Longer inputs are shown cut in messages: an address comes from spans, which anyone can write.
_SHOWN: Final = 80


def validate_address(addr: str) -> str:
    """Return ``addr`` unchanged if it is ``sha256:`` + 64 lowercase hex digits, else raise.

    Raises :class:`InvalidAddressError` for anything else, non-strings included. A set test rather
    than a regular expression: ``$`` would accept a trailing newline and ``\\d`` Unicode digits.
    """
    if (
        isinstance(addr, str)
        and len(addr) == len(PREFIX) + _HEX_DIGITS
        and addr.startswith(PREFIX)
        and _HEX.issuperset(addr[len(PREFIX) :])
    ):
        return addr
    shown = repr(addr) if len(repr(addr)) <= _SHOWN else repr(addr)[:_SHOWN] + "..."
    raise InvalidAddressError(
        f"invalid store address {shown}: expected 'sha256:' followed by 64 lowercase hex digits"
    )


def blob_parts(addr: str) -> tuple[str, str, str]:
    """Split a valid address into layout parts: ``("sha256", first 2 hex, remaining 62 hex)``."""
    digits = validate_address(addr)[len(PREFIX) :]
    return ALGORITHM, digits[:2], digits[2:]
