"""``af-otel served --request`` and `replay_request`: the body a call's client sent, rebuilt from
the record (RFC 8785 equal, less what no record keeps), or a refusal naming why. The real
``openai`` and ``anthropic`` clients over ``httpx2`` under hand-made GenAI spans, written as
OTLP JSON lines and read back by the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import orjson
import pytest
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import af_otel
from af_otel import canonical_json
from af_otel.cli import main
from af_otel.reader.replay import ReplayRefusedError, replay_request
from af_otel.wire import uninstall
from tests.builders import start_attributes
from tests.wire.harness import spelled

CHAT_REPLY = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
    ],
}
MESSAGE_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-5-5",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[Any]:
    """Record calls made inside ``with recorded(wire=...) as (tracer, bodies, http):``."""
    providers: list[TracerProvider] = []

    def start(wire: bool = True) -> tuple[Any, list[Any], Any, TracerProvider]:
        provider = TracerProvider()
        processor = af_otel.ReceiptSpanProcessor(
            SimpleSpanProcessor(FileSpanExporter(tmp_path / "trace.jsonl")),
            store=tmp_path / "store",
            wire=wire,
        )
        provider.add_span_processor(processor)
        providers.append(provider)
        bodies: list[Any] = []

        def answer(request: Any) -> Any:
            bodies.append((request.url.path, orjson.loads(request.content)))
            chat = request.url.path.endswith("/chat/completions")
            return httpx2.Response(200, json=CHAT_REPLY if chat else MESSAGE_REPLY)

        http = httpx2.Client(transport=httpx2.MockTransport(answer))
        return provider.get_tracer("app"), bodies, http, provider

    yield start
    for provider in providers:
        provider.shutdown()
    uninstall()


def _served_request(tmp_path: Path, capsys: Any) -> tuple[int, list[Any], str]:
    code = main(
        ["served", str(tmp_path / "trace.jsonl"), "--store", str(tmp_path / "store"), "--request"]
    )
    out = capsys.readouterr()
    return code, [json.loads(line) for line in out.out.splitlines()], out.err


def test_served_request_prints_the_bodies_the_clients_sent(
    recorded: Any, tmp_path: Path, capsys: Any
) -> None:
    """An OpenAI chat call with tools and a forced choice, and an Anthropic call with system
    blocks, a cache mark and thinking: each printed body is the one sent (RFC 8785)."""
    tracer, bodies, http, provider = recorded()
    oa = openai.OpenAI(api_key="sk-test", http_client=http)
    an = anthropic.Anthropic(api_key="sk-ant-test", http_client=http)
    with af_otel.run("replay"):
        with tracer.start_as_current_span(
            "chat gpt-4o", attributes=start_attributes("gpt-4o", "openai")
        ):
            oa.chat.completions.create(
                model="gpt-4o",
                messages=[
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Time?"},
                ],
                tools=[
                    {
                        "type": "function",
                        "function": {"name": "get_time", "parameters": {"type": "object"}},
                    }
                ],
                tool_choice={"type": "function", "function": {"name": "get_time"}},
                temperature=0.2,
                stream=False,
            )
        with tracer.start_as_current_span(
            "chat claude", attributes=start_attributes("claude-sonnet-5-5")
        ):
            an.messages.create(
                model="claude-sonnet-5-5",
                max_tokens=2048,
                system=[
                    {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
                ],
                messages=[{"role": "user", "content": "Time?"}],
                thinking={"type": "enabled", "budget_tokens": 1024},
            )
    provider.shutdown()
    code, printed, err = _served_request(tmp_path, capsys)
    assert code == 0, err
    assert len(printed) == len(bodies) == 2
    for rebuilt, (path, sent) in zip(printed, bodies, strict=True):
        assert canonical_json(spelled(path, rebuilt)) == canonical_json(spelled(path, sent))


def test_a_call_the_record_cannot_rebuild_is_refused_with_its_gap(
    recorded: Any, tmp_path: Path, capsys: Any
) -> None:
    """With the tap off and no content on the span, nothing can be rebuilt: the CLI exits 2 and
    names the gap; the API raises `ReplayRefusedError`."""
    tracer, _, http, provider = recorded(wire=False)
    oa = openai.OpenAI(api_key="sk-test", http_client=http)
    with tracer.start_as_current_span(
        "chat gpt-4o", attributes=start_attributes("gpt-4o", "openai")
    ):
        oa.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Time?"}])
    provider.shutdown()
    code, printed, err = _served_request(tmp_path, capsys)
    assert (code, printed) == (2, [])
    assert "cannot rebuild the request body" in err
    assert "gap " in err or "nothing to check" in err
    spans = list(af_otel.read_spans(tmp_path / "trace.jsonl"))
    (view,) = af_otel.served_views(spans, store=tmp_path / "store")
    with pytest.raises(ReplayRefusedError, match=view.span_id):
        replay_request(view)
