"""Hostile span attributes through every adapter: `adapt` and `is_llm_call` never raise, never fall
back on their catch-all, and whatever request they hand over mints without raising."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from af_otel import mint_receipt
from af_otel.semconv import NOTE_ADAPTER_ERROR, adapt, is_llm_call

from .hostile import cyclic, json_junk, junk, nested

FIXTURES = Path(__file__).resolve().parents[1] / "semconv" / "fixtures"
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _captured() -> list[tuple[str, str, dict[str, Any]]]:
    """Span attributes the real instrumentations wrote (captured by the semconv suite)."""
    spans = []
    for path in sorted(FIXTURES.glob("*.json")):
        for span in json.loads(path.read_text("utf-8"))["spans"]:
            spans.append((path.stem, span["name"], dict(span["attributes"])))
    return spans


CAPTURED = _captured()


def test_captured_spans_are_there() -> None:
    """Each convention contributes captured spans, and they adapt cleanly before any mutation."""
    conventions = {stem.split("--")[0] for stem, _, _ in CAPTURED}
    assert {"genai", "openinference", "openllmetry-new", "openllmetry-old"} <= conventions
    for stem, name, attributes in CAPTURED:
        adapted = adapt(attributes, name)
        assert NOTE_ADAPTER_ERROR not in adapted.notes, stem


def _text_forms(value: Any) -> st.SearchStrategy[Any]:
    """A hostile value, or JSON text of one (content attributes carry JSON strings), or cut JSON."""
    text = orjson.dumps(value).decode() if _jsonable(value) else "{"
    return st.sampled_from([value, text, text[: len(text) // 2], text + "]", "\ud800" + text])


def _jsonable(value: Any) -> bool:
    try:
        orjson.dumps(value)
    except TypeError:
        return False
    return True


def _check(attributes: dict[str, Any], name: str) -> None:
    assert isinstance(is_llm_call(attributes, name), bool)
    adapted = adapt(attributes, name)
    # The catch-all exists for inputs nobody foresaw; a fuzzer reaching it is a bug report.
    assert NOTE_ADAPTER_ERROR not in adapted.notes, adapted
    if adapted.request is None:
        assert adapted.absent_reason
    else:
        receipt = mint_receipt(adapted.request, run_id="run-fuzz", epoch=1)
        assert receipt.state in ("minted", "absent")


class TestMutatedCapturedSpans:
    @given(
        span=st.sampled_from(CAPTURED),
        index=st.integers(0, 1000),
        value=st.one_of(junk, json_junk.flatmap(_text_forms)),
        op=st.sampled_from(["replace", "replace", "delete", "truncate"]),
    )
    @SETTINGS
    def test_one_attribute_broken(
        self, span: tuple[str, str, dict[str, Any]], index: int, value: Any, op: str
    ) -> None:
        """A real captured span with one attribute replaced, deleted or cut short adapts without raising."""
        _, name, attributes = span
        attributes = dict(attributes)
        key = sorted(attributes)[index % len(attributes)]
        if op == "delete":
            del attributes[key]
        elif op == "truncate" and isinstance(attributes[key], str):
            attributes[key] = attributes[key][: index % (len(attributes[key]) + 1)]
        else:
            attributes[key] = value
        _check(attributes, name)

    @given(
        span=st.sampled_from(CAPTURED),
        extra=st.dictionaries(
            st.one_of(
                st.sampled_from(
                    [
                        "llm.input_messages.0.message.role",
                        "llm.input_messages.99999999999.message.content",
                        "llm.input_messages.-1.message.content",
                        "llm.input_messages.x.message.content",
                        "llm.input_messages.0.message.contents.0.message_content.type",
                        "llm.input_messages.0.message.tool_calls.0.tool_call.function.arguments",
                        "llm.tools.0.tool.json_schema",
                        "gen_ai.prompt.0.content",
                        "gen_ai.prompt.0.role",
                        "gen_ai.prompt.1000000.role",
                        "gen_ai.completion.0.content",
                        "llm.request.functions.0.parameters",
                        "gen_ai.input.messages",
                        "gen_ai.system_instructions",
                        "gen_ai.tool.definitions",
                        "gen_ai.operation.name",
                        "openinference.span.kind",
                        "llm.invocation_parameters",
                        "input.value",
                        "llm.request.type",
                    ]
                ),
                st.text(max_size=20),
            ),
            st.one_of(junk, json_junk.flatmap(_text_forms)),
            max_size=6,
        ),
    )
    @SETTINGS
    def test_hostile_keys_added(
        self, span: tuple[str, str, dict[str, Any]], extra: dict[str, Any]
    ) -> None:
        """Extra keys of every convention with hostile values (indexes out of range, wrong types) adapt."""
        _, name, attributes = span
        _check({**attributes, **extra}, name)

    @given(
        attributes=st.dictionaries(
            st.one_of(st.text(max_size=30), st.integers(), st.none()), junk, max_size=8
        ),
        name=st.one_of(st.text(max_size=20), junk),
    )
    @SETTINGS
    def test_arbitrary_mapping(self, attributes: dict[Any, Any], name: Any) -> None:
        """Any mapping, with any keys and a span name of any type, adapts without raising."""
        _check(attributes, name)


def _with(attributes: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    return {**attributes, key: value}


_GENAI = next(a for stem, _, a in CAPTURED if stem == "genai--weather--content")
_OPENINFERENCE = next(a for stem, _, a in CAPTURED if stem == "openinference--weather--content")
_MESSAGES = [
    {"role": "user", "parts": [{"type": "text", "content": f"m{i}"}]} for i in range(100_000)
]


@pytest.mark.parametrize(
    ("name", "attributes"),
    [
        ("genai-deep", _with(_GENAI, "gen_ai.input.messages", nested(50_000))),
        ("genai-deep-json", _with(_GENAI, "gen_ai.input.messages", "[" * 50_000 + "]" * 50_000)),
        ("genai-cycle", _with(_GENAI, "gen_ai.input.messages", [cyclic()])),
        (
            "genai-nan-json",
            _with(
                _GENAI,
                "gen_ai.input.messages",
                '[{"role":"user","parts":[{"type":"text","content":NaN}]}]',
            ),
        ),
        (
            "genai-dup-keys",
            _with(_GENAI, "gen_ai.input.messages", '[{"role":"user","role":"system","parts":[]}]'),
        ),
        ("genai-bytes", _with(_GENAI, "gen_ai.input.messages", b"\xff\xfe[]")),
        (
            "genai-100k-messages",
            _with(_GENAI, "gen_ai.input.messages", orjson.dumps(_MESSAGES).decode()),
        ),
        (
            "openinference-huge-index",
            _with(_OPENINFERENCE, "llm.input_messages.999999999999.message.role", "user"),
        ),
        (
            "openinference-100k-indexes",
            {
                **_OPENINFERENCE,
                **{f"llm.input_messages.{i}.message.content": "x" for i in range(5, 100_000)},
            },
        ),
    ],
)
def test_pathological_spans(name: str, attributes: dict[str, Any]) -> None:
    """Deep nesting, cycles, NaN, duplicate keys, bytes and 100,000 messages: adapt never raises."""
    _check(attributes, "chat")


def test_fifty_megabyte_attribute(caplog: pytest.LogCaptureFixture) -> None:
    """A 50 MB message in a GenAI span adapts and mints, and nothing is logged at warning or above."""
    big = "a" * (50 * 1024 * 1024)
    messages = json.dumps([{"role": "user", "parts": [{"type": "text", "content": big}]}])
    with caplog.at_level(logging.WARNING):
        adapted = adapt(_with(_GENAI, "gen_ai.input.messages", messages), "chat gpt-4o-mini")
    assert adapted.request is not None
    assert mint_receipt(adapted.request, run_id="r", epoch=1).state == "minted"
    assert not caplog.records
