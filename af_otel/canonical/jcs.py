"""RFC 8785 canonical JSON (JCS): the one byte encoding every af_otel hash is taken over.

The rules, all of which `docs/receipt-spec.md` restates for verifiers in other languages:

* Values: ``dict`` with ``str`` keys, ``list`` (and ``tuple``, written as an array), ``str``,
  ``int``, ``float``, ``bool``, ``None``. ``uuid.UUID`` and ``enum`` members have one obvious JSON
  form and are written as that form (the RFC 4122 string; the member's value). Anything else —
  ``bytes``, sets, NaN, ±Infinity, cycles, non-``str`` keys, arbitrary objects — raises
  :class:`~af_otel.errors.CanonicalJSONError`; no other exception escapes.
* Strings: lone UTF-16 surrogates are replaced by U+FFFD first (a valid surrogate pair is read as
  the character it encodes). Escapes are exactly the RFC's: ``\\"``, ``\\\\``, ``\\b \\t \\n \\f \\r``,
  other code points below U+0020 as ``\\u00xx`` with lowercase hex; everything else is written raw.
* Object keys are sorted by their UTF-16 code units (not code points: ``"😀"`` sorts before
  ``"\\uffff"``).
* Numbers are written as ECMAScript's ``Number.prototype.toString`` writes the IEEE-754 double:
  shortest round-trip digits, plain notation for 1e-6 <= |x| < 1e21, otherwise ``d.ddde±x``;
  ``-0`` is ``0``; ``100.0`` is ``100``. Integers are exact up to 2**53; beyond that JSON numbers
  are IEEE doubles, so an integer is written as the double nearest to it (the RFC's rule), e.g.
  ``2**53 + 1`` -> ``9007199254740992``. An integer too large for a double raises.

Speed: the common case — strings, ints, bools, containers, no null/float — is exactly what orjson
writes with sorted keys, so orjson does it; a cheap byte test on its output sends anything that might
differ (floats, null which may hide NaN, astral keys, big ints, surrogates) to an exact path that
rewrites only the parts orjson cannot be trusted with.
"""

from __future__ import annotations

import enum
import math
import uuid
from collections.abc import Callable
from typing import Any, Final

import orjson

from af_otel.errors import CanonicalJSONError

_MAX_EXACT_INT: Final = 2**53
_FAST_OPTIONS: Final = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_STRICT_INTEGER
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
# Byte sequences in orjson's output after which the output may differ from JCS: `null` may be NaN
# or ±Infinity (orjson writes those as null); `.0`, `e+`, `e-` are orjson float forms that
# ECMAScript writes differently; 0xF0..0xF4 lead astral characters, whose key order differs between
# UTF-8 (orjson) and UTF-16 (JCS). A hit only sends the value to the exact path.
_SUSPECT: Final = (b"null", b".0", b"e+", b"e-", b"\xf0", b"\xf1", b"\xf2", b"\xf3", b"\xf4")


def _refuse(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def canonical_json(value: object) -> bytes:
    """Return the RFC 8785 canonical JSON of ``value`` as UTF-8 bytes.

    Raises :class:`CanonicalJSONError` for values JSON cannot hold.
    """
    try:
        out = orjson.dumps(value, default=_refuse, option=_FAST_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        return _exact(value)
    for marker in _SUSPECT:
        if marker in out:
            return _exact(value)
    return out


def _exact(value: object) -> bytes:
    try:
        # Sorted like the fast path: `_dict` leaves dicts without astral keys for orjson to order.
        return orjson.dumps(_Exact().prepare(value), option=orjson.OPT_SORT_KEYS)
    except CanonicalJSONError:
        raise
    except RecursionError:
        raise CanonicalJSONError("value is nested too deeply for canonical JSON") from None
    except (TypeError, ValueError, OverflowError, orjson.JSONEncodeError) as exc:
        raise CanonicalJSONError(str(exc)) from None


class _Exact:
    """Builds a copy orjson writes exactly as JCS: floats and big ints become pre-written
    fragments, strings are surrogate-fixed, dicts whose key order orjson would get wrong become
    fragments written here in UTF-16 order."""

    __slots__ = ("_path",)

    def __init__(self) -> None:
        self._path: set[int] = set()

    def prepare(self, value: object) -> Any:
        kind = type(value)
        if kind is str:
            return fix_surrogates(value)  # type: ignore[arg-type]
        if kind is bool or value is None:
            return value
        if kind is int:
            return _int(value)  # type: ignore[arg-type]
        if kind is float:
            return orjson.Fragment(format_number(value))  # type: ignore[arg-type]
        if isinstance(value, dict):
            return self._container(value, self._dict)
        if isinstance(value, list | tuple):
            return self._container(value, self._list)
        if isinstance(value, bool):
            return bool(value)
        if isinstance(value, enum.Enum):
            return self.prepare(value.value)
        if isinstance(value, str):
            return fix_surrogates(str(value))
        if isinstance(value, int):
            return _int(int(value))
        if isinstance(value, float):
            return orjson.Fragment(format_number(float(value)))
        if isinstance(value, uuid.UUID):
            return str(value)
        raise CanonicalJSONError(f"{type(value).__name__} is not a JSON value")

    def _container(self, value: Any, build: Callable[[Any], Any]) -> Any:
        marker = id(value)
        if marker in self._path:
            raise CanonicalJSONError("value contains a cycle")
        self._path.add(marker)
        try:
            return build(value)
        finally:
            self._path.discard(marker)

    def _list(self, value: list[object] | tuple[object, ...]) -> list[Any]:
        return [self.prepare(item) for item in value]

    def _dict(self, value: dict[object, object]) -> Any:
        items: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalJSONError(f"object key {key!r} is not a string")
            fixed = fix_surrogates(str(key))
            if fixed in items:
                raise CanonicalJSONError(f"object keys collide after surrogate repair: {fixed!r}")
            items[fixed] = self.prepare(item)
        if not any(_is_astral_key(key) for key in items):
            return items  # orjson's code-point sort equals UTF-16 order here
        body = b",".join(
            orjson.dumps(key) + b":" + orjson.dumps(items[key], option=orjson.OPT_SORT_KEYS)
            for key in sorted(items, key=_utf16_units)
        )
        return orjson.Fragment(b"{" + body + b"}")


def _int(value: int) -> Any:
    if -_MAX_EXACT_INT <= value <= _MAX_EXACT_INT:
        return value
    try:
        return orjson.Fragment(format_number(float(value)))
    except OverflowError:
        raise CanonicalJSONError(f"integer {value} is too large for an IEEE-754 double") from None


def _is_astral_key(key: str) -> bool:
    return any(ord(ch) > 0xFFFF for ch in key)


def _utf16_units(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def fix_surrogates(text: str) -> str:
    """Replace lone UTF-16 surrogates by U+FFFD; a surrogate pair becomes the character it encodes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def format_number(value: float) -> str:
    """ECMAScript ``Number.prototype.toString`` for a finite double (RFC 8785 §3.2.2.3)."""
    if math.isnan(value) or math.isinf(value):
        raise CanonicalJSONError(f"{value!r} is not a JSON number")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    if fraction == "0":
        fraction = ""
    digits = (whole + fraction).lstrip("0")
    # point: the decimal exponent n of ECMAScript's algorithm, value = 0.digits * 10**point
    point = len(whole) + (int(exponent) if exponent else 0)
    if whole == "0":
        stripped = fraction.lstrip("0")
        point = -(len(fraction) - len(stripped)) + (int(exponent) if exponent else 0)
        digits = stripped
    digits = digits.rstrip("0") or "0"
    # lstrip of leading zeros of `whole` (never more than "0") is handled by the branch above
    count = len(digits)
    if count <= point <= 21:
        return sign + digits + "0" * (point - count)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * (-point) + digits
    shown = point - 1
    exp = ("+" if shown > 0 else "-") + str(abs(shown))
    if count == 1:
        return sign + digits + "e" + exp
    return sign + digits[0] + "." + digits[1:] + "e" + exp
