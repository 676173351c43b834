"""The Google ADK stack against the wire: a two-tool ``LlmAgent`` of 8 model calls with ADK's
built-in telemetry (its default format, GenAI content on its ``generate_content`` span) and
af_otel's processor, against the loopback Gemini server that logs every body."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from af_otel import names
from af_otel.reader.verify import VerdictStatus
from tests.stacks import gb_envs
from tests.stacks.gb_check import (
    GENAI_CONTENT,
    WIRE_OFF,
    Outcomes,
    Stack,
    assert_operation_guessed,
    assert_record_stands,
    assert_verified_from_wire,
)
from tests.stacks.gb_convert import from_gemini
from tests.stacks.google import server

AGENT = Path(__file__).resolve().parent / "adk_agent.py"
CALLS = 8


# ADK's legacy telemetry format: a `call_llm` span around each `generate_content` span.
LEGACY: Final = {"ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN": "1"}


def _stack(
    name: str, wire: bool = True, legacy: bool = False, content: bool = True, **config: object
) -> Stack:
    env_vars = (
        (GENAI_CONTENT if content else {}) | ({} if wire else WIRE_OFF) | (LEGACY if legacy else {})
    )
    return Stack(name, gb_envs.GOOGLE_ADK, AGENT, server.server, from_gemini, config, env_vars)


ADK = _stack("google-adk")
ADK_NO_WIRE = _stack("google-adk-no-wire", wire=False)
ADK_NO_RUN = _stack("google-adk-no-run", run=False)
ADK_TWO_SESSIONS = _stack("google-adk-two-sessions", run=False, sessions=2)
ADK_LEGACY = _stack("google-adk-legacy", legacy=True, run=False)
ADK_LEGACY_NO_WIRE = _stack("google-adk-legacy-no-wire", wire=False, legacy=True, run=False)
# The legacy format's own semconv (no OTEL_SEMCONV_STABILITY_OPT_IN): content in log events only.
ADK_LEGACY_BARE_NO_WIRE = _stack(
    "google-adk-legacy-bare-no-wire", wire=False, legacy=True, content=False, run=False
)

# A router agent whose one tool is ADK's transfer_to_agent, to the weather agent.
ADK_HANDOFF = _stack("google-adk-handoff", run=False, handoff=True)

_outcome = Outcomes()


@pytest.mark.instrumentation
def test_every_adk_call_is_verified_from_the_wire(tmp_path_factory: pytest.TempPathFactory) -> None:
    """ADK's generate_content span is current while google-genai sends: each call is one epoch
    minted from the body sent and verified, its view equal to the body on every field."""
    outcome = _outcome(ADK, tmp_path_factory)
    assert_verified_from_wire(outcome, CALLS)
    assert_operation_guessed(outcome)


@pytest.mark.instrumentation
def test_without_the_tap_adks_record_claims_nothing_it_lacks(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """With the tap off ADK's own record stands: one epoch per call, no overclaim, every
    difference named (its invented call ids left out, the function names it drops unrecorded)."""
    outcome = _outcome(ADK_NO_WIRE, tmp_path_factory)
    account = outcome.describe()
    assert_record_stands(outcome, CALLS)
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


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", [ADK_NO_RUN, ADK_TWO_SESSIONS, ADK_LEGACY], ids=lambda s: s.name)
def test_without_af_otel_run_each_adk_session_is_one_run(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Without ``af_otel.run`` the run is ADK's session (``gen_ai.conversation.id``): one session's
    four turns, four traces, read as one run; two sessions in one process as two, each its own."""
    outcome = _outcome(stack, tmp_path_factory)
    account = outcome.describe()
    sessions = outcome.result["sessions"]
    assert len(sessions) == stack.config.get("sessions", 1), account
    assert outcome.runs == sessions, account
    per = CALLS // len(sessions)
    assert [e.run for e in outcome.epochs] == [s for s in sessions for _ in range(per)], account


@pytest.mark.instrumentation
def test_adks_legacy_call_llm_span_is_no_second_epoch(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """ADK's legacy format wraps each model call's ``generate_content`` span in a ``call_llm``
    span holding ADK's own copy of the request: one call, so one epoch (the inner span, current
    while google-genai sends), minted from the wire and verified; ``call_llm`` is no call."""
    outcome = _outcome(ADK_LEGACY, tmp_path_factory)
    account = outcome.describe()
    assert outcome.span_names.count("call_llm") == CALLS, account
    assert len(outcome.requests) == len(outcome.epochs) == CALLS, account
    assert {e.source for e in outcome.epochs} == {names.SOURCE_WIRE}, account
    assert outcome.count(VerdictStatus.VERIFIED) == CALLS, account
    assert not [d for e in outcome.epochs for d in e.differences], account


@pytest.mark.instrumentation
@pytest.mark.parametrize(
    "stack", [ADK_LEGACY_NO_WIRE, ADK_LEGACY_BARE_NO_WIRE], ids=lambda s: s.name
)
def test_without_the_tap_adks_legacy_record_claims_nothing_it_lacks(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With the tap off the legacy format's record stands: one epoch per call, no overclaim,
    every difference named. Its generate_content span names no provider, yet is ADK's (the
    invented ids left out, the function names it drops unrecorded); without the GenAI content
    opt-in it holds no conversation, and that is named."""
    outcome = _outcome(stack, tmp_path_factory)
    account = outcome.describe()
    assert outcome.span_names.count("call_llm") == CALLS, account
    assert len(outcome.requests) == len(outcome.epochs) == CALLS, account
    assert not outcome.overclaims, account
    assert not outcome.unnamed, account
    assert not outcome.false_defaults, account


@pytest.mark.instrumentation
def test_an_adk_transfer_is_a_handoff_in_the_agent_tree(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """ADK records a transfer as its ``transfer_to_agent`` tool run and the next call under the
    other agent's span in the same invocation: the router's call ran the transfer, the weather
    agent's next call is handed off from the router, and later turns (which ADK gives straight
    to the weather agent, each its own trace) are none. 9 calls, each verified from the wire."""
    outcome = _outcome(ADK_HANDOFF, tmp_path_factory)
    account = outcome.describe()
    assert len(outcome.requests) == len(outcome.epochs) == CALLS + 1, account
    assert outcome.count(VerdictStatus.VERIFIED) == CALLS + 1, account
    assert len(outcome.runs) == 1, account
    places = [(e.agent, e.handoff_from, e.tools_run) for e in outcome.epochs]
    assert places[:2] == [
        ("router", None, ("transfer_to_agent",)),
        ("weather_agent", "router", ("get_weather",)),
    ], places
    assert {(agent, handed) for agent, handed, _ in places[2:]} == {("weather_agent", None)}, places
