"""The Bedrock stack against the wire: a two-tool agent of 8 Converse calls and 2 InvokeModel
calls (an Anthropic Messages body) on the real boto3 client, under the real
opentelemetry-instrumentation-botocore or opentelemetry-instrumentation-genai-bedrock, with
af_otel's processor, against a loopback Bedrock Runtime that logs every body. The botocore tap
(its ``before-send`` event) sees each body; each epoch's served view is held to it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from af_otel import names
from af_otel.reader.verify import VerdictStatus
from tests.sidevenv import ensure
from tests.stacks import gb_envs
from tests.stacks.bedrock import server
from tests.stacks.gb_check import (
    GENAI_CONTENT,
    WIRE_OFF,
    Outcomes,
    Stack,
    assert_operation_guessed,
    assert_record_stands,
    assert_verified_from_wire,
)
from tests.stacks.gb_convert import from_bedrock

AGENT = Path(__file__).resolve().parent / "agent.py"
PROBE = Path(__file__).resolve().parent / "tap_probe.py"
ROOT = Path(__file__).resolve().parents[3]
CALLS = 10


def _stack(instrumentation: str, wire: bool = True, run: bool = True) -> Stack:
    name = f"bedrock-{instrumentation}" + ("" if wire else "-no-wire") + ("" if run else "-no-run")
    env_vars = GENAI_CONTENT | ({} if wire else WIRE_OFF)
    config = {"instrumentation": instrumentation, "invoke": True, "run": run}
    return Stack(name, gb_envs.BEDROCK, AGENT, server.server, from_bedrock, config, env_vars)


BOTOCORE = _stack("botocore")
BOTOCORE_NO_WIRE = _stack("botocore", wire=False)
GENAI_BEDROCK = _stack("genai-bedrock")
GENAI_BEDROCK_NO_WIRE = _stack("genai-bedrock", wire=False)
# No af_otel.run: the calls in a plain span of the application's.
BOTOCORE_NO_RUN = _stack("botocore", run=False)

_outcome = Outcomes()


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", [BOTOCORE, GENAI_BEDROCK], ids=lambda s: s.name)
def test_every_call_is_verified_from_the_botocore_tap(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With the tap on, each of the 10 calls (plain, streamed, InvokeModel) is one epoch minted
    from the body botocore sent, verified, its served view equal to the logged body on every
    field."""
    outcome = _outcome(stack, tmp_path_factory)
    assert_verified_from_wire(outcome, CALLS)
    assert_operation_guessed(outcome)
    for epoch in outcome.epochs:  # sent to Bedrock's own regional host
        assert names.GAP_CACHE_TRANSFORM not in {k for k, _ in epoch.gaps}, outcome.describe()


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", [BOTOCORE_NO_WIRE, GENAI_BEDROCK_NO_WIRE], ids=lambda s: s.name)
def test_without_the_tap_no_call_claims_more_than_its_record(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With the tap off: one epoch per call, none verified while its view differs from the body,
    every difference named. botocore's instrumentation puts content in log events only, so its
    calls have no receipt, and say why."""
    outcome = _outcome(stack, tmp_path_factory)
    account = outcome.describe()
    assert_record_stands(outcome, CALLS)
    assert {e.source for e in outcome.epochs} == {names.SOURCE_INSTRUMENTATION}, account
    assert not outcome.false_defaults, account
    if stack is BOTOCORE_NO_WIRE:  # content in log events only: every receipt absent, named
        for epoch in outcome.epochs:
            assert names.GAP_NO_RECEIPT in {k for k, _ in epoch.gaps}, account


def test_the_botocore_tap_patches_botocore_when_the_application_imports_it() -> None:
    """Installed before botocore is imported, the tap does not import it (that would cost every
    process that has it); it patches it on the application's import, keeps the one Converse body
    under the current span, and keeps nothing once uninstalled."""
    with server.server() as loopback:
        done = subprocess.run(
            [str(ensure(gb_envs.BEDROCK)), str(PROBE), str(loopback.port)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
        )
        logged = [r.body for r in loopback.requests]
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout)
    assert found["imported_by_install"] is False
    assert found["kept"] == [
        ["bedrock.converse", "127.0.0.1", logged[0], "/model/m.x-v1%3A0/converse"]
    ]
    assert found["after_uninstall"] == 0
    assert len(logged) == 2


@pytest.mark.instrumentation
def test_without_af_otel_run_the_run_is_the_trace(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """botocore's instrumentation records neither a conversation nor an agent span, so without
    ``af_otel.run`` the run is the trace (rule 4): the 10 calls under the application's one span
    are one run named by its trace id, each still verified from the tap."""
    outcome = _outcome(BOTOCORE_NO_RUN, tmp_path_factory)
    account = outcome.describe()
    assert len(outcome.requests) == len(outcome.epochs) == CALLS, account
    (trace,) = {e.trace for e in outcome.epochs}
    assert outcome.runs == [trace], account
    assert outcome.count(VerdictStatus.VERIFIED) == CALLS, account
