"""Vertex AI publisher models on the wire: a model of another publisher than Google
(``publishers/meta/models/...``) keeps its publisher in the request's model, so the path written
again without a spelling is the one sent, never ``publishers/google``; Anthropic's Vertex
endpoint (``:rawPredict``) is no Gemini endpoint."""

from __future__ import annotations

from pathlib import Path

import anthropic
import httpx2
import orjson
from hypothesis import given
from hypothesis import strategies as st

from af_otel import names
from af_otel.model import Request
from af_otel.store import LocalStore
from af_otel.wire import gemini, uninstall
from af_otel.wire.endpoints import BY_NAME, GEMINI_GENERATE, GEMINI_STREAM, endpoint_of
from af_otel.wire.read import read_body
from tests.builders import end_attributes, make_pipeline, start_attributes, user

WHERE = "/v1beta1/projects/p-1/locations/us-central1/publishers/"
BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
_NAME = st.text("abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=20)


def _read(path: str) -> Request:
    found = read_body(GEMINI_GENERATE, orjson.dumps(BODY), path.encode())
    assert found is not None
    return Request.from_dict(found.request)


@given(publisher=_NAME.filter(lambda p: p != "google"), model=_NAME)
def test_another_publishers_model_is_rebuilt_on_its_own_path(publisher: str, model: str) -> None:
    """A model under ``publishers/{publisher}`` reads as ``{publisher}/{model}`` and the writer's
    path (no spelling) names that publisher again; it reads back to the same request."""
    request = _read(f"{WHERE}{publisher}/models/{model}:generateContent")
    assert request.model == f"{publisher}/{model}"
    writer = BY_NAME[GEMINI_GENERATE].writer
    assert writer is not None
    assert writer.path is not None
    written = writer.path({"model": request.model, "provider": request.provider})
    assert f"/publishers/{publisher}/models/{model}:generateContent" in written
    assert "/publishers/google/" not in written
    assert _read(written.replace("{project}", "p").replace("{location}", "l")) == request


@given(model=_NAME)
def test_googles_model_stays_bare(model: str) -> None:
    """Google's own publisher models keep the bare name the client is handed."""
    request = _read(f"{WHERE}google/models/{model}:generateContent")
    assert request.model == model
    writer = BY_NAME[GEMINI_STREAM].writer
    assert writer is not None
    assert writer.path is not None
    written = writer.path({"model": model, "provider": request.provider})
    assert f"/publishers/google/models/{model}:" in written


def test_the_recorded_name_must_name_the_same_publisher() -> None:
    """A record naming the model as the client takes it names the path's model only when it
    names its publisher too: a bare name or Google's resource is another model."""
    sent = _read(f"{WHERE}meta/models/llama-3.3-70b:generateContent")
    for recorded in (
        "meta/llama-3.3-70b",
        "publishers/meta/models/llama-3.3-70b",
        "projects/p-1/locations/us-central1/publishers/meta/models/llama-3.3-70b",
    ):
        assert gemini.names_model(recorded, sent), recorded
    for recorded in (
        "llama-3.3-70b",
        "google/llama-3.3-70b",
        "publishers/google/models/llama-3.3-70b",
    ):
        assert not gemini.names_model(recorded, sent), recorded
    google = _read(f"{WHERE}google/models/gemini-2.5-flash:generateContent")
    for recorded in (
        "gemini-2.5-flash",
        "google/gemini-2.5-flash",
        "publishers/google/models/gemini-2.5-flash",
    ):
        assert gemini.names_model(recorded, google), recorded
    assert not gemini.names_model("meta/gemini-2.5-flash", google)


def test_anthropics_vertex_endpoint_is_not_read_as_gemini() -> None:
    """``publishers/anthropic/...:rawPredict`` (and its stream) carries Anthropic's body: the tap
    reads no endpoint there, so the call stays the instrumentation's, never a Gemini read."""
    for op in ("rawPredict", "streamRawPredict"):
        path = f"{WHERE}anthropic/models/claude-sonnet-4@20250514:{op}".encode()
        assert endpoint_of(path) is None


def _answer(request: httpx2.Request) -> httpx2.Response:
    content = [{"type": "text", "text": "hi"}]
    usage = {"input_tokens": 1, "output_tokens": 1}
    message = {"id": "m", "type": "message", "role": "assistant", "model": "claude"}
    return httpx2.Response(
        200, json=message | {"content": content, "stop_reason": "end_turn", "usage": usage}
    )


def test_an_anthropic_vertex_call_is_its_records_with_the_tap_on(tmp_path: Path) -> None:
    """The real anthropic client's AnthropicVertex (``:rawPredict``) under a GenAI span, tap on:
    the call is minted from its record (source ``instrumentation``), while the same call to
    Anthropic's own Messages endpoint is minted from its body (the tap is on)."""
    pipeline = make_pipeline(LocalStore(tmp_path / "store"))
    question = [{"role": "user", "content": "hi"}]
    record = start_attributes("claude-sonnet-4@20250514", provider="anthropic")
    record |= end_attributes([user("hi")], system=None, tools=None, temperature=None)
    try:
        transport = httpx2.MockTransport(_answer)
        clients = (
            anthropic.AnthropicVertex(
                region="us-east5",
                project_id="p",
                access_token="tok",
                http_client=httpx2.Client(transport=transport),
            ),
            anthropic.Anthropic(api_key="sk-test", http_client=httpx2.Client(transport=transport)),
        )
        for name, client in zip(("vertex", "anthropic"), clients, strict=True):
            with pipeline.tracer.start_as_current_span(name, attributes=record):
                client.messages.create(
                    model="claude-sonnet-4@20250514", max_tokens=10, messages=question
                )
        found = {s.name: (s.attributes or {}) for s in pipeline.spans()}
    finally:
        pipeline.provider.shutdown()
        uninstall()
    assert found["vertex"][names.RECEIPT_SOURCE] == names.SOURCE_INSTRUMENTATION
    assert found["vertex"][names.RECEIPT_STATE] == names.STATE_MINTED
    assert found["anthropic"][names.RECEIPT_SOURCE] == names.SOURCE_WIRE
