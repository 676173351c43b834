"""Total coercers: exact built-in values out, ``None``/BAD for anything else, never an exception."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings

from af_otel.semconv.coerce import (
    BAD,
    choice_count,
    integer,
    is_placeholder,
    number,
    parse_json,
    plain,
    provider,
    string_list,
    text,
)

from .hostile import Raising, RaisingStr, hostile_value


class Sub(str):
    pass


def test_text_copies_subclasses_to_exact_str() -> None:
    """A str subclass comes back as an exact str (its overrides can no longer run)."""
    assert type(text(RaisingStr("chat"))) is str
    assert text(RaisingStr("chat")) == "chat"
    assert text(Sub("x")) == "x"
    assert [text(v) for v in (None, 1, b"x", Raising(), ["a"])] == [None] * 5


def test_numbers_refuse_bools_and_non_finite_values() -> None:
    """bool is not a number; NaN and infinities are not dials; integral floats are integers."""
    assert (integer(True), number(False)) == (None, None)
    assert (integer(256.0), integer(2.5), integer(float("inf"))) == (256, None, None)
    assert (number(0.2), number(3), number(float("nan")), number("1")) == (0.2, 3, None, None)


def test_choice_count_one_is_the_default() -> None:
    """A count of one is dropped; other counts are kept."""
    assert (choice_count(1), choice_count(3), choice_count("2")) == (None, 3, None)


def test_string_list_takes_arrays_or_one_string() -> None:
    """An OTel string array or a single string; a mixed array is refused whole."""
    assert string_list(("a", "b")) == ["a", "b"]
    assert string_list("END") == ["END"]
    assert string_list(["a", 1]) is None
    assert string_list(7) is None


def test_parse_json_is_strict() -> None:
    """Strict JSON only: no NaN, no infinities, no trailing garbage; non-strings are BAD."""
    assert parse_json('{"a":[1,2.5,null]}') == {"a": [1, 2.5, None]}
    for bad in ("NaN", "[Infinity]", "[1e400]", "{", "[1] x", "", b"[]", None, Raising()):
        assert parse_json(bad) is BAD


def test_parse_json_falls_back_for_escaped_lone_surrogates() -> None:
    """orjson refuses an escaped lone surrogate; the stdlib reads it, so the value is kept."""
    assert parse_json('["a\\udc00"]') == ["a\udc00"]


def test_plain_copies_structured_values_and_refuses_the_rest() -> None:
    """Tuples become lists, mappings dicts; bytes, sets, NaN, non-str keys and objects are BAD."""
    assert plain(({"a": (1, "x")},)) == [{"a": [1, "x"]}]
    for bad in (b"x", {1}, [math.nan], {1: "a"}, [Raising()], {"k": object()}):
        assert plain(bad) is BAD


@pytest.mark.parametrize(
    "value",
    ["__REDACTED__", "REDACTED", "[REDACTED]", "<redacted>", "(Redacted)", "***", "********",
     " __REDACTED__ ", "{REDACTED}", "redacted content"],
)  # fmt: skip
def test_placeholders_are_recognized(value: str) -> None:
    """The placeholders instrumentations and pipelines write where content was withheld."""
    assert is_placeholder(value)


@pytest.mark.parametrize(
    "value",
    ["This was REDACTED by legal", "**", "redact", "", "a***", "hidden", 0, None, Raising()],
)
def test_text_that_mentions_redaction_is_not_a_placeholder(value: object) -> None:
    """Only a whole value is a placeholder."""
    assert not is_placeholder(value)


def test_provider_names_normalize_to_semconv() -> None:
    """Instrumentations' provider spellings map to the GenAI well-known values."""
    cases = {
        "openai": "openai",
        "Azure": "azure.ai.openai",
        "AWS": "aws.bedrock",
        "mistralai": "mistral_ai",
        "xai": "x_ai",
        "vertexai": "gcp.vertex_ai",
        "google": "gcp.gen_ai",
        " Anthropic ": "anthropic",
        "OpenRouter": "openrouter",
    }
    assert {raw: provider(raw) for raw in cases} == cases
    assert (provider(""), provider(3)) == (None, None)


@settings(max_examples=200, deadline=None)
@given(hostile_value)
def test_coercers_are_total(value: Any) -> None:
    """No coercer raises, whatever it is handed."""
    for coerce in (text, integer, number, choice_count, string_list, is_placeholder, provider):
        coerce(value)
    parse_json(value)
    copied = plain(value)
    if copied is not BAD:
        json.dumps(copied, allow_nan=False)  # a real JSON value
