"""pydantic-ai against the wire: a two-tool agent of 8 model calls on the real
``pydantic-ai-slim[openai]`` with its native GenAI instrumentation, every epoch held against the
body the loopback server logged (tests/stacks/soa/harness.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from af_otel import names
from af_otel.reader.verify import VerdictStatus
from tests.stacks.soa import envs
from tests.stacks.soa.harness import Outcome, Stack, describe, run_stack

AGENT: Final = Path(__file__).resolve().parent / "agent.py"
CALLS: Final = 8

STACKS: Final = (
    Stack("pydantic-ai-chat", envs.PYDANTIC_AI, AGENT, {"api": "chat"}),
    Stack("pydantic-ai-responses", envs.PYDANTIC_AI, AGENT, {"api": "responses"}),
    # The record alone (tap off): pydantic-ai's own spans read as honestly as they allow, in
    # today's data format and in the oldest one still written.
    Stack(
        "pydantic-ai-chat-no-wire",
        envs.PYDANTIC_AI,
        AGENT,
        {"api": "chat"},
        {"AF_OTEL_WIRE": "off"},
    ),
    Stack(
        "pydantic-ai-responses-no-wire",
        envs.PYDANTIC_AI,
        AGENT,
        {"api": "responses"},
        {"AF_OTEL_WIRE": "off"},
    ),
    Stack(
        "pydantic-ai-chat-format-2-no-wire",
        envs.PYDANTIC_AI,
        AGENT,
        {"api": "chat", "version": 2},
        {"AF_OTEL_WIRE": "off"},
    ),
)


TWO_CONVERSATIONS: Final = Stack(
    "pydantic-ai-chat-two-conversations",
    envs.PYDANTIC_AI,
    AGENT,
    {"api": "chat", "conversations": 2},
)

_OUTCOMES: dict[str, Outcome] = {}


def _outcome(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    if stack.name not in _OUTCOMES:
        _OUTCOMES[stack.name] = run_stack(stack, tmp_path_factory.mktemp(stack.name))
    return _OUTCOMES[stack.name]


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", STACKS, ids=lambda s: s.name)
def test_one_truthful_epoch_per_model_call(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outcome = _outcome(stack, tmp_path_factory)
    account = describe(outcome)
    assert outcome.wire_requests == CALLS, account
    assert sorted(e.wire_seq for e in outcome.epochs) == list(range(1, CALLS + 1)), account
    assert not outcome.overclaims, account
    assert not outcome.unnamed, account
    assert all(e.minted for e in outcome.epochs), account
    if "AF_OTEL_WIRE" not in stack.env_vars:
        assert {e.source for e in outcome.epochs} == {names.SOURCE_WIRE}, account
        assert outcome.count(VerdictStatus.VERIFIED) == CALLS, account


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", [STACKS[0], STACKS[3], TWO_CONVERSATIONS], ids=lambda s: s.name)
def test_without_af_otel_run_each_conversation_is_one_run(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """pydantic-ai records its conversation (``gen_ai.conversation.id``, carried over by the
    message history): four ``run_sync`` turns, each its own trace, are one run named by it, with
    the tap on and off; two conversations, two runs of 4 calls each."""
    outcome = _outcome(stack, tmp_path_factory)
    account = describe(outcome)
    conversations = outcome.result["conversations"]
    assert len(set(conversations)) == stack.config.get("conversations", 1), account
    per = CALLS // len(conversations)
    assert list(outcome.runs) == [c for c in conversations for _ in range(per)], account
