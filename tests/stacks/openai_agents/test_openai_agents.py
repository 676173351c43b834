"""The OpenAI Agents SDK against the wire: a two-tool agent of 8 model calls on the real
``openai-agents`` under each of its instrumentations, every epoch held against the body the
loopback server logged (tests/stacks/soa/harness.py)."""

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
    # genai-openai-agents writes agent and tool spans; genai-openai's LLM span is current while
    # the client sends, so the wire tap reads each call's body.
    Stack(
        "openai-agents-genai",
        envs.OPENAI_AGENTS,
        AGENT,
        {"instrumentation": "genai", "api": "responses"},
        GENAI_CONTENT,
    ),
    Stack(
        "openai-agents-genai-chat",
        envs.OPENAI_AGENTS,
        AGENT,
        {"instrumentation": "genai", "api": "chat"},
        GENAI_CONTENT,
    ),
    Stack(
        "openai-agents-openinference",
        envs.OPENAI_AGENTS,
        AGENT,
        {"instrumentation": "openinference", "api": "responses"},
    ),
    # The record alone (tap off): OpenInference builds its LLM spans from the SDK's response
    # span data, whose tools, instructions and settings are the response's echo.
    Stack(
        "openai-agents-openinference-no-wire",
        envs.OPENAI_AGENTS,
        AGENT,
        {"instrumentation": "openinference", "api": "responses"},
        {"AF_OTEL_WIRE": "off"},
    ),
    Stack(
        "openai-agents-genai-no-wire",
        envs.OPENAI_AGENTS,
        AGENT,
        {"instrumentation": "genai", "api": "responses"},
        {**GENAI_CONTENT, "AF_OTEL_WIRE": "off"},
    ),
)


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.name)
def test_one_truthful_epoch_per_model_call(stack: Stack, tmp_path: Path) -> None:
    outcome = run_stack(stack, tmp_path)
    account = describe(outcome)
    assert outcome.wire_requests == CALLS, account
    assert sorted(e.wire_seq for e in outcome.epochs) == list(range(1, CALLS + 1)), account
    assert not outcome.overclaims, account
    assert not outcome.unnamed, account
    assert all(e.minted for e in outcome.epochs), account
    if {e.source for e in outcome.epochs} == {names.SOURCE_WIRE}:
        assert outcome.count(VerdictStatus.VERIFIED) == CALLS, account
