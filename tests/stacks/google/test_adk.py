"""The Google ADK stack against the wire: a two-tool ``LlmAgent`` of 8 model calls with ADK's
built-in telemetry (its default format, GenAI content on its ``generate_content`` span) and
af_otel's processor, against the loopback Gemini server that logs every body."""

from __future__ import annotations

from pathlib import Path

import pytest

from af_otel import names
from af_otel.reader.verify import VerdictStatus
from tests.stacks import gb_envs
from tests.stacks.gb_check import GENAI_CONTENT, WIRE_OFF, Outcome, Stack, run_stack
from tests.stacks.gb_convert import from_gemini
from tests.stacks.google import server

AGENT = Path(__file__).resolve().parent / "adk_agent.py"
CALLS = 8


def _stack(name: str, wire: bool = True, **config: object) -> Stack:
    env_vars = GENAI_CONTENT | ({} if wire else WIRE_OFF)
    return Stack(name, gb_envs.GOOGLE_ADK, AGENT, server.server, from_gemini, config, env_vars)


ADK = _stack("google-adk")
ADK_NO_WIRE = _stack("google-adk-no-wire", wire=False)
ADK_NO_RUN = _stack("google-adk-no-run", run=False)

_OUTCOMES: dict[str, Outcome] = {}


def _outcome(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    if stack.name not in _OUTCOMES:
        _OUTCOMES[stack.name] = run_stack(stack, tmp_path_factory.mktemp(stack.name))
    return _OUTCOMES[stack.name]


@pytest.mark.instrumentation
def test_every_adk_call_is_verified_from_the_wire(tmp_path_factory: pytest.TempPathFactory) -> None:
    """ADK's generate_content span is current while google-genai sends: each call is one epoch
    minted from the body sent and verified, its view equal to the body on every field."""
    outcome = _outcome(ADK, tmp_path_factory)
    account = outcome.describe()
    assert len(outcome.requests) == len(outcome.epochs) == CALLS, account
    assert {e.source for e in outcome.epochs} == {names.SOURCE_WIRE}, account
    assert outcome.count(VerdictStatus.VERIFIED) == CALLS, account
    assert not [d for e in outcome.epochs for d in e.differences], account
    assert not outcome.false_defaults, account


@pytest.mark.instrumentation
def test_without_the_tap_adks_record_claims_nothing_it_lacks(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """With the tap off ADK's own record stands: one epoch per call, no overclaim, every
    difference named (its invented call ids left out, the function names it drops unrecorded)."""
    outcome = _outcome(ADK_NO_WIRE, tmp_path_factory)
    account = outcome.describe()
    assert len(outcome.requests) == len(outcome.epochs) == CALLS, account
    assert not outcome.overclaims, account
    assert not outcome.unnamed, account
    assert not outcome.false_defaults, account


@pytest.mark.instrumentation
def test_without_af_otel_run_every_adk_call_still_verifies(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Without ``af_otel.run`` each call is still one epoch from the wire, verified: the body
    carries the whole history, so nothing rests on the run's earlier calls."""
    outcome = _outcome(ADK_NO_RUN, tmp_path_factory)
    account = outcome.describe()
    assert len(outcome.requests) == len(outcome.epochs) == CALLS, account
    assert outcome.count(VerdictStatus.VERIFIED) == CALLS, account
