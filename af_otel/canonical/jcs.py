"""RFC 8785 canonical JSON (JCS): the one byte encoding every af_otel hash is taken over.

The rules, all of which `docs/receipt-spec.md` restates for verifiers in other languages:

* Values: ``dict`` with ``str`` keys, ``list`` (and ``tuple``, written as an array), ``str``,
  ``int``, ``float``, ``bool``, ``None``, and subclasses of these read as their base value.
  ``uuid.UUID`` and ``enum`` members have one obvious JSON form and are written as that form (the
  RFC 4122 string; the member's value). Anything else — ``bytes``, sets, NaN, ±Infinity, cycles,
  non-``str`` keys, nesting deeper than 254 containers, arbitrary objects (``orjson.Fragment``
  included) — raises :class:`~af_otel.errors.CanonicalJSONError`; no other exception escapes.
* Strings: lone UTF-16 surrogates are replaced by U+FFFD first (a valid surrogate pair is read as
  the character it encodes). Escapes are exactly the RFC's: ``\\"``, ``\\\\``, ``\\b \\t \\n \\f \\r``,
  other code points below U+0020 as ``\\u00xx`` with lowercase hex; everything else is written raw.
* Object keys are sorted by their UTF-16 code units (not code points: ``"😀"`` sorts before
  ``"\\uffff"``). Two keys that become equal after surrogate repair raise.
* Numbers are written as ECMAScript's ``Number.prototype.toString`` writes the IEEE-754 double:
  shortest round-trip digits, plain notation for 1e-6 <= |x| < 1e21, otherwise ``d.ddde±x``;
  ``-0`` is ``0``; ``100.0`` is ``100``. Integers are exact up to 2**53; beyond that JSON numbers
  are IEEE doubles, so an integer is written as the double nearest to it (the RFC's rule), e.g.
  ``2**53 + 1`` -> ``9007199254740992``. An integer too large for a double raises.

Speed: orjson with sorted keys already writes JCS for strings, ints up to 2**53-1, bools, null and
containers, so it writes every value first. Its output can differ from JCS in only three ways,
and each is found without reading the output's strings (text would give false alarms): a float
(orjson's float forms are not ECMAScript's, and it writes NaN as null) — found by a C-speed scan
of the value's types, level by level; key order between U+E000..U+FFFF and astral characters
(UTF-8 and UTF-16 order differ only there) — found by two byte tests on the output; and
everything orjson refuses (surrogates, big ints, tuples' subclasses, ...). Floats are then
rewritten in place as pre-written fragments; the rest goes to the exact path, which prepares the
whole value in Python.
"""

from __future__ import annotations

import enum
import functools
import gc
import math
import uuid
from collections.abc import Iterable
from itertools import compress
from typing import Any, Final

import orjson

from af_otel.errors import CanonicalJSONError

MAX_DEPTH: Final = 254  # orjson's own nesting limit; the exact path enforces the same one
_MAX_EXACT_INT: Final = 2**53
_FAST_OPTIONS: Final = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_STRICT_INTEGER
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
# Lead bytes of U+E000..U+FFFF and of astral characters in UTF-8. Only when both occur can
# orjson's code-point key order differ from JCS's UTF-16 order.
_BMP_HIGH: Final = (b"\xee", b"\xef")
_ASTRAL: Final = (b"\xf0", b"\xf1", b"\xf2", b"\xf3", b"\xf4")


def _refuse(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def canonical_json(value: object) -> bytes:
    """Return the RFC 8785 canonical JSON of ``value`` as UTF-8 bytes.

    Raises :class:`CanonicalJSONError` for values JSON cannot hold.
    """
    try:
        out = orjson.dumps(value, default=_refuse, option=_FAST_OPTIONS)
    except Exception:  # orjson refuses it (surrogates, big ints, unknown types, cycles, depth)
        return _exact(value)
    if not out.isascii() and any(b in out for b in _BMP_HIGH) and any(b in out for b in _ASTRAL):
        return _exact(value)
    found = _scan(value)
    if found is _Found.NOTHING:
        return out
    if found is _Found.FLOATS:
        try:
            return orjson.dumps(_with_float_fragments(value), option=orjson.OPT_SORT_KEYS)
        except CanonicalJSONError:
            raise
        except Exception as exc:  # a float orjson could write is one format_number can: defensive
            raise CanonicalJSONError(str(exc)) from None
    return _exact(value)


class _Found(enum.Enum):
    NOTHING = "orjson's output is JCS"
    FLOATS = "floats to rewrite"
    OTHER = "a value for the exact path"


# The types of a value orjson wrote whose children, if any, are exactly what gc reports.
_PLAIN: Final = frozenset({dict, list, tuple, str, int, bool, float, type(None)})
_LEAVES: Final = frozenset({str, int, bool, type(None)})


# Containers `_scan_small` walks in Python before the level-at-a-time walk is the cheaper one.
_SMALL: Final = 48


def _bare_mapping(kind: type) -> bool:
    """A dict, or a subclass that adds no storage to its instances (no slots, no ``__dict__``:
    its instance is as large as a dict, like the request model's frozen dict), so its items are
    all it holds."""
    bare = issubclass(kind, dict) and kind.__basicsize__ == dict.__basicsize__
    if bare and len(_BARE_MAPPINGS) < 64:
        _BARE_MAPPINGS.add(kind)
    return bare


# The mapping types `_bare_mapping` has passed, so each is looked at once (a few: the request
# model's frozen dict, the user's own).
_BARE_MAPPINGS: Final[set[type]] = {dict}


def _scan_small(value: object) -> _Found | None:
    """`_scan` for a small tree of plain JSON types (dicts as `_bare_mapping` says), walked in
    Python: a message or a tool schema, where the level-at-a-time walk costs more than the walk.
    None for a larger tree or any other type: `_scan` then decides."""
    stack: list[Any] = [value]
    floats = False
    containers = 0
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _LEAVES:
            continue
        if kind is float:
            floats = True
            continue
        containers += 1
        if containers > _SMALL:
            return None
        if kind is list or kind is tuple:
            stack.extend(item)
        elif kind in _BARE_MAPPINGS or _bare_mapping(kind):
            stack.extend(dict.values(item))
        else:
            return None
    return _Found.FLOATS if floats else _Found.NOTHING


def _scan(value: object) -> _Found:
    """Which kinds of value orjson wrote (only called after it succeeded: no cycles, at most
    `MAX_DEPTH` levels, only types it knows).

    One level of the tree at a time, in C: ``gc.get_referents`` lists the children of every
    container of a level at once, and a set of their types says whether a float is among them.
    A Python loop over every value would cost several times orjson's own time on a 1,000-row
    tool result.
    """
    small = _scan_small(value)
    return small if small is not None else _scan_levels(value)


def _scan_levels(value: object) -> _Found:
    """`_scan` one level of the tree at a time (see there)."""
    level: list[Any] = [value]
    floats = False
    for _ in range(MAX_DEPTH + 2):
        if not level:
            return _Found.FLOATS if floats else _Found.NOTHING
        kinds = set(map(type, level))
        if float in kinds:
            floats = True
        if not kinds <= _PLAIN:
            keep: set[type] = set()
            for kind in kinds:
                if kind in _PLAIN or issubclass(kind, dict | list):
                    keep.add(kind)  # gc also reports a subclass instance's class: dropped below
                elif issubclass(kind, str | int | type) or kind is uuid.UUID:
                    continue  # leaves for orjson (str/int enums included), or a class object
                else:
                    # Other enums (their value may hold floats), orjson.Fragment (refused: its
                    # bytes are not known to be canonical), anything unforeseen.
                    return _Found.OTHER
            level = list(compress(level, map(keep.__contains__, map(type, level))))
        level = gc.get_referents(*level)
    return _Found.OTHER  # deeper than orjson allows: a subclass's __dict__ loops back on itself


def _with_float_fragments(value: Any) -> Any:
    """``value`` with every float replaced by its JCS text as an ``orjson.Fragment``; containers
    without floats are shared, not copied. Only called on what `_scan` passed: plain types and
    dict/list subclasses, str/int subclasses and UUIDs as leaves."""
    if isinstance(value, dict):
        changed = _changed_items(dict.items(value))
        return value if changed is None else dict(dict.items(value)) | changed
    if isinstance(value, list | tuple):
        items = list.__iter__(value) if isinstance(value, list) else value
        changed = _changed_items(enumerate(items))
        if changed is None:
            return value
        copied = list(list.__iter__(value) if isinstance(value, list) else value)
        for index, new in changed.items():
            copied[index] = new
        return copied
    if type(value) is float:
        return _float_fragment(value)
    return value


def _changed_items(items: Iterable[tuple[Any, Any]]) -> dict[Any, Any] | None:
    """The (key or index, item) pairs of a container whose item holds a float, each item with
    its floats replaced; None when no item does (the container is then shared as it is)."""
    changed: dict[Any, Any] | None = None
    for key, item in items:
        kind = type(item)
        if kind in _LEAVES:
            continue
        new = _float_fragment(item) if kind is float else _with_float_fragments(item)
        if new is not item:
            if changed is None:
                changed = {}
            changed[key] = new
    return changed


# Tool results repeat their numbers (prices, scores, 0.0, 1.0): formatting one costs a float repr
# and string work, a cache hit one C call. Bounded, like all state on the emit path; 0.0 and -0.0
# share an entry, which is right since both are written "0"; NaN never hits and raises in
# format_number.
@functools.lru_cache(maxsize=4096)
def _float_fragment(value: float) -> orjson.Fragment:
    return orjson.Fragment(format_number(value))


def _exact(value: object) -> bytes:
    try:
        # Sorted like the fast path: `_dict` leaves dicts without astral keys for orjson to order.
        return orjson.dumps(_Exact().prepare(value, 0), option=orjson.OPT_SORT_KEYS)
    except CanonicalJSONError:
        raise
    except RecursionError:
        raise CanonicalJSONError("value is nested too deeply for canonical JSON") from None
    except Exception as exc:  # "nothing else escapes": a hostile __eq__ or enum value included
        raise CanonicalJSONError(f"{type(exc).__name__}: {exc}") from None


class _Exact:
    """Builds a copy orjson writes exactly as JCS: floats and big ints become pre-written
    fragments, strings are surrogate-fixed, dicts whose key order orjson would get wrong become
    fragments written here in UTF-16 order."""

    __slots__ = ("_path",)

    def __init__(self) -> None:
        self._path: set[int] = set()

    def prepare(self, value: object, depth: int) -> Any:
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
            return self._dict(value, self._enter(value, depth))
        if isinstance(value, list | tuple):
            return self._list(value, self._enter(value, depth))
        if isinstance(value, enum.Enum):
            return self.prepare(value.value, depth)
        # Subclasses are read as their base value, as orjson reads them (never their overrides).
        if isinstance(value, str):
            return fix_surrogates(str.__str__(value))
        if isinstance(value, int):
            return _int(int.__index__(value))
        if isinstance(value, float):
            return orjson.Fragment(format_number(float.__float__(value)))
        if isinstance(value, uuid.UUID):
            return str(value)
        raise CanonicalJSONError(f"{type(value).__name__} is not a JSON value")

    # Two Python frames per level (prepare, _list/_dict; no comprehensions, which are frames of
    # their own in 3.11) keep MAX_DEPTH levels well inside the interpreter's recursion limit.
    def _enter(self, value: object, depth: int) -> int:
        marker = id(value)
        if marker in self._path:
            raise CanonicalJSONError("value contains a cycle")
        if depth >= MAX_DEPTH:
            raise CanonicalJSONError(f"value is nested deeper than {MAX_DEPTH} containers")
        self._path.add(marker)
        return depth + 1

    def _list(self, value: list[object] | tuple[object, ...], depth: int) -> list[Any]:
        out: list[Any] = []
        for item in list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value):
            out.append(self.prepare(item, depth))
        self._path.discard(id(value))
        return out

    def _dict(self, value: dict[object, object], depth: int) -> Any:
        items: dict[str, Any] = {}
        for key, item in dict.items(value):
            if not isinstance(key, str):
                raise CanonicalJSONError(f"object key {key!r} is not a string")
            fixed = fix_surrogates(str.__str__(key))
            if fixed in items:
                raise CanonicalJSONError(f"object keys collide after surrogate repair: {fixed!r}")
            items[fixed] = self.prepare(item, depth)
        self._path.discard(id(value))
        if not any(_is_astral(key) for key in items):
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


def _is_astral(key: str) -> bool:
    return not key.isascii() and any(ord(ch) > 0xFFFF for ch in key)


def _utf16_units(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def fix_surrogates(text: str) -> str:
    """Replace lone UTF-16 surrogates by U+FFFD; a surrogate pair becomes the character it encodes."""
    if text.isascii():  # O(1) in CPython: the string knows its widest character
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def format_number(value: float) -> str:
    """ECMAScript ``Number.prototype.toString`` for a finite double (RFC 8785 §3.2.2.3)."""
    text = float.__repr__(value)
    # Python's repr is plain (shortest round-trip digits) for 1e-4 <= |x| < 1e16, where
    # ECMAScript is plain too with the same digits; only the ".0" of integral values differs.
    if "e" not in text and "n" not in text:  # "n": nan and inf go the long way, and raise there
        if text.endswith(".0"):
            text = text[:-2]
        return "0" if text == "-0" else text
    return _format_long(value)


def _format_long(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        raise CanonicalJSONError(f"{value!r} is not a JSON number")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    if fraction == "0":
        fraction = ""
    digits = whole + fraction
    # point: the decimal exponent n of ECMAScript's algorithm, value = 0.digits * 10**point
    point = len(whole) + (int(exponent) if exponent else 0)
    if whole == "0":  # repr writes 0.000123 for small plain values: skip the leading zeros
        stripped = fraction.lstrip("0")
        point = -(len(fraction) - len(stripped)) + (int(exponent) if exponent else 0)
        digits = stripped
    digits = digits.rstrip("0") or "0"
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
