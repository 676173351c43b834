"""A Vertex AI model of another publisher than Google (``meta/{model}``, which google-genai sends
to ``publishers/meta/models/{model}:generateContent``) on the real google-genai client under its
real instrumentation, against the loopback Gemini server that logs every body: every call is
verified from the wire with the model ``meta/{model}``, the record says nothing otherwise, and
the path rebuilt without a spelling is the publisher's own, never ``publishers/google``."""

from __future__ import annotations

import pytest

from af_otel import names
from af_otel.reader.verify import VerdictStatus
from tests.stacks import gb_envs
from tests.stacks.gb_check import run_stack
from tests.stacks.google.test_google_genai import CALLS
from tests.stacks.google.test_vertex import PROJECT, _stack

MODEL = "llama-3.3-70b-instruct-maas"
META = _stack("2-meta", gb_envs.GOOGLE_GENAI, {**PROJECT, "model": f"meta/{MODEL}"})
WHERE = "/v1beta1/projects/{project}/locations/{location}/publishers/meta/models/"


@pytest.mark.instrumentation
def test_a_meta_model_is_verified_and_rebuilt_on_its_publishers_path(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Sent under ``publishers/meta``: verified from the wire as ``meta/{model}``, replayed to
    the very body, and without a spelling written back to ``publishers/meta``."""
    outcome = run_stack(META, tmp_path_factory.mktemp(META.name))
    account = outcome.describe()
    assert len(outcome.requests) == len(outcome.epochs) == CALLS, account
    assert all(f"/publishers/meta/models/{MODEL}:" in r.path for r in outcome.requests), account
    assert {e.source for e in outcome.epochs} == {names.SOURCE_WIRE}, account
    assert outcome.count(VerdictStatus.VERIFIED) == CALLS, account
    assert [e.differs for e in outcome.epochs] == [None] * CALLS, account
    assert [e.replay for e in outcome.epochs] == ["equal"] * CALLS, account
    for e in outcome.epochs:
        assert f"({WHERE}{MODEL}:generateContent)" in e.unspelled, (e.epoch, e.unspelled)
        assert "/publishers/google/" not in e.unspelled, (e.epoch, e.unspelled)
