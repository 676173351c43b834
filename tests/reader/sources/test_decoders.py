"""`attributes` reads most pairs on a quick path and the rest the checked way: on any list of
pairs, well formed or not, it gives what the checked way gives, value for value, or raises the
same error with the same message."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from af_otel.reader.sources.decoders import Problem, attributes, checked_attributes

_TEXT = st.text(max_size=6)
_NUMBERS = st.one_of(
    st.integers(-(2**64), 2**65),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
)
# Every content an AnyValue member may hold in a file: the right type, the wrong one, the
# string forms (signed, padded, unicode digits, too long), null.
_CONTENTS = st.one_of(
    _TEXT,
    _NUMBERS,
    st.sampled_from(["5", "-5", "+5", "007", " 5", "٥", "²", "1" * 21, "NaN", "1e3", "AAE="]),
    st.none(),
)
_MEMBERS = st.sampled_from(
    ["stringValue", "intValue", "boolValue", "doubleValue", "bytesValue", "int_value", "other"]
)
_SCALAR_VALUES = st.dictionaries(_MEMBERS, _CONTENTS, max_size=2)


def _array(elements: list[Any], shape: str) -> Any:
    if shape == "empty":
        return {}
    if shape == "null":
        return {"values": None}
    return {"values": elements}


_ARRAY_VALUES = st.builds(
    lambda elements, shape: {"arrayValue": _array(elements, shape)},
    st.lists(st.one_of(_SCALAR_VALUES, st.just({"arrayValue": {}}), _TEXT), max_size=3),
    st.sampled_from(["empty", "null", "values"]),
)
_VALUES = st.one_of(
    _SCALAR_VALUES,
    _ARRAY_VALUES,
    st.just({"kvlistValue": {"values": [{"key": "k", "value": {"intValue": "1"}}]}}),
    st.none(),
    _TEXT,
)
_PAIRS = st.one_of(
    st.fixed_dictionaries({"key": st.one_of(st.sampled_from(["a", "b", "c"]), _TEXT)}).flatmap(
        lambda kv: st.fixed_dictionaries(
            {**{k: st.just(v) for k, v in kv.items()}, "value": _VALUES}
        )
    ),
    st.fixed_dictionaries({"key": st.one_of(st.none(), st.integers())}),
    st.just("not a pair"),
)


def _outcome(read: Any, items: list[Any]) -> tuple[str, Any]:
    try:
        return "value", read(items, "attributes")
    except Problem as exc:
        return "error", str(exc)


@settings(max_examples=500, deadline=None)
@given(st.lists(_PAIRS, max_size=5))
def test_the_quick_path_reads_as_the_checked_one(items: list[Any]) -> None:
    """Any list of pairs: the same attributes (types too) or the same error message."""
    quick, checked = _outcome(attributes, items), _outcome(checked_attributes, items)
    assert quick == checked
    if quick[0] == "value":
        assert [type(v) for v in quick[1].values()] == [type(v) for v in checked[1].values()]


def test_the_common_shapes_read_their_values() -> None:
    """Strings, plain ints (text or number), bools, doubles and scalar arrays, empty ones too."""
    items = [
        {"key": "s", "value": {"stringValue": "x"}},
        {"key": "i", "value": {"intValue": "42"}},
        {"key": "n", "value": {"intValue": 7}},
        {"key": "b", "value": {"boolValue": False}},
        {"key": "d", "value": {"doubleValue": 0.5}},
        {
            "key": "a",
            "value": {"arrayValue": {"values": [{"stringValue": "p"}, {"intValue": "1"}]}},
        },
        {"key": "e", "value": {"arrayValue": {}}},
    ]
    assert attributes(items, "attributes") == {
        "s": "x",
        "i": 42,
        "n": 7,
        "b": False,
        "d": 0.5,
        "a": ("p", 1),
        "e": (),
    }
