"""Decoders for the encodings the export formats disagree on: ids, 64-bit ints, enums and AnyValue.

OTLP JSON writes hex ids, integer enums and int64 as strings; Tempo's jsonpb writes base64 ids and
enum names; protobuf-to-JSON and hand-written files mix both. Field names come in two spellings as
the protobuf JSON mapping allows: lowerCamelCase (``traceId``) or the proto name (``trace_id``, what
Phoenix serves), and a field set to ``null`` is a field left out. Each decoder here accepts every
form and raises ``Problem`` (never a bare KeyError/TypeError) so sources can name the span that
failed. Parsed JSON is walked as the dicts and lists every JSON parser produces.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, Final

from af_otel.reader.records import AttrScalar, AttrValue, SpanKind, StatusCode

__all__ = [
    "Problem",
    "any_value",
    "array_text",
    "attributes",
    "base64_text",
    "double_value",
    "enum_value",
    "id_hex",
    "int_value",
    "message_field",
    "optional_id_hex",
    "proto_name",
    "python_value",
]

_HEX: Final = {16: re.compile(r"[0-9a-fA-F]{16}"), 32: re.compile(r"[0-9a-fA-F]{32}")}
# int64 and uint64 (the fixed64 times) both fit in 20 digits; a longer string is not an OTLP int.
_INT: Final = re.compile(r"[+-]?[0-9]{1,20}")
_INT_MIN: Final = -(2**63)
_INT_MAX: Final = 2**64 - 1
# Nested arrays and maps deeper than this are refused: no exporter writes them, and a cyclic or
# hostile document must not exhaust the stack.
MAX_DEPTH: Final = 32
# proto3 JSON spells the non-finite doubles as strings.
_NON_FINITE: Final = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class Problem(ValueError):
    """A value cannot be decoded; the message says which field and why, the caller says where."""


@cache
def proto_name(json_name: str) -> str:
    """The protobuf field name of a lowerCamelCase JSON name (``traceId`` -> ``trace_id``)."""
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), json_name)


def message_field(message: Mapping[str, Any], json_name: str) -> Any:
    """A message field by its lowerCamelCase JSON name or its proto name; None when absent or null.

    The protobuf JSON mapping lets writers use either spelling and readers must accept both.
    """
    value = message.get(json_name)
    if value is None:
        value = message.get(proto_name(json_name))
    return value


def id_hex(value: object, nbytes: int, what: str) -> str:
    """A trace (16 bytes) or span (8 bytes) id as lowercase hex, from hex of any case or base64."""
    if value is None or value == "":
        raise Problem(f"missing {what}")
    if not isinstance(value, str):
        raise Problem(f"{what} must be a string, got {type(value).__name__}")
    # Length decides: 32/16 hex digits are hex; base64 of 16/8 bytes is 24/12 characters.
    if _HEX[2 * nbytes].fullmatch(value):
        text = value.lower()
    else:
        raw = _b64decode(value)
        if raw is None or len(raw) != nbytes:
            raise Problem(
                f"{what} {value!r} is neither {2 * nbytes} hex digits nor base64 of {nbytes} bytes"
            )
        text = raw.hex()
    if text.count("0") == len(text):
        raise Problem(f"{what} is all zeros (an invalid id)")
    return text


def optional_id_hex(value: object, nbytes: int, what: str) -> str | None:
    """Like ``id_hex`` for a parent id: absent, empty or all zeros mean "no parent"."""
    if value is None or value == "":
        return None
    try:
        return id_hex(value, nbytes, what)
    except Problem:
        if isinstance(value, str) and value.strip("0=A") == "":  # zeros in hex or in base64
            return None
        raise


# What the quick decoders below return for a value they leave to the checked ones (`int_value`,
# `any_value`), which read every form and name what they refuse.
_SLOW: Final = object()


def _quick_int(content: object) -> object:
    """An integer in the forms OTLP JSON writers use: unsigned decimal text of at most 19 digits
    (below 10**19, so in range without a test) or a JSON number in range; `_SLOW` for any other
    form (a sign, 20 digits, a bool...), which `int_value` reads with its checks."""
    if type(content) is str:
        if 0 < len(content) < 20 and content.isascii() and content.isdigit():
            return int(content)
        return _SLOW
    if type(content) is int:
        return content if _INT_MIN <= content <= _INT_MAX else _SLOW
    return _SLOW


def int_value(value: object, what: str, default: int | None = None) -> int:
    """An integer written as a JSON number or as a decimal string (OTLP JSON's int64 form)."""
    if value is None and default is not None:
        return default
    quick = _quick_int(value)
    if quick is not _SLOW:
        return quick  # type: ignore[return-value]  # _quick_int gives an int or _SLOW
    number: int | None = None
    if isinstance(value, bool):
        raise Problem(f"{what} must be an integer, got a bool")
    if isinstance(value, int):
        number = value
    elif (isinstance(value, str) and _INT.fullmatch(value)) or (
        isinstance(value, float) and value.is_integer()
    ):
        number = int(value)
    if number is None:
        raise Problem(f"{what} must be an integer, got {_excerpt(value)}")
    if not _INT_MIN <= number <= _INT_MAX:
        raise Problem(f"{what} is out of the 64-bit range")
    return number


def _excerpt(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def enum_value(value: object, enum: type[SpanKind] | type[StatusCode], what: str) -> Any:
    """An OTLP enum from its number, its name (``SPAN_KIND_CLIENT``) or short name (``CLIENT``)."""
    if value is None:
        value = 0  # the enum's zero member, found by the lookup just below
    if type(value) is int:  # OTLP JSON's form: a lookup, not the Enum call
        member = enum._value2member_map_.get(value)
        if member is not None:
            return member
    try:
        if isinstance(value, str) and not _INT.fullmatch(value):
            name = value.upper()
            for prefix in ("SPAN_KIND_", "STATUS_CODE_"):
                name = name.removeprefix(prefix)
            return enum[name]
        return enum(int_value(value, what))
    except (KeyError, ValueError):
        raise Problem(f"{what} {value!r} is not an OTLP {enum.__name__}") from None


def _b64decode(text: str) -> bytes | None:
    # proto3 JSON accepts both the standard and the URL-safe alphabet, padded or not.
    standard = text.replace("-", "+").replace("_", "/")
    standard += "=" * (-len(standard) % 4)
    try:
        return base64.b64decode(standard, validate=True)
    except (binascii.Error, ValueError):
        return None


def base64_text(value: object, what: str) -> str:
    """Bytes carried as base64 text, normalized to the standard padded alphabet."""
    raw = _b64decode(value) if isinstance(value, str) else None
    if raw is None:
        raise Problem(f"{what} {value!r} is not base64")
    return base64.b64encode(raw).decode("ascii")


def double_value(value: object, what: str) -> float:
    """A double written as a JSON number or as text (proto3 JSON's ``NaN`` and infinities too)."""
    if isinstance(value, bool):
        raise Problem(f"{what} must be a number, got a bool")
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an integer past a double's range
            raise Problem(f"{what} is a number beyond a double's range") from None
    if isinstance(value, str):
        if value in _NON_FINITE:
            return _NON_FINITE[value]
        try:
            return float(value)
        except ValueError:
            pass
    raise Problem(f"{what} must be a number, got {value!r}")


# AnyValue's oneof, both spellings of each member; the member set (not null) is the value.
_ANY_KINDS: Final = {
    name: kind
    for kind in ("string", "int", "bool", "double", "array", "kvlist", "bytes")
    for name in (f"{kind}Value", f"{kind}_value")
}


def _set_field(value: object, what: str) -> tuple[str | None, Any]:
    """Which member of an AnyValue's oneof is set, and its content; (None, None) when none is."""
    if not isinstance(value, dict):
        raise Problem(f"{what} must be an AnyValue object, got {type(value).__name__}")
    # Walk the object's own keys: one in OTLP JSON, seven (six null) from Phoenix.
    for name, content in value.items():
        if content is not None:
            kind = _ANY_KINDS.get(name)
            if kind is not None:
                return kind, content
    return None, None


def _plain(value: object, what: str, depth: int = 0) -> object:
    """An AnyValue as a plain JSON value, for arrays and maps nested inside a value."""
    if depth > MAX_DEPTH:
        raise Problem(f"{what} is nested deeper than {MAX_DEPTH} levels")
    kind, content = _set_field(value, what)
    if kind == "array":
        return [
            _plain(item, f"{what}[{i}]", depth + 1) for i, item in enumerate(_values(content, what))
        ]
    if kind == "kvlist":
        return {
            _string(kv.get("key"), f"{what} key"): _plain(kv.get("value") or {}, what, depth + 1)
            for kv in _key_values(_values(content, what), what)
        }
    scalar = _scalar(kind, content, what)
    if isinstance(scalar, float) and not math.isfinite(scalar):
        return _finite_text(scalar)  # JSON has no non-finite numbers
    return scalar


def _scalar(kind: str | None, content: object, what: str) -> AttrScalar | None:
    """The content of an AnyValue's scalar member ``kind``; None for a container or no member."""
    if kind == "string":
        return _string(content, what)
    if kind == "int":
        return int_value(content, what)
    if kind == "bool":
        return _bool(content, what)
    if kind == "double":
        return double_value(content, what)
    if kind == "bytes":
        return base64_text(content, what)
    return None


def _finite_text(number: float) -> str:
    return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")


def _nested_json(value: object) -> str:
    # Sorted compact JSON, as Jaeger's ``AsString`` renders a map or an array.
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _element(value: object, what: str) -> AttrScalar | None:
    """An array attribute's element: a scalar, None for an empty value, JSON for a container."""
    kind, _ = _set_field(value, what)
    if kind in ("array", "kvlist"):
        return _nested_json(_plain(value, what))
    decoded = any_value(value, what)
    assert not isinstance(decoded, tuple)  # containers were handled just above
    return decoded


def any_value(value: object, what: str) -> AttrValue | None:
    """An OTLP AnyValue as an attribute value; None for an empty value (no field set).

    Arrays of scalars become tuples; an array or map nested in an array, and a map itself, become a
    JSON string (the attribute model has no nested values); bytes become base64 text.
    """
    text = value.get("stringValue") if isinstance(value, dict) else None
    if type(text) is str:  # most attributes: one lookup, no walk
        return text
    kind, content = _set_field(value, what)
    if kind == "array":
        return tuple(
            _element(item, f"{what}[{i}]") for i, item in enumerate(_values(content, what))
        )
    if kind == "kvlist":
        return _nested_json(_plain(value, what))
    return _scalar(kind, content, what)


def _string(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise Problem(f"{what} must be a string, got {type(value).__name__}")
    return value


def _bool(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise Problem(f"{what} must be a bool, got {type(value).__name__}")
    return value


def _values(container: object, what: str) -> Sequence[object]:
    if container is None:
        return ()
    if not isinstance(container, dict):
        raise Problem(f"{what} must be an object with 'values'")
    values = container.get("values")
    if values is None:
        return ()
    if not isinstance(values, list):
        raise Problem(f"{what}.values must be a list")
    return values


def _key_values(items: Sequence[object], what: str) -> Sequence[Mapping[str, object]]:
    for item in items:
        if not isinstance(item, dict):
            raise Problem(
                f"{what} holds a {type(item).__name__} where a {{key, value}} object belongs"
            )
    return items  # type: ignore[return-value]  # checked just above


def _quick_scalar(name: str, content: object) -> object:
    """The one member ``name`` of an AnyValue in the forms OTLP JSON writers use, decoded as
    `_scalar` decodes it; `_SLOW` for any other form (a sign, a number as a string, bytes...)."""
    if name == "intValue":
        return _quick_int(content)
    if name == "stringValue":
        return content if type(content) is str else _SLOW
    if name == "boolValue":
        return content if type(content) is bool else _SLOW
    if name == "doubleValue":
        return content if type(content) is float else _SLOW
    return _SLOW


def _quick_array(content: object) -> object:
    """An ``arrayValue``'s content whose every element is one member `_quick_scalar` takes, as
    `any_value` decodes it (a tuple); `_SLOW` for anything else."""
    if type(content) is not dict:
        return _SLOW
    if not content:
        return ()  # an empty array: proto3 JSON leaves the empty list out
    values = content.get("values") if len(content) == 1 else None
    if type(values) is not list:
        return _SLOW
    out = []
    for item in values:
        if type(item) is not dict or len(item) != 1:
            return _SLOW
        # Most elements are strings, and the item's one member: taken without a call.
        decoded = item.get("stringValue")
        if type(decoded) is not str:
            ((member, element),) = item.items()
            decoded = _quick_scalar(member, element)
            if decoded is _SLOW:
                return _SLOW
        out.append(decoded)
    return tuple(out)


def _quick_attributes(items: list[object]) -> dict[str, AttrValue] | None:
    """`attributes` of a list of pairs in the shapes OTLP JSON writers give them (every key a
    string, every value one member: a string, a plain int, a bool, a double, an array of such
    scalars); None when any pair is of another shape, and the caller then reads the whole list
    the checked way, so that an error is the one it would have been. Each shape taken here is one
    whose `any_value` result depends on nothing but what is checked: the members set, their
    types and, for an array, each element's one member."""
    out: dict[str, AttrValue] = {}
    try:
        for kv in items:
            if type(kv) is not dict:
                return None
            key = kv["key"]
            value = kv["value"]
            if type(key) is not str or type(value) is not dict:
                return None
            # Most values are strings, and `any_value` takes a string member whatever else is
            # set; then ints, then arrays: each tested here, where a call would cost more.
            decoded = value.get("stringValue")
            if type(decoded) is not str:
                if len(value) != 1:
                    return None
                ((name, content),) = value.items()
                if name == "intValue":
                    decoded = _quick_int(content)
                elif name == "arrayValue":
                    decoded = _quick_array(content)
                else:
                    decoded = _quick_scalar(name, content)
                if decoded is _SLOW:
                    return None
            out[key] = decoded  # type: ignore[assignment]
    except KeyError:  # a pair without its key or its value: the checked way says which
        return None
    return out


def attributes(items: object, what: str) -> dict[str, AttrValue]:
    """OTLP ``{key, value}`` pairs as a dict; empty values are left out, the last repeat wins."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise Problem(f"{what} must be a list of {{key, value}} objects")
    # Most attributes take the quick path; its messages would name nothing, so anything it does
    # not take is read again the checked way, where every check and message is.
    quick = _quick_attributes(items) if type(items) is list else None
    return quick if quick is not None else checked_attributes(items, what)


def checked_attributes(items: list[object], what: str) -> dict[str, AttrValue]:
    """`attributes` of a list, each pair checked and named in the message that refuses it."""
    out: dict[str, AttrValue] = {}
    for kv in _key_values(items, what):
        key = _string(kv.get("key"), f"{what} key")
        decoded = any_value(kv.get("value") or {}, f"{what} {key!r}")
        if decoded is not None:
            out[key] = decoded
    return out


def array_text(text: str) -> AttrValue:
    """A string array carried as JSON text (``["a","b"]``) back as a tuple; other text stays text.

    Jaeger stores keep arrays as JSON text. Callers apply this only to keys known to be arrays,
    since any string may legitimately look like JSON.
    """
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    if not isinstance(parsed, list) or any(
        item is not None and not isinstance(item, str | bool | int | float) for item in parsed
    ):
        return text
    return tuple(parsed)


def python_value(value: object) -> AttrValue | None:
    """An attribute value held by the OTel SDK (str, bool, int, float, bytes, sequences, maps).

    The same rules as ``any_value``: sequences become tuples, maps and nested containers JSON
    strings, bytes base64 text, so that an SDK span and its OTLP export give equal records.
    """
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return _nested_json(_python_plain(value))
    if isinstance(value, Sequence):
        return tuple(_python_element(item) for item in value)
    return None


def _python_element(item: object) -> AttrScalar | None:
    if item is None or isinstance(item, str | bool | int | float):
        return item
    if isinstance(item, bytes | bytearray):
        return base64.b64encode(item).decode("ascii")
    return _nested_json(_python_plain(item))


def _python_plain(value: object, depth: int = 0) -> object:
    if depth > MAX_DEPTH:
        raise Problem(f"a value is nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _finite_text(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): _python_plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [_python_plain(item, depth + 1) for item in value]
    return str(value)
