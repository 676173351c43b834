"""A history handed to `llm_call` in the Chat Completions shape (an assistant's ``tool_calls``,
``tool`` messages with a ``tool_call_id``) is read, never dropped: it mints the receipt the same
history in the GenAI shape mints, and a receipt that changes with any tool call's name,
arguments or id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry import trace

from af_otel import names
from af_otel.errors import RequestShapeError
from af_otel.model import Request
from af_otel.processor import llm_call, run
from af_otel.receipts import mint_receipt
from af_otel.store import LocalStore
from tests.processor.conftest import make_pipeline
from tests.processor.helpers import af, llm_spans, stored

_WORD = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
_CALL = st.tuples(_WORD, _WORD, st.dictionaries(_WORD, st.integers(-9, 9), max_size=2))
_CALLS = st.lists(_CALL, min_size=1, max_size=3, unique_by=lambda c: c[0])


def _openai(calls: list[tuple[str, str, dict[str, int]]]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "on it",
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for i, n, a in calls
            ],
        },
        *({"role": "tool", "tool_call_id": i, "content": "ok"} for i, _, _ in calls),
    ]


def _genai(calls: list[tuple[str, str, dict[str, int]]]) -> list[dict[str, Any]]:
    parts = [{"type": "text", "content": "on it"}]
    parts += [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a in calls]
    answers = [
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": i, "response": "ok"}]}
        for i, _, _ in calls
    ]
    return [{"role": "user", "parts": ["go"]}, {"role": "assistant", "parts": parts}, *answers]


def stored_text(store: object, address: str) -> str:
    return json.dumps(stored(store, address))


def _digest(messages: list[dict[str, Any]]) -> str:
    request = {"model": "gpt-4o", "provider": "openai", "messages": messages}
    return mint_receipt(request, run_id="r", epoch=1).digest


@given(calls=_CALLS, which=st.integers(0, 2), field=st.sampled_from([0, 1, 2]))
def test_either_shape_mints_one_receipt_that_follows_each_tool_call(
    calls: list[tuple[str, str, dict[str, int]]], which: int, field: int
) -> None:
    """Both shapes give one digest; changing one call's id, name or arguments changes it."""
    assert Request.from_dict({"messages": _openai(calls)}) == Request.from_dict(
        {"messages": _genai(calls)}
    )
    before = _digest(_openai(calls))
    assert before == _digest(_genai(calls))
    changed = list(calls)
    call = list(changed[which % len(calls)])
    call[field] = {**call[2], "zz": 1} if field == 2 else f"{call[field]}x"
    changed[which % len(calls)] = (call[0], call[1], call[2])
    for shape in (_openai, _genai):
        assert _digest(shape(changed)) != before


def test_a_malformed_tool_call_is_an_error_not_a_drop() -> None:
    """A ``tool_calls`` entry with no function name is refused with where it is."""
    bad = {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {}}]}
    with pytest.raises(RequestShapeError, match=r"tool_calls"):
        Request.from_dict({"messages": [bad]})


def test_llm_call_receipts_openai_tool_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through `llm_call` on the real SDK, the OpenAI-shaped history mints what the GenAI-shaped
    one does (each in its own pipeline): the same messages chain and
    run base, which holds the tool call."""
    calls = [("call_1", "get_weather", {"city": "Paris"})]
    found = []
    for index, shape in enumerate((_openai, _genai)):
        pipeline = make_pipeline(LocalStore(tmp_path / str(index)))
        monkeypatch.setattr(trace, "get_tracer", pipeline.provider.get_tracer)
        with run("shape"), llm_call(model="m", provider="openai", messages=shape(calls)) as call:
            call.set_response("done")
        (span,) = llm_spans(pipeline.spans())
        assert af(span)[names.RECEIPT_STATE] == names.STATE_MINTED
        found.append((af(span)[names.RECEIPT_MESSAGES_CHAIN], af(span)[names.RUN_BASE]))
        pipeline.provider.shutdown()
    assert found[0] == found[1]
    # the base the history went to holds the call as read, not a text-only assistant turn
    (_, base) = found[0]
    assert _genai(calls)[1]["parts"][1]["name"] in stored_text(pipeline.store, base)
