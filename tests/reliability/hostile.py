"""Hypothesis strategies for hostile input: wrong types, deep nesting, non-JSON numbers, lone
surrogates, non-string keys, bytes, sets and arbitrary objects, mixed into GenAI-shaped values."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st


class Opaque:
    """An object no JSON writer knows."""

    def __repr__(self) -> str:
        return "Opaque()"


_surrogates = st.text(
    alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3
)
_texts = st.one_of(
    st.text(max_size=30),
    _surrogates,
    st.sampled_from(["", "\x00", "<script>alert(1)</script>", "\ufeff", "😀"]),
)
_numbers = st.one_of(
    st.integers(),
    st.integers(min_value=2**53, max_value=2**1100),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324]),
)
_leaves = st.one_of(
    st.none(),
    st.booleans(),
    _numbers,
    _texts,
    st.binary(max_size=10),
    st.just(Opaque()),
    st.frozensets(st.integers(), max_size=3),
)

# Any value at all, including ones JSON cannot hold.
junk: st.SearchStrategy[Any] = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(_texts, st.integers(), st.none()), inner, max_size=4),
    ),
    max_leaves=20,
)

# Values JSON can hold (what a file on disk can carry), with the awkward ones over-represented.
json_junk: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**64 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=30),
        st.sampled_from(
            [
                "",
                "0" * 32,
                "AAAAAAAAAAAAAAAAAAAAAA==",
                "SPAN_KIND_CLIENT",
                "NaN",
                "-Infinity",
                "9" * 30,
            ]
        ),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=15,
)

_part_types = st.sampled_from(
    ["text", "tool_call", "tool_call_response", "reasoning", "blob", "uri", "file", "weird", ""]
)


def _part(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.fixed_dictionaries(
            {"type": st.one_of(_part_types, values)},
            optional={
                "content": values,
                "id": values,
                "name": values,
                "arguments": st.one_of(
                    values, st.text(max_size=20), st.just('{"a": NaN}'), st.just('{"a":1,"a":2}')
                ),
                "response": values,
                "result": values,
            },
        ),
        values,
    )


def _message(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.fixed_dictionaries(
            {"role": st.one_of(st.sampled_from(["user", "assistant", "tool", "system"]), values)},
            optional={
                "parts": st.one_of(st.lists(_part(values), max_size=4), values),
                "content": values,
                "name": values,
            },
        ),
        values,
    )


def requests(values: st.SearchStrategy[Any] = junk) -> st.SearchStrategy[Any]:
    """GenAI-shaped request dicts with hostile values anywhere, and some that are not dicts at all."""
    return st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "system": st.one_of(
                    st.text(max_size=20), st.lists(_part(values), max_size=3), values
                ),
                "messages": st.one_of(st.lists(_message(values), max_size=6), values),
                "tools": st.one_of(
                    st.lists(
                        st.one_of(
                            st.fixed_dictionaries(
                                {"name": values}, optional={"parameters": values, "type": values}
                            ),
                            st.fixed_dictionaries(
                                {"type": st.just("function"), "function": values}
                            ),
                            values,
                        ),
                        max_size=3,
                    ),
                    values,
                ),
                "params": st.one_of(
                    st.dictionaries(
                        st.sampled_from(
                            ["temperature", "seed", "stop_sequences", "tool_choice", "max_tokens"]
                        ),
                        values,
                        max_size=4,
                    ),
                    values,
                ),
                "model": values,
                "provider": values,
            },
        ),
        values,
    )


def nested(depth: int, leaf: object = "x") -> object:
    """A list nested ``depth`` deep, built without recursion."""
    value: object = leaf
    for _ in range(depth):
        value = [value]
    return value


def cyclic() -> dict[str, Any]:
    """A dict that contains itself."""
    value: dict[str, Any] = {"a": 1}
    value["self"] = value
    return value
