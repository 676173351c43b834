"""Several HTTP attempts under one call (docs/processor.md, the wire tap): the real ``openai``
client retrying over ``httpx2``, under a hand-made GenAI span. Equal bodies are one request and
verify; bodies that differ read as the last one, named `wire-attempts-differ`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import orjson
import pytest

from af_otel import names, read_spans, served_views, verify
from af_otel.reader.verify import VerdictStatus
from tests.builders import Pipeline, start_attributes, tapped_pipeline
from tests.wire.convert import differences, from_openai, from_view

_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
    ],
}


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    yield from tapped_pipeline(tmp_path)


def _client(failures: int, bodies: list[dict[str, Any]], retries: int) -> openai.OpenAI:
    """A real client whose first ``failures`` attempts are refused (429, retry at once)."""

    def answer(request: Any) -> Any:
        bodies.append(orjson.loads(request.content))
        if len(bodies) <= failures:
            return httpx2.Response(429, json={"error": {}}, headers={"retry-after-ms": "1"})
        return httpx2.Response(200, json=_REPLY)

    http = httpx2.Client(transport=httpx2.MockTransport(answer))
    return openai.OpenAI(api_key="sk-test", http_client=http, max_retries=retries)


def _view(pipeline: Pipeline) -> tuple[Any, Any]:
    (span,) = pipeline.spans()
    (view,) = served_views(tuple(read_spans([span])), store=pipeline.store)
    return span.attributes, view


def _ask(client: openai.OpenAI, question: str) -> None:
    client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": question}], temperature=0.0
    )


def test_a_retry_that_resends_the_body_is_one_verified_request(pipeline: Pipeline) -> None:
    """The client's own retry resends the same bytes: one receipt, verified, two attempts said."""
    bodies: list[dict[str, Any]] = []
    client = _client(1, bodies, retries=2)
    with pipeline.tracer.start_as_current_span("chat gpt-4o", attributes=start_attributes()):
        _ask(client, "Weather in Oslo?")
    attributes, view = _view(pipeline)
    assert len(bodies) == 2
    assert bodies[0] == bodies[1]
    assert attributes[names.RECEIPT_SOURCE] == names.SOURCE_WIRE
    assert attributes[names.WIRE_ATTEMPTS] == 2
    assert verify(view).status == VerdictStatus.VERIFIED
    assert differences(from_openai(bodies[-1]), from_view(view)) == []


def test_attempts_with_different_bodies_read_as_the_last_with_a_gap(pipeline: Pipeline) -> None:
    """A retry that changes the request (the caller's own, under one span): the call is the last
    body, never verified, and `wire-attempts-differ` says why."""
    bodies: list[dict[str, Any]] = []
    client = _client(1, bodies, retries=0)
    with pipeline.tracer.start_as_current_span("chat gpt-4o", attributes=start_attributes()):
        with pytest.raises(openai.RateLimitError):
            _ask(client, "Weather in Oslo?")
        _ask(client, "Weather in Oslo, in one word?")
    attributes, view = _view(pipeline)
    assert len(bodies) == 2
    assert bodies[0] != bodies[1]
    assert attributes[names.RECEIPT_SOURCE] == names.SOURCE_WIRE
    assert attributes[names.WIRE_ATTEMPTS] == 2
    assert names.GAP_WIRE_ATTEMPTS_DIFFER in attributes[names.GAPS]
    verdict = verify(view)
    assert verdict.status == VerdictStatus.RECONSTRUCTED
    assert names.GAP_WIRE_ATTEMPTS_DIFFER in {gap.kind for gap in view.gaps}
    assert differences(from_openai(bodies[-1]), from_view(view)) == []
