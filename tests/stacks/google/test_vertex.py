"""Vertex AI end to end: the real google-genai client with ``vertexai=True`` (a project, a
location and OAuth credentials of a fixed token, so no metadata server and no refresh) under the
real opentelemetry-instrumentation-google-genai, with af_otel's processor, against the loopback
Gemini server that logs every body and the credential it came with. The same 8-call two-tool agent
as the Gemini API test (system instruction, tools, plain, streamed and async calls), on Vertex's
paths: ``v1beta1`` and ``v1``, a project id and a project number, a publisher model named
bare or by its resource name, a tuned model's endpoint, the regional and the global host, and the
loopback server named as the client's ``base_url``; and Google ADK's agent over the same client
with ADK's own telemetry."""

from __future__ import annotations

from typing import Any

import pytest

from af_otel import names
from tests.stacks import gb_envs
from tests.stacks.gb_agent_common import VERTEX_TOKEN as TOKEN
from tests.stacks.gb_check import (
    GENAI_CONTENT,
    WIRE_OFF,
    Outcomes,
    Stack,
    assert_record_stands,
    assert_verified_from_wire,
)
from tests.stacks.gb_convert import from_gemini
from tests.stacks.google import server
from tests.stacks.google.test_adk import AGENT as ADK_AGENT
from tests.stacks.google.test_google_genai import AGENT, CALLS

PROJECT = {"project": "af-otel-test", "location": "us-central1"}
ENDPOINT = "projects/123456789012/locations/us-central1/endpoints/4567"
PUBLISHED = "/v1beta1/projects/{project}/locations/{location}/publishers/google/models/"


def _stack(name: str, env: gb_envs.Env, vertex: dict[str, Any], **options: Any) -> Stack:
    agent = options.pop("agent", AGENT)
    env_vars = dict(GENAI_CONTENT)
    if options.pop("wire", True) is False:
        env_vars |= WIRE_OFF
    if options.pop("trusted", False):
        env_vars["AF_OTEL_TRUSTED_HOSTS"] = "127.0.0.1"
    config = {"vertex": vertex, **options}
    return Stack(f"vertex-{name}", env, agent, server.server, from_gemini, config, env_vars)


# The client's own regional host (its transport reroutes to the loopback server): no cache-transform.
REGIONAL_2 = _stack("2-regional", gb_envs.GOOGLE_GENAI, PROJECT)
REGIONAL_3 = _stack("3-regional", gb_envs.GOOGLE_GENAI_3, PROJECT, skip_dep_check=True)
# ``v1``, a project number and the global location (host ``aiplatform.googleapis.com``).
GLOBAL_V1 = _stack(
    "2-global-v1",
    gb_envs.GOOGLE_GENAI,
    {"project": "123456789012", "location": "global", "api_version": "v1"},
)
# The model by its resource name (the instrumentation records it so; the path names it bare).
RESOURCE = _stack(
    "2-resource-name",
    gb_envs.GOOGLE_GENAI,
    {**PROJECT, "model": "publishers/google/models/gemini-2.5-flash"},
)
TUNED = _stack("2-endpoint", gb_envs.GOOGLE_GENAI, {**PROJECT, "model": ENDPOINT})
# ``base_url`` the loopback server: not a provider host, so only `trusted_hosts` lifts the gap.
LOOPBACK = _stack("2-loopback", gb_envs.GOOGLE_GENAI, {**PROJECT, "base_url": True})
LOOPBACK_TRUSTED = _stack(
    "2-loopback-trusted", gb_envs.GOOGLE_GENAI, {**PROJECT, "base_url": True}, trusted=True
)
NO_WIRE = _stack("2-no-wire", gb_envs.GOOGLE_GENAI, PROJECT, wire=False)
# Google ADK's agent on ADK's Gemini model over the same Vertex client (its own telemetry).
ADK = _stack("adk", gb_envs.GOOGLE_ADK, PROJECT, agent=ADK_AGENT)

DIRECT = (REGIONAL_2, REGIONAL_3, GLOBAL_V1, RESOURCE, TUNED, LOOPBACK_TRUSTED, ADK)
ON_WIRE = (*DIRECT, LOOPBACK)
_outcome = Outcomes()


def _ids(stack: Stack) -> str:
    return stack.name


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", ON_WIRE, ids=_ids)
def test_every_vertex_call_is_verified_from_the_wire(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With the tap on, each of the 8 calls is one epoch minted from the body sent to its Vertex
    path, provider ``gcp.vertex_ai``, verified, its served view equal to the logged body on every
    field, the record saying nothing otherwise than the wire, and rebuilt (`served --request`)
    to the very body and path it was sent with."""
    outcome = _outcome(stack, tmp_path_factory)
    account = outcome.describe()
    assert outcome.result.get("instrumented", True) is True  # ADK's telemetry is its own
    assert_verified_from_wire(outcome, CALLS)
    assert all("/projects/" in r.path for r in outcome.requests), account  # Vertex's paths
    assert {e.provider for e in outcome.epochs} == {"gcp.vertex_ai"}, account
    assert [e.differs for e in outcome.epochs] == [None] * CALLS, account


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", [REGIONAL_2, GLOBAL_V1, TUNED, ADK], ids=_ids)
def test_without_the_spelling_the_path_is_the_writers(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With no store the body is written in one spelling and its path by the writer, which names
    it: a publisher model's with ``{project}`` and ``{location}`` left as placeholders (the
    record holds neither), an endpoint's with its resource name (which holds both)."""
    outcome = _outcome(stack, tmp_path_factory)
    model = stack.config["vertex"].get("model")
    where = f"/v1beta1/{ENDPOINT}:" if model == ENDPOINT else f"{PUBLISHED}gemini-2.5-flash:"
    for e in outcome.epochs:
        assert e.unspelled.startswith("not exact: "), (e.epoch, e.unspelled)
        assert f"({where}generateContent)" in e.unspelled, (e.epoch, e.unspelled)


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", [*ON_WIRE, NO_WIRE], ids=_ids)
def test_the_bearer_token_is_never_written(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every request carried the client's bearer token, and neither the trace (every span), nor
    the store (every blob, every spelling) holds it, or its header."""
    outcome = _outcome(stack, tmp_path_factory)
    assert {r.credential for r in outcome.requests} == {f"Bearer {TOKEN}"}
    assert outcome.holding(TOKEN) == []
    assert outcome.holding("Bearer") == []


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", ON_WIRE, ids=_ids)
def test_cache_transform_follows_the_host_the_body_went_to(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Sent to Vertex AI's own host (regional or global) or a trusted one, no call raises
    ``cache-transform``; sent to the loopback server by ``base_url``, untrusted, every call does
    (something other than Google may stand between the body and the model), still verified."""
    outcome = _outcome(stack, tmp_path_factory)
    raised = [names.GAP_CACHE_TRANSFORM in {k for k, _ in e.gaps} for e in outcome.epochs]
    assert raised == [stack not in DIRECT] * CALLS, outcome.describe()


@pytest.mark.instrumentation
def test_without_the_tap_no_vertex_call_claims_more_than_its_record(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """With the tap off the instrumentation's record stands: none verified while its view differs
    from the body, every difference named by a gap on its epoch, and each call refused a rebuild."""
    outcome = _outcome(NO_WIRE, tmp_path_factory)
    account = outcome.describe()
    assert_record_stands(outcome, CALLS)
    assert {e.source for e in outcome.epochs} == {names.SOURCE_INSTRUMENTATION}, account
