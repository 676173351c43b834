"""``af-otel served --request`` and `replay`: the body a call's client sent, rebuilt from the
record (RFC 8785 equal, nothing left out, where the call was minted from the wire), or a refusal
naming why. The real ``openai`` and ``anthropic`` clients over ``httpx2`` under hand-made GenAI
spans, written as OTLP JSON lines and read back by the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import af_otel
from af_otel import canonical_json, names
from af_otel.cli import main
from af_otel.reader.replay import ReplayRefusedError, replay, replay_request
from af_otel.reader.verify import VerdictStatus
from af_otel.wire import uninstall
from tests.builders import start_attributes
from tests.wire.replies import CHAT_REPLY, MESSAGE_REPLY

CHAT_CHUNK = {
    "id": "c1",
    "object": "chat.completion.chunk",
    "created": 0,
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}
RESPONSE_REPLY = {
    "id": "resp_1",
    "object": "response",
    "created_at": 0,
    "status": "completed",
    "model": "gpt-5-mini",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}],
        }
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
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
            body = orjson.loads(request.content)
            bodies.append((request.url.path, body))
            if request.url.path.endswith("/responses"):
                return httpx2.Response(200, json={**RESPONSE_REPLY, "model": body["model"]})
            if not request.url.path.endswith("/chat/completions"):
                return httpx2.Response(200, json=MESSAGE_REPLY)
            if body.get("stream"):
                chunk = orjson.dumps(CHAT_CHUNK).decode()
                sse = f"data: {chunk}\n\ndata: [DONE]\n\n"
                headers = {"content-type": "text/event-stream"}
                return httpx2.Response(200, content=sse.encode(), headers=headers)
            return httpx2.Response(200, json=CHAT_REPLY)

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
    for rebuilt, (_, sent) in zip(printed, bodies, strict=True):
        assert canonical_json(rebuilt) == canonical_json(sent)
    assert "not on record" not in err  # every body spelled as sent


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


def _exact(tmp_path: Path, capsys: Any, bodies: list[Any], refused: int = 0) -> list[str]:
    """Every rebuilt body is its logged body as RFC 8785 JSON, nothing left out; the lines the
    CLI wrote on standard error."""
    code, printed, err = _served_request(tmp_path, capsys)
    assert code == (2 if refused else 0), err
    assert "not on record" not in err, err
    sent = [body for _, body in bodies]
    assert len(printed) == len(sent) - refused
    for rebuilt in printed:
        assert canonical_json(rebuilt) in {canonical_json(b) for b in sent}, (rebuilt, sent)
    assert len({canonical_json(b) for b in printed}) == len(printed)
    # Without its spelling each is written in the writer's one spelling, which still reads back
    # to the verified request (else it would be refused), and says what it leaves out.
    spans = list(af_otel.read_spans(tmp_path / "trace.jsonl"))
    for view in af_otel.served_views(spans, store=tmp_path / "store"):
        if af_otel.verify(view).status is VerdictStatus.VERIFIED and not view.held:
            found = replay(view)
            assert not found.exact
            assert "not on record" in found.notice
    return err.splitlines()


SPACED_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_time", "arguments": '{ "city" :  "Paris" }'},
        }
    ],
}
IMAGE = {
    "type": "image_url",
    "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"},
}
PNG = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}


def test_streamed_calls_with_spaced_arguments_images_and_cache_marks_replay_exactly(
    recorded: Any, tmp_path: Path, capsys: Any
) -> None:
    """A streamed chat call (``stream``, ``stream_options``) replaying a tool call whose arguments
    keep the client's spacing, with an image, over two calls of one run (the second read from
    its tail); an Anthropic call with an image, a cached tool and a tool result: each rebuilt
    body is the one sent, spacing, transport keys and cache marks included."""
    tracer, bodies, http, provider = recorded()
    oa = openai.OpenAI(api_key="sk-test", http_client=http)
    an = anthropic.Anthropic(api_key="sk-ant-test", http_client=http)
    history: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "Time here?"}, IMAGE]},
        SPACED_CALL,
        {"role": "tool", "tool_call_id": "call_1", "content": "9:00"},
    ]
    with af_otel.run("replay-exact"):
        for turn in range(2):
            with tracer.start_as_current_span(
                "chat gpt-4o", attributes=start_attributes("gpt-4o", "openai")
            ):
                for _ in oa.chat.completions.create(
                    model="gpt-4o",
                    messages=history,
                    stream=True,
                    stream_options={"include_usage": True},
                    max_completion_tokens=50,
                ):
                    pass
            history = [
                *history,
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": f"again {turn}"},
            ]
        with tracer.start_as_current_span(
            "chat claude", attributes=start_attributes("claude-sonnet-5-5")
        ):
            an.messages.create(
                model="claude-sonnet-5-5",
                max_tokens=512,
                tools=[
                    {
                        "name": "get_time",
                        "input_schema": {"type": "object"},
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": PNG,
                                "cache_control": {"type": "ephemeral"},
                            },
                            {"type": "text", "text": "Time?"},
                        ],
                    },
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "tool_use", "id": "tu_1", "name": "get_time", "input": {}}
                        ],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "tu_1", "content": "9:00"}
                        ],
                    },
                ],
            )
    provider.shutdown()
    assert bodies[0][1]["stream"] is True  # the transport keys were sent
    _exact(tmp_path, capsys, bodies)


def test_responses_calls_replay_exactly_and_held_history_is_refused(
    recorded: Any, tmp_path: Path, capsys: Any
) -> None:
    """Responses calls with instructions, tools, a forced choice, a JSON-schema text format and
    reasoning settings, one whose input is a string and one replaying a reasoning item, a call
    and its output (with their ids and statuses): each rebuilt body is the one sent. A call
    continued by ``previous_response_id`` is refused with the gap that says why."""
    tracer, bodies, http, provider = recorded()
    oa = openai.OpenAI(api_key="sk-test", http_client=http)
    tools = [
        {"type": "function", "name": "get_time", "parameters": {"type": "object"}, "strict": False}
    ]
    items = [
        {"role": "user", "content": "Time?"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Look it up."}],
            "encrypted_content": "gAAAAsealed",
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "get_time",
            "arguments": '{"city": "Paris"}',
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "9:00"},
    ]
    calls: list[dict[str, Any]] = [
        {"input": "Time?", "instructions": "Be brief.", "tool_choice": "required"},
        {
            "input": items,
            "store": False,
            "include": ["reasoning.encrypted_content"],
            "reasoning": {"effort": "low", "summary": "auto"},
            "tool_choice": {"type": "function", "name": "get_time"},
            "text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}}},
            "max_output_tokens": 300,
        },
        {"input": [{"role": "user", "content": "And now?"}], "previous_response_id": "resp_1"},
    ]
    with af_otel.run("replay-responses"):
        for kwargs in calls:
            with tracer.start_as_current_span(
                "responses gpt-5-mini", attributes=start_attributes("gpt-5-mini", "openai")
            ):
                oa.responses.create(model="gpt-5-mini", tools=tools, **kwargs)
    provider.shutdown()
    err = _exact(tmp_path, capsys, bodies, refused=1)
    assert any("server-held-history" in line for line in err), err


def test_a_spelling_the_store_lacks_is_named_and_a_damaged_one_refused(
    recorded: Any, tmp_path: Path, capsys: Any
) -> None:
    """Without its spelling blob a wire call is rebuilt in one spelling and says what it leaves
    out; with the blob's bytes altered it is refused: damage is never a gap."""
    tracer, bodies, http, provider = recorded()
    oa = openai.OpenAI(api_key="sk-test", http_client=http)
    with tracer.start_as_current_span(
        "chat gpt-4o", attributes=start_attributes("gpt-4o", "openai")
    ):
        oa.chat.completions.create(
            model="gpt-4o",
            messages=[SPACED_CALL, {"role": "user", "content": "Time?"}],
            stream=False,
        )
    provider.shutdown()
    spans = list(af_otel.read_spans(tmp_path / "trace.jsonl"))
    (view,) = af_otel.served_views(spans, store=tmp_path / "store")
    assert view.spelling is not None
    found = replay(view, store=tmp_path / "store")
    assert found.exact
    assert canonical_json(found.body) == canonical_json(bodies[0][1])
    blob = _blob_path(tmp_path / "store", view.spelling)
    data = blob.read_bytes()
    blob.chmod(0o644)
    blob.write_bytes(data.replace(b'"size":2', b'"size":3'))
    with pytest.raises(ReplayRefusedError, match="spelling"):
        replay(view, store=tmp_path / "store")
    blob.unlink()
    missing = replay(view, store=tmp_path / "store")
    assert not missing.exact
    assert view.spelling in missing.notice
    assert "not on record" in missing.notice
    assert (
        missing.body["messages"][0]["tool_calls"][0]["function"]["arguments"] == '{"city":"Paris"}'
    )


def _blob_path(store: Path, address: str) -> Path:
    digits = address.removeprefix("sha256:")
    (found,) = [p for p in store.rglob(digits[2:] + "*") if p.is_file()]
    return found


_SPACES = st.sampled_from(["", " ", "  ", "\n"])


@st.composite
def _histories(draw: st.DrawFn) -> tuple[str, list[bytes]]:
    """A run's bodies to one endpoint: turns appended (tool calls whose arguments carry drawn
    spacing; Anthropic blocks with or without cache marks), the first message edited, the
    transport keys and settings changed."""
    anthropic_api = draw(st.booleans())
    messages: list[dict[str, Any]] = [{"role": "user", "content": "q0"}]
    rest: dict[str, Any] = {"model": "m", "max_tokens": 64}
    bodies = []
    for index, step in enumerate(
        draw(st.lists(st.sampled_from(["turn", "edit", "rest"]), min_size=1, max_size=5))
    ):
        space = draw(_SPACES)
        if step == "turn" and anthropic_api:
            mark = {"cache_control": {"type": "ephemeral"}} if draw(st.booleans()) else {}
            messages += [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": f"t{index}", "name": "f", "input": {"n": index}}
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": f"t{index}", "content": "r", **mark}
                    ],
                },
            ]
        elif step == "turn":
            arguments = "{" + space + f'"n":{space}{index}' + "}"
            call = {
                "id": f"c{index}",
                "type": "function",
                "function": {"name": "f", "arguments": arguments},
            }
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"c{index}", "content": "r"},
                {"role": "user", "content": [{"type": "text", "text": f"q{index}"}]},
            ]
        elif step == "edit":
            messages[0] = {"role": "user", "content": f"edited {index}"}
        else:
            rest = {**rest, "temperature": index / 10, "stream": draw(st.booleans())}
        bodies.append(orjson.dumps({"messages": messages, **rest}))
    return ("/v1/messages" if anthropic_api else "/v1/chat/completions"), bodies


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(drawn=_histories())
def test_every_body_of_a_drawn_run_replays_exactly(
    drawn: tuple[str, list[bytes]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Over drawn runs, read from their bodies' tails or whole, every call verifies and its
    rebuilt body is the body sent, as RFC 8785 JSON."""
    path, bodies = drawn
    tmp = tmp_path_factory.mktemp("drawn")
    provider = TracerProvider()
    processor = af_otel.ReceiptSpanProcessor(
        SimpleSpanProcessor(FileSpanExporter(tmp / "trace.jsonl")), store=tmp / "store"
    )
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("app")
    model_provider = "anthropic" if path == "/v1/messages" else "openai"
    transport = httpx.MockTransport(lambda r: httpx.Response(200, json={}))
    try:
        with httpx.Client(transport=transport) as client, af_otel.run("drawn"):
            for body in bodies:
                with tracer.start_as_current_span(
                    "chat m", attributes=start_attributes("m", model_provider)
                ):
                    client.post(f"https://api.example.com{path}", content=body)
    finally:
        provider.shutdown()
        uninstall()
    spans = list(af_otel.read_spans(tmp / "trace.jsonl"))
    views = af_otel.served_views(spans, store=tmp / "store")
    assert len(views) == len(bodies)
    for view, body in zip(sorted(views, key=lambda v: v.epoch), bodies, strict=True):
        found = replay(view, store=tmp / "store")
        assert found.exact, found.notice
        assert canonical_json(found.body) == canonical_json(orjson.loads(body))


@pytest.mark.parametrize("content", ["auto", "none"])
def test_the_span_names_the_spelling_only_where_the_store_keeps_content(
    content: str, tmp_path: Path
) -> None:
    """The spelling is content: it goes to the store, and the span holds its address alone;
    with ``content="none"`` nothing of it is kept."""
    provider = TracerProvider()
    processor = af_otel.ReceiptSpanProcessor(
        SimpleSpanProcessor(FileSpanExporter(tmp_path / "trace.jsonl")),
        store=tmp_path / "store",
        content=content,
    )
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("app")
    transport = httpx.MockTransport(lambda r: httpx.Response(200, json={}))
    body = orjson.dumps({"model": "m", "messages": [SPACED_CALL], "stream": True})
    try:
        with (
            httpx.Client(transport=transport) as client,
            tracer.start_as_current_span("chat m", attributes=start_attributes("m", "openai")),
        ):
            client.post("https://api.openai.com/v1/chat/completions", content=body)
    finally:
        provider.shutdown()
        uninstall()
    (span,) = af_otel.read_spans(tmp_path / "trace.jsonl")
    spelling = span.attributes.get(names.WIRE_SPELLING)
    if content == "none":
        assert spelling is None
        return
    assert isinstance(spelling, str)
    assert spelling.startswith("sha256:")
    assert "Paris" not in json.dumps(dict(span.attributes))  # the arguments stay in the store
