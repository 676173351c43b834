"""LiteLLM against the wire: a two-tool agent loop of 8 model calls on the real ``litellm``
under its own OpenTelemetry callback and under OpenInference, every epoch held against the body
the loopback server logged (tests/stacks/soa/harness.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from af_otel import names
from af_otel.reader.verify import VerdictStatus
from tests.stacks.soa import envs
from tests.stacks.soa.harness import GENAI_CONTENT, Stack, describe, run_stack

AGENT: Final = Path(__file__).resolve().parent / "agent.py"
CALLS: Final = 8

STACKS: Final = (
    # The callback's default: `litellm_request` and its `raw_gen_ai_request` child.
    Stack(
        "litellm-callback",
        envs.LITELLM,
        AGENT,
        {"instrumentation": "callback"},
        {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
    ),
    # Opted into the latest GenAI conventions: one `chat` span a call, no raw child.
    Stack(
        "litellm-callback-semconv",
        envs.LITELLM,
        AGENT,
        {"instrumentation": "callback"},
        GENAI_CONTENT,
    ),
    # The exporter form: the spans written after the call claim their body at export.
    Stack(
        "litellm-callback-exporter",
        envs.LITELLM,
        AGENT,
        {"instrumentation": "callback", "form": "exporter"},
        {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
    ),
    # Content capture off: the callback's record holds no messages to vouch for a body, so its
    # spans claim none and keep their record (docs/processor.md, Late pairing).
    Stack(
        "litellm-callback-no-content",
        envs.LITELLM,
        AGENT,
        {"instrumentation": "callback"},
        {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "NO_CONTENT"},
    ),
    Stack("litellm-openinference", envs.LITELLM, AGENT, {"instrumentation": "openinference"}),
    # LiteLLM's own clients: its openai client (httpx2) and its httpx handler (Anthropic).
    Stack(
        "litellm-openinference-own-openai",
        envs.LITELLM,
        AGENT,
        {"instrumentation": "openinference", "route": "own-openai"},
    ),
    Stack(
        "litellm-openinference-own-anthropic",
        envs.LITELLM,
        AGENT,
        {"instrumentation": "openinference", "route": "own-anthropic"},
    ),
    # The record alone (tap off): OpenInference's spans of LiteLLM read as honestly as they allow.
    Stack(
        "litellm-openinference-no-wire",
        envs.LITELLM,
        AGENT,
        {"instrumentation": "openinference"},
        {"AF_OTEL_WIRE": "off"},
    ),
)

# The record alone: the tap is off, or the span has no content to claim its body by.
RECORD_ONLY: Final = frozenset({"litellm-openinference-no-wire", "litellm-callback-no-content"})


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.name)
def test_one_truthful_epoch_per_model_call(stack: Stack, tmp_path: Path) -> None:
    outcome = run_stack(stack, tmp_path)
    account = describe(outcome)
    assert outcome.wire_requests == CALLS, account
    assert sorted(e.wire_seq for e in outcome.epochs) == list(range(1, CALLS + 1)), account
    assert not outcome.overclaims, account
    assert not outcome.unnamed, account
    if stack.name in RECORD_ONLY:
        assert outcome.from_wire == 0, account
    else:
        # Every call from the wire, the callback's spans too: they are written after the call,
        # so their body waits by its trace until the span claims it (Late pairing).
        assert {e.source for e in outcome.epochs} == {names.SOURCE_WIRE}, account
        assert outcome.count(VerdictStatus.VERIFIED) == CALLS, account
    # Without af_otel.run: LiteLLM records no conversation and no agent span, and each
    # `litellm.completion` is a trace of its own, so each call is a run (the trace rule).
    assert len(set(outcome.runs)) == CALLS, account
    assert None not in outcome.runs, account
