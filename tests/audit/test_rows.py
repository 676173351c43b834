"""Rows of the exporter's table read back as span records: the af_otel attributes get back the
types the exporter's ``AsString`` dropped, everything else stays the text the table holds, and a
span read from ClickHouse is the span read from the OTLP file it was exported from."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from af_otel import names
from af_otel.reader.sources import ARRAY_KEYS, read_spans
from af_otel.reader.sources.clickhouse_rows import (
    BOOL_KEYS,
    COLUMNS,
    INT_KEYS,
    JSON_COLUMNS,
    flat_json,
    span_from_json_row,
    span_from_row,
    typed_attributes,
)
from af_otel.reader.sources.decoders import Problem
from tests.audit.conftest import Loaded
from tests.audit.exporter import as_string, go_float, go_json

INT64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)))


@given(key=st.sampled_from(sorted(INT_KEYS)), number=INT64)
def test_an_int_key_reads_back_as_its_int(key: str, number: int) -> None:
    """An af_otel int attribute the exporter wrote in decimal is that int again."""
    written = as_string({"intValue": str(number)})
    assert typed_attributes({key: written}, "attrs") == {key: number}


@given(key=st.sampled_from(sorted(ARRAY_KEYS)), items=st.lists(TEXT, max_size=6))
def test_a_string_array_key_reads_back_as_its_tuple(key: str, items: list[str]) -> None:
    """A string array written as Go's JSON (HTML characters escaped) is the tuple again."""
    written = as_string({"arrayValue": {"values": [{"stringValue": s} for s in items]}})
    assert typed_attributes({key: written}, "attrs") == {key: tuple(items)}


@given(flag=st.booleans())
def test_a_bool_key_reads_back_as_its_bool(flag: bool) -> None:
    written = as_string({"boolValue": flag})
    assert typed_attributes(dict.fromkeys(BOOL_KEYS, written), "attrs") == dict.fromkeys(
        BOOL_KEYS, flag
    )


@given(key=st.sampled_from(["gen_ai.usage.input_tokens", "app.flag", "app.list"]), text=TEXT)
def test_any_other_key_stays_the_text_the_table_holds(key: str, text: str) -> None:
    """No reader rule depends on another attribute's type: "3", "true", "[1]" stay text."""
    assert typed_attributes({key: text}, "attrs") == {key: text}


@pytest.mark.parametrize("text", ["x", "", "3.5", "[1,", "99999999999999999999999"])
def test_a_value_not_of_its_key_s_type_stays_text(text: str) -> None:
    """An af.epoch that is no integer is left as written, for the reader to judge."""
    assert typed_attributes({names.EPOCH: text}, "attrs") == {names.EPOCH: text}


@pytest.mark.parametrize(
    ("number", "go"),
    [(0.2, "0.2"), (3.0, "3"), (1e21, "1e+21"), (1e-7, "1e-7"), (123456789.0, "123456789")],
)
def test_the_fixture_writer_formats_doubles_as_pdata(number: float, go: str) -> None:
    """The fixture writer's doubles are pdata's (Go's ES6-style formatting)."""
    assert go_float(number) == go


def test_a_row_with_uneven_event_arrays_is_refused() -> None:
    row: list[Any] = ["run", 1, 1, "a" * 32, "b" * 16, "", "chat", "Client", {}, "", {}, "Ok"]
    with pytest.raises(Problem, match="Events"):
        span_from_row([*row, [1, 2], ["af.commit"], [{}]], "row")


def _text(value: Any) -> str:
    """A typed attribute value as the exporter writes it."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    return go_json(list(value))


def test_a_span_from_clickhouse_is_the_span_from_the_file(loaded: Loaded, clickhouse: Any) -> None:
    """Every LLM span of the day reads the same from the table as from the OTLP file: ids, times,
    kind, status, scope, events and every af_otel attribute; other attributes as their text."""
    from_file = {(s.trace_id, s.span_id): s for s in read_spans(str(loaded.day.traces))}
    rows = clickhouse.query(f"SELECT {', '.join(COLUMNS)} FROM otel_traces").result_rows
    assert len(rows) == loaded.rows == len(from_file)
    for row in rows:
        got = span_from_row(row, "row")
        want = from_file[(got.trace_id, got.span_id)]
        assert got == type(got)(
            **{
                **{f: getattr(want, f) for f in want.__slots__ if not f.startswith("__")},
                "attributes": got.attributes,
                "resource": got.resource,
            }
        )
        assert got.service_name == want.service_name
        for key, value in want.attributes.items():
            expected = (
                value if key.startswith("af.") or isinstance(value, str) else got.attributes[key]
            )
            assert got.attributes[key] == expected, key
        assert set(got.attributes) == set(want.attributes)


def test_a_span_from_the_json_variant_is_the_span_from_the_file(
    loaded: Loaded, clickhouse: Any
) -> None:
    """The JSON variant keeps the types: every span reads back equal to the file's, attributes,
    resource and events included (dotted keys rebuilt from ClickHouse's paths)."""
    from_file = {(s.trace_id, s.span_id): s for s in read_spans(str(loaded.day.traces))}
    rows = clickhouse.query(
        f"SELECT {', '.join(JSON_COLUMNS)} FROM jsonday.otel_traces"
    ).result_rows
    assert len(rows) == len(from_file)
    for row in rows:
        got = span_from_json_row(row, "row")
        assert got == from_file[(got.trace_id, got.span_id)]


def test_flat_json_keeps_a_name_that_is_both_a_value_and_a_prefix() -> None:
    """``af.epoch`` and ``af.epoch.parent`` share a path: both come back."""
    text = '{"af":{"epoch":3,"epoch":{"lane":"ab","parent":2}},"x":[1,null]}'
    assert flat_json(text, "attrs") == {
        "af.epoch": 3,
        "af.epoch.lane": "ab",
        "af.epoch.parent": 2,
        "x": [1, None],
    }
