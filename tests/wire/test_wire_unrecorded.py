"""A call minted from the wire needs no list of the fields its record leaves off (the body holds
every field): the Responses `unrecorded` pass is made only for a call that falls back to its
record, and a call's gaps are the same either way (docs/processor.md, When a call is taken from
the wire). Real SDK spans, the processor, a real httpx client (its MockTransport answers), the
tap; the record is genai-openai's of a Responses call, which keeps neither ``tool_choice`` nor
``parallel_tool_calls``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from af_otel import names
from af_otel.processor import engine as engine_module
from af_otel.semconv import call as call_module
from af_otel.semconv import responses
from af_otel.store import LocalStore
from af_otel.wire import uninstall
from tests.builders import make_pipeline, start_attributes, user
from tests.wire.test_tap import RESPONSES_BODY

URL = "https://api.openai.com/v1/responses"
# What the answer of a call says; the gaps and ledger the call's span carries.
SAID = (
    names.RECEIPT_SOURCE,
    names.RECEIPT_STATE,
    names.RECEIPT_UNRECORDED,
    names.GAPS,
    names.HELD_HISTORY,
    names.RECORD_DIFFERS,
)


def _record(model: str) -> dict[str, Any]:
    """genai-openai's record of a Responses call with a tool (capture on)."""
    tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    return start_attributes(model, provider="openai") | {
        "openai.api.type": "responses",
        "gen_ai.input.messages": json.dumps([user("Weather in Oslo?")]),
        "gen_ai.tool.definitions": json.dumps([tool]),
    }


def _said(tmp_path: Path, *, wire: bool, sent: bool = True) -> dict[str, Any]:
    """One Responses call sent under its current span (``sent=False``: by a client the tap does
    not see); what its enriched span says."""
    pipeline = make_pipeline(LocalStore(tmp_path / "store"), wire=wire)
    try:
        answer = httpx.Response(200, json={"id": "resp_1", "output": []})
        with pipeline.tracer.start_as_current_span(
            "responses", attributes=_record(RESPONSES_BODY["model"])
        ):
            if sent:
                with httpx.Client(transport=httpx.MockTransport(lambda _: answer)) as client:
                    client.post(URL, content=orjson.dumps(RESPONSES_BODY))
        (span,) = pipeline.spans()
        return {key: span.attributes.get(key) for key in SAID}
    finally:
        pipeline.provider.shutdown()
        uninstall()


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the Responses `unrecorded` passes made (the real function runs)."""
    made: list[str] = []
    real = responses.unrecorded

    def counted(*args: Any, **kwargs: Any) -> tuple[str, ...]:
        made.append("unrecorded")
        return real(*args, **kwargs)

    monkeypatch.setattr(responses, "unrecorded", counted)
    return made


def test_a_wire_call_makes_no_responses_unrecorded_pass(tmp_path: Path, passes: list[str]) -> None:
    """Minted from the body: the pass is not made, and no field is named unrecorded."""
    said = _said(tmp_path, wire=True)
    assert said[names.RECEIPT_SOURCE] == names.SOURCE_WIRE
    assert passes == []
    assert not said[names.RECEIPT_UNRECORDED]


@pytest.mark.parametrize("wire", [True, False], ids=["tap-on-unseen", "tap-off"])
def test_a_call_that_falls_back_to_its_record_still_names_what_it_leaves_off(
    tmp_path: Path, passes: list[str], wire: bool
) -> None:
    """With the tap on but the body not seen (a client it does not cover), or the tap off:
    minted from the record, the pass is made once, and the Responses fields genai does not
    record are named."""
    said = _said(tmp_path, wire=wire, sent=not wire)
    assert said[names.RECEIPT_SOURCE] == names.SOURCE_INSTRUMENTATION
    assert passes == ["unrecorded"]
    assert {"tool_choice", "parallel_tool_calls"} <= set(said[names.RECEIPT_UNRECORDED] or ())


@pytest.mark.parametrize("sent", [True, False], ids=["wire", "record"])
def test_the_gaps_are_those_the_pass_made_before_it_was_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sent: bool
) -> None:
    """The same call read as before (the record's passes all made up front) and as now: its
    source, ledger, gaps, held history and record differences are the same."""
    now = _said(tmp_path / "now", wire=True, sent=sent)

    def up_front(*args: Any, **kwargs: Any) -> Any:
        return call_module.read_call(*args, **(kwargs | {"held": True}))

    monkeypatch.setattr(engine_module, "read_call", up_front)
    before = _said(tmp_path / "before", wire=True, sent=sent)
    assert now == before
    assert now[names.GAPS]  # a call with gaps to compare (cache-transform at the least)
