"""LlamaIndex against the wire: a two-tool ``FunctionAgent`` of 8 model calls on the real
``llama-index-core`` and ``llama-index-llms-openai`` under openinference-instrumentation-llama-index,
every epoch held against the body the loopback server logged (tests/stacks/soa/harness.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from af_otel import names
from af_otel.reader.verify import VerdictStatus
from tests.stacks.soa import envs
from tests.stacks.soa.harness import Stack, describe, run_stack

AGENT: Final = Path(__file__).resolve().parent / "agent.py"
CALLS: Final = 8

STACKS: Final = (
    Stack("llama-index-openinference", envs.LLAMA_INDEX, AGENT, {"streaming": True}),
    Stack(
        "llama-index-openinference-exporter",
        envs.LLAMA_INDEX,
        AGENT,
        {"streaming": True, "form": "exporter"},
    ),
    Stack("llama-index-openinference-unstreamed", envs.LLAMA_INDEX, AGENT, {"streaming": False}),
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
    # Streamed too: the span records its end before the request goes out, and its first token as
    # an event, which its window runs to (wire_source.window_of).
    assert {e.source for e in outcome.epochs} == {names.SOURCE_WIRE}, account
    assert outcome.count(VerdictStatus.VERIFIED) == CALLS, account
    # Without af_otel.run: the root `FunctionAgent.run` span of each of the 4 turns is of kind
    # CHAIN, not an agent span, and no session is set, so each turn's trace is a run (the trace
    # rule): 4 runs of 2 calls.
    assert sorted(outcome.runs.count(run) for run in set(outcome.runs)) == [2] * 4, account
