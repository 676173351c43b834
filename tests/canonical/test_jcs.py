"""RFC 8785 canonical JSON: the RFC's examples, committed golden vectors, and property tests against
an independent implementation (the `rfc8785` package) and between af_otel's own two paths."""

from __future__ import annotations

import collections
import datetime
import decimal
import enum
import json
import math
import struct
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from af_otel import CanonicalJSONError, canonical_json
from af_otel.canonical import fix_surrogates, format_number
from af_otel.canonical.jcs import (
    _FAST_OPTIONS,
    MAX_DEPTH,
    _exact,
    _refuse,
    _scan_levels,
    _scan_small,
)
from af_otel.model import FrozenDict

GOLDEN = Path(__file__).parent / "golden"
SAFE_INT = 2**53 - 1


def _load(name: str) -> Any:
    return json.loads((GOLDEN / name).read_text(encoding="utf-8"))


# --- the RFC's own examples -------------------------------------------------------------------

# RFC 8785 Appendix B: IEEE-754 bit patterns and their JSON text, as the RFC prints them.
RFC_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]
RFC_NOT_NUMBERS = ["7fffffffffffffff", "7ff0000000000000", "fff0000000000000"]


def _double(bits: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(bits))[0]
    return value


class TestRfcExamples:
    @pytest.mark.parametrize(("bits", "text"), RFC_NUMBERS)
    def test_appendix_b_numbers(self, bits: str, text: str) -> None:
        """Each IEEE-754 sample of RFC 8785 Appendix B is written as the RFC prints it."""
        value = _double(bits)
        assert format_number(value) == text
        assert canonical_json(value) == text.encode()
        assert canonical_json([value]) == f"[{text}]".encode()
        assert _exact(value) == text.encode()

    @pytest.mark.parametrize("bits", RFC_NOT_NUMBERS)
    def test_appendix_b_non_numbers_raise(self, bits: str) -> None:
        """NaN and ±Infinity, which the RFC's table marks as errors, raise CanonicalJSONError."""
        with pytest.raises(CanonicalJSONError):
            canonical_json({"x": [_double(bits)]})

    def test_structure_example(self) -> None:
        """The RFC's §3.2.2 example: numbers, escapes and literals, sorted and compact."""
        source = (
            '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
            '"string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
            '"literals": [null, true, false]}'
        )
        expected = (
            '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
            '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
        )
        assert canonical_json(json.loads(source)) == expected.encode("utf-8")

    def test_sorting_example(self) -> None:
        """The RFC's §3.2.3 sorting example: keys in UTF-16 code unit order."""
        value = {
            "\u20ac": "Euro Sign",
            "\r": "Carriage Return",
            "\ufb33": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\U0001f600": "Emoji: Grinning Face",
            "\u0080": "Control",
            "\u00f6": "Latin Small Letter O With Diaeresis",
        }
        out = canonical_json(value).decode("utf-8")
        keys = [key for key, _ in json.loads(out, object_pairs_hook=lambda pairs: pairs)]
        assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
        assert out.startswith('{"\\r":"Carriage Return","1":"One","\u0080":"Control"')

    def test_surrogate_pair_key_sorts_like_utf16(self) -> None:
        """An astral key sorts before U+E000..U+FFFF keys (UTF-16), not after (code points)."""
        value = {"\uffff": 1, "\U0001f600": 2, "\ue000": 3, "\ud7ff": 4, "a": 5}
        assert canonical_json(value) == '{"a":5,"\ud7ff":4,"😀":2,"\ue000":3,"\uffff":1}'.encode()


# --- committed golden vectors ---------------------------------------------------------------


@pytest.mark.parametrize("vector", _load("jcs-vectors.json")["vectors"], ids=lambda v: v["input"])
def test_golden_vectors(vector: dict[str, str]) -> None:
    """Every committed vector (computed by an ECMAScript implementation) matches, on both paths."""
    value = json.loads(vector["input"])
    expected = bytes.fromhex(vector["jcs_hex"])
    assert canonical_json(value) == expected
    assert _exact(value) == expected


@pytest.mark.parametrize("vector", _load("numbers.json")["numbers"], ids=lambda v: v["ieee_hex"])
def test_golden_numbers(vector: dict[str, str]) -> None:
    """Every committed IEEE-754 sample is written as ECMAScript writes it."""
    assert format_number(_double(vector["ieee_hex"])) == vector["jcs"]


def test_golden_files_cover_the_rfc_table() -> None:
    """The committed number vectors include every Appendix B sample, with the same text."""
    golden = {v["ieee_hex"]: v["jcs"] for v in _load("numbers.json")["numbers"]}
    assert {bits: golden[bits] for bits, _ in RFC_NUMBERS} == dict(RFC_NUMBERS)


# --- documented choices for Python values -----------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    HALF = 0.5
    NESTED = {"b": [1.0, None], "a": True}  # noqa: RUF012 - an enum value, never mutated


class Level(enum.IntEnum):
    HIGH = 3


class Mood(enum.StrEnum):
    CALM = "calm"


class Text(str):
    def __str__(self) -> str:  # what orjson and JCS ignore: the string's own characters count
        return "overridden"


class Number(int):
    def __index__(self) -> int:
        return 0


Point = collections.namedtuple("Point", "x y")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            uuid.UUID("12345678-1234-5678-1234-567812345678"),
            '"12345678-1234-5678-1234-567812345678"',
        ),
        ({"id": uuid.UUID(int=0)}, '{"id":"00000000-0000-0000-0000-000000000000"}'),
        (Color.RED, '"red"'),
        (Color.HALF, "0.5"),
        ([Color.NESTED], '[{"a":true,"b":[1,null]}]'),
        (Level.HIGH, "3"),
        ({"m": Mood.CALM}, '{"m":"calm"}'),
        ((1, "a", (2.0, None)), '[1,"a",[2,null]]'),
        ({"p": Point(1, 2.5)}, '{"p":[1,2.5]}'),
        (Text("x\ud800"), '"x\ufffd"'),
        ({Text("k"): Number(7)}, '{"k":7}'),
        (collections.OrderedDict([("b", 1), ("a", 2)]), '{"a":2,"b":1}'),
        (2**53 + 1, "9007199254740992"),
        (-(2**64), "-18446744073709552000"),
        (10**21, "1e+21"),
        (int(1.7976931348623157e308), "1.7976931348623157e+308"),
    ],
    ids=repr,
)
def test_python_value_choices(value: object, expected: str) -> None:
    """UUIDs and enum members are written as their JSON form, tuples as arrays, subclasses as
    their base value, big integers as the nearest double."""
    assert canonical_json(value) == expected.encode("utf-8")
    assert _exact(value) == expected.encode("utf-8")


@dataclass
class Box:
    value: int


def _cycle_list() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


def _cycle_dict() -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    value["self"] = {"again": value}
    return value


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [
        math.nan,
        math.inf,
        -math.inf,
        {"a": [1, {"b": math.nan}]},
        (math.inf,),
        _cycle_list(),
        _cycle_dict(),
        b"bytes",
        bytearray(b"x"),
        memoryview(b"x"),
        {1, 2},
        frozenset({"a"}),
        {1: "int key"},
        {None: "none key"},
        {("a",): "tuple key"},
        {"a": 1, 2: "mixed"},
        object(),
        orjson.Fragment(b'{"trusted":"no"}'),
        [orjson.Fragment(b"1")],
        datetime.datetime(2024, 1, 1),
        datetime.date(2024, 1, 1),
        Box(1),
        1 + 2j,
        decimal.Decimal("1.5"),
        2**1024,
        -(10**400),
        {"deep": _nested(MAX_DEPTH)},
        _nested(10_000),
        dict.fromkeys(["x\ud800", "x\ufffd"], 1),
        Color,
    ],
    ids=lambda v: type(v).__name__,
)
def test_values_json_cannot_hold_raise(value: object) -> None:
    """NaN, ±Infinity, cycles, bytes, sets, non-string keys, objects, too-deep nesting, integers
    beyond a double and keys colliding after repair raise CanonicalJSONError, on both paths."""
    with pytest.raises(CanonicalJSONError):
        canonical_json(value)
    with pytest.raises(CanonicalJSONError):
        _exact(value)


def test_depth_limit_is_254_containers() -> None:
    """254 nested containers are written; one more raises, as orjson's own limit."""
    assert canonical_json(_nested(MAX_DEPTH)) == b"[" * MAX_DEPTH + b"0" + b"]" * MAX_DEPTH
    assert _exact(_nested(MAX_DEPTH)) == canonical_json(_nested(MAX_DEPTH))
    with pytest.raises(CanonicalJSONError):
        canonical_json(_nested(MAX_DEPTH + 1))


class TestSurrogates:
    def test_lone_surrogates_become_replacement_characters(self) -> None:
        """Lone surrogates are replaced by U+FFFD, in values and in keys."""
        assert canonical_json({"k\udc00": "a\ud800b"}) == '{"k\ufffd":"a\ufffdb"}'.encode()

    def test_pair_written_as_two_surrogates_is_the_character(self) -> None:
        """A high surrogate followed by a low one is the character they encode."""
        assert canonical_json("\ud83d\ude00") == canonical_json("\U0001f600")

    def test_fix_surrogates(self) -> None:
        """fix_surrogates leaves valid text alone and repairs each lone surrogate once."""
        assert fix_surrogates("plain") == "plain"
        assert fix_surrogates("é😀") == "é😀"
        assert fix_surrogates("\ud800\ud800x\udfff") == "\ufffd\ufffdx\ufffd"


# --- property tests -------------------------------------------------------------------------

_no_surrogates = st.characters(exclude_categories=("Cs",))
_text = st.text(_no_surrogates, max_size=12)
_floats = st.floats(allow_nan=False, allow_infinity=False)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-SAFE_INT, SAFE_INT),
    _floats,
    _text,
    st.sampled_from([0.0, -0.0, 1e16, 1e-7, 1e21, 100.0, 5e-324, "null", "1.0e-5", "\ue000"]),
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(_text, inner, max_size=5)),
    max_leaves=25,
)

_any_text = st.text(max_size=10)  # lone surrogates included
anything = st.recursive(
    st.one_of(
        _scalars,
        _any_text,
        st.integers(),
        st.floats(),
        st.binary(max_size=3),
        st.sampled_from([Color.RED, Color.HALF, Level.HIGH, uuid.UUID(int=5), Text("t")]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(_any_text, st.integers()), inner, max_size=4),
        st.frozensets(st.integers(), max_size=2),
    ),
    max_leaves=20,
)


class _Bare(dict[str, Any]):
    __slots__ = ()


class _Slotted(dict[str, Any]):
    __slots__ = ("extra",)


class _WithDict(dict[str, Any]):
    pass


def _mapping(items: dict[str, Any], kind: type, extra: object) -> dict[str, Any]:
    made = kind(items)
    if kind in (_Slotted, _WithDict):
        made.extra = extra
    return made


# Trees whose mappings are dicts, the request model's frozen dict, and dict subclasses that do
# (or do not) hold more than their items; with long lists, so both walks of `_scan` are taken.
mapped_values = st.recursive(
    st.one_of(_scalars, st.sampled_from([Color.RED, Color.HALF, Text("t"), uuid.UUID(int=5)])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=60),
        st.tuples(inner, inner),
        st.builds(
            _mapping,
            st.dictionaries(_text, inner, max_size=4),
            st.sampled_from([dict, FrozenDict, _Bare, _Slotted, _WithDict]),
            st.one_of(_floats, st.just(object())),
        ),
    ),
    max_leaves=80,
)


def _outcome(write: Any, value: object) -> bytes | str:
    try:
        out: bytes = write(value)
    except CanonicalJSONError:
        return "CanonicalJSONError"
    return out


class TestProperties:
    @given(value=json_values)
    @settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
    def test_agrees_with_rfc8785_package(self, value: Any) -> None:
        """Within the rfc8785 package's domain, both implementations write the same bytes."""
        assert canonical_json(value) == rfc8785.dumps(value)

    @given(value=_floats)
    @settings(max_examples=300)
    def test_numbers_agree_and_round_trip(self, value: float) -> None:
        """Every finite double is written as rfc8785 writes it, and reads back as itself."""
        text = format_number(value)
        assert text.encode() == rfc8785.dumps(value)
        assert float(text) == value

    @given(
        value=st.one_of(st.integers(min_value=SAFE_INT + 1), st.integers(max_value=-SAFE_INT - 1))
    )
    @settings(max_examples=200)
    def test_big_integers_are_the_nearest_double(self, value: int) -> None:
        """An integer beyond ±(2**53-1) is written as the IEEE double nearest to it, or raises."""
        try:
            nearest = float(value)
        except OverflowError:
            with pytest.raises(CanonicalJSONError):
                canonical_json(value)
            return
        assert canonical_json(value) == canonical_json(nearest) == rfc8785.dumps(nearest)
        assert canonical_json({"n": [value]}) == b'{"n":[' + rfc8785.dumps(nearest) + b"]}"

    @given(value=anything)
    @settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
    def test_fast_and_exact_paths_agree(self, value: Any) -> None:
        """The orjson fast path and the exact path give the same bytes or both refuse."""
        assert _outcome(canonical_json, value) == _outcome(_exact, value)

    @given(value=mapped_values)
    @settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
    def test_the_small_walk_agrees_with_the_level_walk(self, value: Any) -> None:
        """Where the Python walk answers, the level-at-a-time walk says the same; the bytes are
        the exact path's either way."""
        try:
            orjson.dumps(value, default=_refuse, option=_FAST_OPTIONS)
        except orjson.JSONEncodeError:
            return  # `_scan` runs only on what orjson wrote
        small = _scan_small(value)
        if small is not None:
            assert small is _scan_levels(value)
        assert _outcome(canonical_json, value) == _outcome(_exact, value)

    @given(value=anything)
    @settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
    def test_only_the_typed_error_escapes(self, value: Any) -> None:
        """Any value gives bytes that parse as JSON, or CanonicalJSONError: nothing else."""
        out = _outcome(canonical_json, value)
        if isinstance(out, bytes):
            json.loads(out)

    @given(value=json_values)
    @settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
    def test_idempotent(self, value: Any) -> None:
        """Canonical JSON parsed and written again is unchanged."""
        out = canonical_json(value)
        assert canonical_json(json.loads(out)) == out

    @given(keys=st.lists(st.text(max_size=4), max_size=8))
    @settings(max_examples=200)
    def test_keys_sorted_by_utf16_units(self, keys: list[str]) -> None:
        """Keys come out in UTF-16 code unit order, whatever their insertion order."""
        value = {key: index for index, key in enumerate(keys)}
        try:
            out = canonical_json(value)
        except CanonicalJSONError:  # two keys equal after surrogate repair
            repaired = [fix_surrogates(k) for k in value]
            assert len(set(repaired)) < len(repaired)
            return
        written = [k for k, _ in json.loads(out, object_pairs_hook=lambda pairs: pairs)]
        assert written == sorted(written, key=lambda k: k.encode("utf-16-be"))
        assert canonical_json(dict(reversed(value.items()))) == out

    @given(text=st.text(max_size=20))
    @settings(max_examples=200)
    def test_strings_escape_exactly_as_ecmascript(self, text: str) -> None:
        """Only ", \\, and control characters are escaped (short forms first, else lowercase
        \\u00xx); everything else is raw UTF-8, after surrogate repair."""
        short = {
            '"': '\\"',
            "\\": "\\\\",
            "\b": "\\b",
            "\f": "\\f",
            "\n": "\\n",
            "\r": "\\r",
            "\t": "\\t",
        }
        expected = "".join(
            short.get(ch) or (f"\\u{ord(ch):04x}" if ord(ch) < 0x20 else ch)
            for ch in fix_surrogates(text)
        )
        assert canonical_json(text) == f'"{expected}"'.encode()
