"""The prefix counts (af_otel/model/prefix.py) agree with counting item by item."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from af_otel.model.prefix import equal_prefix

words = st.lists(st.sampled_from(["a", "b", "c"]), max_size=6)


def counted(before: list[str], now: list[str]) -> int:
    size = 0
    for x, y in zip(before, now, strict=False):
        if x != y:
            break
        size += 1
    return size


@given(before=words, now=words, as_tuples=st.booleans())
def test_equal_prefix_counts_the_leading_equal_strings(
    before: list[str], now: list[str], as_tuples: bool
) -> None:
    if as_tuples:
        assert equal_prefix(tuple(before), tuple(now)) == counted(before, now)
    else:
        assert equal_prefix(before, now) == counted(before, now)
