"""The same OpenAI request through four real instrumentations adapts to the same request (or differs
exactly where the instrumentation records less), from saved captures and from live subprocesses."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from af_otel import names
from af_otel.canonical import canonical_json
from af_otel.model import Request, fields
from af_otel.receipts import mint_receipt
from af_otel.semconv import NOTE_OUTPUT_TYPE, Adapted, adapt, is_llm_call, ledger

from . import expected
from .envs import CAPTURES, SOURCES, Capture, capture, load_fixture

CONVENTION = {
    "genai": "genai",
    "genai-anthropic": "genai",
    "openinference": "openinference",
    "openllmetry-new": "openllmetry",
    "openllmetry-old": "openllmetry-legacy",
}
# What each content-off setting must read as, and a content key that must still be reported.
WITHHELD = {
    ("genai", "no-content"): (names.REASON_NOT_CAPTURED, ()),
    ("genai", "upload"): (names.REASON_EXTERNAL, ()),
    # OPENINFERENCE_HIDE_INPUT_MESSAGES drops llm.input_messages.* but keeps the raw request in
    # input.value: content is still on the span, and a stripper must know it.
    ("openinference", "hide-input-messages"): (names.REASON_NOT_CAPTURED, ("input.value",)),
    ("openinference", "hide-input-text"): (
        names.REASON_REDACTED,
        ("llm.input_messages.0.message.content",),
    ),
    ("openllmetry-new", "no-content"): (names.REASON_NOT_CAPTURED, ()),
    ("openllmetry-old", "no-content"): (names.REASON_NOT_CAPTURED, ()),
}


def _spec(source: str, scenario: str, variant: str = "content") -> Capture:
    return next(
        spec
        for spec in CAPTURES
        if (spec.source, spec.scenario, spec.variant) == (source, scenario, variant)
    )


def _llm_call(record: dict[str, Any]) -> dict[str, Any]:
    calls = [span for span in record["spans"] if is_llm_call(span["attributes"], span["name"])]
    assert len(calls) == 1, [span["name"] for span in record["spans"]]
    return calls[0]


def _llm_span(record: dict[str, Any]) -> Adapted:
    span = _llm_call(record)
    return adapt(span["attributes"], span["name"])


def _normalized(data: dict[str, Any]) -> Request:
    return Request.from_dict(data)


def check(spec: Capture, record: dict[str, Any]) -> Adapted:
    """Assert what ``spec``'s span must adapt to; shared by the fixture and the live tests."""
    span = _llm_call(record)
    adapted = adapt(span["attributes"], span["name"])
    assert adapted.convention == CONVENTION[spec.source]
    if spec.variant != "content":
        reason, keys = WITHHELD[(spec.source, spec.variant)]
        assert (adapted.request, adapted.absent_reason) == (None, reason)
        assert set(keys) <= set(adapted.content_keys)
        return adapted
    assert adapted.absent_reason is None
    assert adapted.request is not None
    assert adapted.notes == ()  # each records the request model
    assert "gen_ai.output.messages" in adapted.content_keys or any(
        key.startswith(("gen_ai.completion.", "llm.output_messages."))
        for key in adapted.content_keys
    )
    got = _normalized(dict(adapted.request))
    unrecorded = ledger.unrecorded(got, span["scope"], adapted.convention, adapted.notes)
    if spec.source == "genai-anthropic":
        assert got == _normalized(expected.anthropic_weather())
    elif spec.scenario == "weather":
        assert got == _normalized(expected.weather())
    elif spec.scenario == "dials":
        missing = expected.DIALS_NOT_RECORDED[spec.source]
        dials = {key: value for key, value in expected.ALL_DIALS.items() if key not in missing}
        assert dict(got.params) == dials
        assert got == _normalized({**expected.weather(), "params": dials})
        assert missing <= set(unrecorded)
    else:
        # util-genai writes an assistant's tool calls before its text; the others keep the
        # Chat Completions field order. OpenLLMetry drops the message name.
        keeps_name = not spec.source.startswith("openllmetry")
        want = expected.mixed(tool_call_first=spec.source == "genai", user_name=keeps_name)
        assert got == _normalized(want)
        assert (fields.MESSAGE_NAME in unrecorded) == (not keeps_name)
    return adapted


@pytest.mark.parametrize("spec", CAPTURES, ids=lambda spec: spec.id)
def test_saved_capture_adapts_as_its_instrumentation_recorded_it(spec: Capture) -> None:
    """Each saved span adapts to the request sent, minus exactly what its instrumentation drops."""
    check(spec, load_fixture(spec))


@pytest.mark.parametrize("scenario", ["weather", "dials", "mixed"])
def test_saved_captures_come_from_one_wire_request(scenario: str) -> None:
    """Every instrumentation saw the same request body on the wire, so differences are theirs."""
    bodies = [load_fixture(_spec(source, scenario))["request_sent"] for source in SOURCES]
    assert all(body == bodies[0] for body in bodies)


def test_weather_mints_one_receipt_whichever_instrumentation_recorded_it() -> None:
    """The weather call mints the same system hash, message chain, tool hashes and digest from all
    four instrumentations' spans."""
    receipts = []
    for source in SOURCES:
        adapted = _llm_span(load_fixture(_spec(source, "weather")))
        assert adapted.request is not None
        receipts.append(mint_receipt(adapted.request, run_id="run-1", epoch=1))
    assert all(receipt.minted for receipt in receipts)
    fingerprints = {
        (r.system_hash, r.messages_chain, r.tools_hashes, r.params, r.digest) for r in receipts
    }
    assert len(fingerprints) == 1


def test_dials_differ_between_instrumentations_only_in_params() -> None:
    """With every dial set, the receipts agree on system, messages and tools and differ in params."""
    receipts = {}
    for source in SOURCES:
        adapted = _llm_span(load_fixture(_spec(source, "dials")))
        assert adapted.request is not None
        receipts[source] = mint_receipt(adapted.request, run_id="run-1", epoch=1)
    assert len({(r.system_hash, r.messages_chain, r.tools_hashes) for r in receipts.values()}) == 1
    assert receipts["openllmetry-new"].params == receipts["openllmetry-old"].params
    assert len({r.params for r in receipts.values()}) == 3
    assert receipts["openinference"].tools_forced == "get_weather"
    assert receipts["genai"].tools_forced is None


def test_system_slot_follows_the_api_not_the_instrumentation() -> None:
    """Anthropic's separate system prompt lands in `system`; OpenAI's system message stays a
    message. The tool schema is the same either way, so its hash is too."""
    openai_call = _llm_span(load_fixture(_spec("genai", "weather")))
    anthropic_call = _llm_span(load_fixture(_spec("genai-anthropic", "weather")))
    assert openai_call.request is not None
    assert anthropic_call.request is not None
    assert openai_call.request["system"] == []
    assert anthropic_call.request["system"] == [{"type": "text", "content": expected.SYSTEM_PROMPT}]
    a = mint_receipt(openai_call.request, run_id="run-1", epoch=1)
    b = mint_receipt(anthropic_call.request, run_id="run-1", epoch=1)
    assert a.tools_hashes == b.tools_hashes
    assert a.system_hash != b.system_hash
    assert a.messages_chain != b.messages_chain


@pytest.mark.instrumentation
@pytest.mark.parametrize("spec", CAPTURES, ids=lambda spec: spec.id)
def test_live_capture_adapts_as_its_instrumentation_records_it(
    spec: Capture, tmp_path: Path
) -> None:
    """The real instrumentation, driving the real openai client now, gives the same result."""
    record = capture(spec, tmp_path)
    check(spec, record)
    if spec.variant == "upload":
        # The refs point at files holding the content: put back in place of the refs, it
        # adapts to the request sent (what a reader with access to that storage could do).
        attributes = dict(_llm_call(record)["attributes"])
        for key in ("gen_ai.input.messages", "gen_ai.tool.definitions"):
            ref = str(attributes.pop(key + "_ref"))
            attributes[key] = Path(urlparse(ref).path).read_text(encoding="utf-8")
        restored = adapt(attributes)
        assert restored.request is not None
        assert _normalized(dict(restored.request)) == _normalized(expected.weather())


def _recorded(source: str, scenario: str) -> tuple[Request, frozenset[str], tuple[str, ...]]:
    """The request a saved capture adapts to, the fields its instrumentation records (ledger plus
    what the span shows), and the fields it names as unrecorded."""
    span = _llm_call(load_fixture(_spec(source, scenario)))
    adapted = adapt(span["attributes"], span["name"])
    assert adapted.request is not None
    request = Request.from_dict(adapted.request)
    entry = ledger.entry_for(span["scope"], adapted.convention)
    assert entry is not None, span["scope"]
    recorded = entry.recorded | ledger.written(request)
    return request, recorded, ledger.unrecorded(request, span["scope"], adapted.convention)


@pytest.mark.parametrize("scenario", ["weather", "dials"])
def test_fields_both_instrumentations_record_mint_one_hash(scenario: str) -> None:
    """For every pair of instrumentations, every field both record fingerprints alike (the params
    each records, hashed on their own), and each one names what it does not record as unrecorded."""
    seen = {source: _recorded(source, scenario) for source in SOURCES}
    for source, (request, recorded, unrecorded) in seen.items():
        sent = set(expected.ALL_DIALS) if scenario == "dials" else {"temperature", "max_tokens"}
        assert sent - recorded <= set(unrecorded), source
        assert not set(unrecorded) & recorded
        for other, (theirs, their_recorded, _) in seen.items():
            both = recorded & their_recorded
            mine = {k: v for k, v in request.params.items() if k in both}
            yours = {k: v for k, v in theirs.params.items() if k in both}
            assert canonical_json(mine) == canonical_json(yours), (source, other)
            if fields.TOOLS in both:
                assert request.tools == theirs.tools


def test_the_docs_table_is_the_ledger() -> None:
    """docs/instrumentations.md's ledger table says yes exactly where the ledger records a field,
    and "if absent" where it records only that the request left the field out."""
    text = (Path(__file__).parents[2] / "docs" / "instrumentations.md").read_text(encoding="utf-8")
    entries = [*ledger.LEDGER, ledger.EXPLICIT_API]
    header = "| field | " + " | ".join(f"`{e.label}`" for e in entries) + " |"
    assert header in text

    def cell(entry: ledger.Entry, name: str) -> str:
        if name in entry.recorded:
            return "yes"
        return "if absent" if name in dict(entry.marked) else "no"

    for name in dict.fromkeys(fields.FIELDS):
        cells = [cell(e, name) for e in entries]
        assert f"| `{name}` | " + " | ".join(cells) + " |" in text, name


def test_output_type_marks_a_response_format_only_genai_openai_records_as_absent() -> None:
    """genai-openai writes gen_ai.output.type whenever a response_format is set: without it the
    span shows none was set; with it, the format is unrecorded. openai-v2 is not trusted so."""
    span = _llm_call(load_fixture(_spec("genai", "weather")))
    scope = span["scope"]
    plain = adapt(span["attributes"], span["name"])
    marked = adapt({**span["attributes"], "gen_ai.output.type": "json"}, span["name"])
    assert NOTE_OUTPUT_TYPE not in plain.notes
    assert NOTE_OUTPUT_TYPE in marked.notes
    for adapted, want in ((plain, False), (marked, True)):
        assert adapted.request is not None
        request = Request.from_dict(adapted.request)
        missing = ledger.unrecorded(request, scope, adapted.convention, adapted.notes)
        assert ("response_format" in missing) is want
        other = ledger.unrecorded(
            request, "opentelemetry.instrumentation.openai_v2", "genai", adapted.notes
        )
        assert "response_format" in other
