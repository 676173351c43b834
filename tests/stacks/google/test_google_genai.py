"""The Google GenAI stack against the wire: a two-tool agent of 8 model calls on the real
google-genai client under the real opentelemetry-instrumentation-google-genai, with af_otel's
processor, against a loopback Gemini server that logs every body. Each epoch's served view is
held to its logged body field by field."""

from __future__ import annotations

from pathlib import Path

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

AGENT = Path(__file__).resolve().parent / "genai_agent.py"
CALLS = 8


def _stack(name: str, env: gb_envs.Env, wire: bool = True, **config: object) -> Stack:
    env_vars = GENAI_CONTENT | ({} if wire else WIRE_OFF)
    return Stack(name, env, AGENT, server.server, from_gemini, config, env_vars)


GENAI_2 = _stack("google-genai-2", gb_envs.GOOGLE_GENAI)
GENAI_2_NO_WIRE = _stack("google-genai-2-no-wire", gb_envs.GOOGLE_GENAI, wire=False)
GENAI_3 = _stack("google-genai-3", gb_envs.GOOGLE_GENAI_3)
GENAI_3_FORCED = _stack(
    "google-genai-3-skip-dep-check", gb_envs.GOOGLE_GENAI_3, skip_dep_check=True
)
GENAI_3_FORCED_NO_WIRE = _stack(
    "google-genai-3-skip-dep-check-no-wire", gb_envs.GOOGLE_GENAI_3, wire=False, skip_dep_check=True
)

# No af_otel.run: the calls in a plain span of the application's (the instrumentation writes
# no conversation and no agent span).
GENAI_2_NO_RUN = _stack("google-genai-2-no-run", gb_envs.GOOGLE_GENAI, run=False)

_outcome = Outcomes()


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", [GENAI_2, GENAI_3_FORCED], ids=lambda s: s.name)
def test_every_call_is_verified_from_the_wire(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With the tap on, each of the 8 calls (plain, streamed, async) is one epoch minted from the
    body sent, verified, its served view equal to the logged body on every field, and the Gemini
    API's own host raises no cache-transform."""
    outcome = _outcome(stack, tmp_path_factory)
    account = outcome.describe()
    assert outcome.result["instrumented"] is True
    assert_verified_from_wire(outcome, CALLS)
    assert_operation_guessed(outcome)
    for epoch in outcome.epochs:
        assert names.GAP_CACHE_TRANSFORM not in {k for k, _ in epoch.gaps}, account


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", [GENAI_2_NO_WIRE, GENAI_3_FORCED_NO_WIRE], ids=lambda s: s.name)
def test_without_the_tap_no_call_claims_more_than_its_record(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With the tap off the instrumentation's record stands: one epoch per call, none verified
    while its view differs from the body, and every difference named by a gap on its epoch."""
    outcome = _outcome(stack, tmp_path_factory)
    account = outcome.describe()
    assert_record_stands(outcome, CALLS)
    assert {e.source for e in outcome.epochs} == {names.SOURCE_INSTRUMENTATION}, account
    assert not outcome.false_defaults, account
    # what the record lacks is named: the invented ids are left out, the names are unrecorded
    lacking = {d.aspect for e in outcome.epochs for d in e.differences}
    assert "tool_result.name" in lacking, account
    assert "tool call id" not in lacking, account


@pytest.mark.instrumentation
def test_google_genai_3_is_outside_the_instrumentations_range(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """google-genai 3.x: the instrumentation's dependency check refuses it, so no span is made and
    the tap, which pairs a body with the span current while it is sent, has nothing to pair with:
    8 bodies on the wire, no epoch, nothing claimed."""
    outcome = _outcome(GENAI_3, tmp_path_factory)
    assert outcome.result["instrumented"] is False
    assert len(outcome.requests) == CALLS
    assert outcome.spans == 0
    assert not outcome.epochs


@pytest.mark.instrumentation
def test_without_af_otel_run_the_run_is_the_trace(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """google-genai's instrumentation records neither a conversation nor an agent span, so
    without ``af_otel.run`` the run is the trace (rule 4): the 8 calls under the application's
    one span are one run named by its trace id, each still verified from the wire."""
    outcome = _outcome(GENAI_2_NO_RUN, tmp_path_factory)
    account = outcome.describe()
    assert len(outcome.requests) == len(outcome.epochs) == CALLS, account
    (trace,) = {e.trace for e in outcome.epochs}
    assert outcome.runs == [trace], account
    assert outcome.count(VerdictStatus.VERIFIED) == CALLS, account


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", [GENAI_2, GENAI_2_NO_WIRE], ids=lambda s: s.name)
def test_the_api_key_is_never_written(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every request carried the client's API key (``x-goog-api-key``), and neither the trace nor
    the store (blobs, spellings) holds it."""
    outcome = _outcome(stack, tmp_path_factory)
    assert {r.credential for r in outcome.requests} == {"fake-gemini-key"}
    assert outcome.holding("fake-gemini-key") == []
