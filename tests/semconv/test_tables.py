"""Table mechanics: rows read the first coercible source; indexed keys bucket in one pass."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from af_otel.model.request import SAMPLING_KEYS, STEERING_KEYS
from af_otel.semconv.coerce import integer, number, text
from af_otel.semconv.rows import (
    DIAL_TYPES,
    SAMPLING_TYPES,
    Row,
    bucket,
    dense,
    dial_rows,
    read_rows,
)


def test_first_coercible_source_wins_and_bad_ones_are_skipped() -> None:
    """A row falls through sources that are absent or do not coerce."""
    rows = (Row("t", ("a", "b", "c"), number), Row("m", ("x",), text))
    assert read_rows({"a": "hot", "b": 0.5, "c": 0.9, "x": 3}, rows) == {"t": 0.5}


def test_bucket_groups_by_index_and_skips_malformed_keys() -> None:
    """`p.N.rest` groups under N; non-decimal, signed, huge or rest-less indexes are skipped."""
    items = [
        ("p.1.role", "b"),
        ("p.0.role", "a"),
        ("p.0.tool_calls.0.id", "c"),
        ("p.-1.role", "x"),
        ("p.².role", "x"),
        ("p.1234567.role", "x"),
        ("p.2", "x"),
        ("p.x.role", "x"),
        ("q.0.role", "x"),
    ]
    assert bucket(items, "p.") == {
        0: {"role": "a", "tool_calls.0.id": "c"},
        1: {"role": "b"},
    }


def test_dense_refuses_holes() -> None:
    """Indexes must run 0..n-1; a hole means part of the record was lost."""
    assert dense({1: {"r": 2}, 0: {"r": 1}}) == [{"r": 1}, {"r": 2}]
    assert dense({0: {}, 2: {}}) is None
    assert dense({1: {}}) is None
    assert dense({}) == []


@settings(max_examples=100, deadline=None)
@given(st.permutations(list(range(6))))
def test_bucketing_ignores_key_order(order: list[int]) -> None:
    """However the attributes are ordered, the rebuilt list is in index order."""
    items = [(f"m.{i}.role", f"r{i}") for i in order]
    assert dense(bucket(items, "m.")) == [{"role": f"r{i}"} for i in range(6)]


def test_every_dial_of_the_request_has_one_coercer() -> None:
    """The adapters read every dial but the Responses API's own settings, each with one coercer;
    the GenAI conventions' `gen_ai.request.<dial>` keys are the sampling dials but the count."""
    assert set(DIAL_TYPES) == {*SAMPLING_KEYS, *STEERING_KEYS}
    assert set(SAMPLING_TYPES) == set(SAMPLING_KEYS) - {"choice_count"}
    assert dial_rows({"seed": ("a",)}, {"seed": ("b",)}) == (Row("seed", ("a", "b"), integer),)
