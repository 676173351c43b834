"""The wire tap (af_otel/wire/): what it keeps from a request, what it never touches, its bounds,
and the readers that turn a sent body into the normalized request."""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from af_otel import wire
from af_otel.model import Request
from af_otel.processor import wire_source
from af_otel.processor.facts import CallFacts
from af_otel.processor.settings import resolve_settings
from af_otel.wire import tap
from tests.wire.convert import differences, from_anthropic, from_openai, from_view

KEY = (0xABC, 0xDEF)
FACTS = CallFacts(KEY, "chat", 0, 2**62, {})  # the finished call whose span was current
CHAT = "https://api.openai.com/v1/chat/completions"
BODY = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})


@pytest.fixture
def tapped() -> Iterator[None]:
    """The tap installed with ``KEY`` as the current span, taken out afterwards."""
    wire.install(lambda: KEY)
    try:
        yield
    finally:
        wire.uninstall()


def _client() -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={})))


def test_a_post_to_an_llm_path_is_kept_once_with_its_exact_bytes(tapped: None) -> None:
    """A POST to chat completions under a span is kept as sent: its bytes, endpoint and host."""
    with _client() as client:
        client.post(CHAT, content=BODY)
    (sent,) = wire.SENT.take(KEY)
    assert sent == wire.Sent(wire.OPENAI_CHAT, "api.openai.com", BODY)
    assert wire.SENT.take(KEY) == ()  # taken once


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("POST", "https://api.example.com/v1/orders"),
        ("GET", CHAT),
        ("POST", "https://api.anthropic.com/v1/messages/count_tokens"),
        ("POST", "https://api.openai.com/v1/responses/resp_1/cancel"),
        ("POST", "https://api.openai.com/v1/chat/completions/cmpl_1"),
    ],
)
def test_other_requests_are_not_kept(tapped: None, method: str, url: str) -> None:
    """Any other method or path leaves nothing behind."""
    with _client() as client:
        client.request(method, url, content=BODY)
    assert len(wire.SENT) == 0


def test_without_a_current_span_nothing_is_kept() -> None:
    """A request sent outside any span is not an LLM span's: nothing is kept."""
    wire.install(lambda: None)
    try:
        with _client() as client:
            client.post(CHAT, content=BODY)
        assert len(wire.SENT) == 0
    finally:
        wire.uninstall()


class _Untouchable:
    """Headers that fail on any use: the tap must never look at them."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"headers.{name} was read")

    def __getitem__(self, key: str) -> Any:
        raise AssertionError(f"headers[{key!r}] was read")

    def __iter__(self) -> Any:
        raise AssertionError("headers were iterated")


def _fake_module() -> SimpleNamespace:
    class Client:
        def send(self, request: Any, **_: Any) -> str:
            return "sent"

    class AsyncClient:
        async def send(self, request: Any, **_: Any) -> str:
            return "sent"

    module = SimpleNamespace(Client=Client, AsyncClient=AsyncClient)
    tap._wrap(module)
    return module


def test_the_tap_never_reads_headers(tapped: None) -> None:
    """The body is kept without a single look at the request's headers (auth lives there)."""
    module = _fake_module()
    request = httpx.Request("POST", CHAT, content=BODY)
    request.headers = _Untouchable()  # type: ignore[assignment]
    assert module.Client().send(request) == "sent"
    assert [s.body for s in wire.SENT.take(KEY)] == [BODY]


def test_the_tap_never_raises_into_the_client(tapped: None) -> None:
    """A request the tap cannot read is sent as it is; the tap keeps nothing of it."""

    class Broken:
        method = "POST"

        @property
        def url(self) -> Any:
            raise RuntimeError("unreadable")

    assert _fake_module().Client().send(Broken()) == "sent"
    assert len(wire.SENT) == 0


def test_a_streamed_body_is_never_read(tapped: None) -> None:
    """A body given as a stream is not consumed by the tap: the transport gets all of it."""
    seen: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.read())
        return httpx.Response(200, json={})

    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        client.post(CHAT, content=iter([BODY[:10], BODY[10:]]))
    assert seen == [BODY]
    assert len(wire.SENT) == 0


async def _async_post() -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(200, json={}))
    async with httpx.AsyncClient(transport=transport) as client:
        await client.post(CHAT, content=BODY)


def test_the_async_client_is_tapped_too(tapped: None) -> None:
    """``AsyncClient.send`` keeps the body the same way."""
    import asyncio

    asyncio.run(_async_post())
    assert [s.body for s in wire.SENT.take(KEY)] == [BODY]


def test_retries_of_one_body_are_one_request_and_different_bodies_the_last(tapped: None) -> None:
    """Attempts under one span that resend the same bytes read as that one request; attempts
    with different bodies read as the last one, said to differ."""
    settings = resolve_settings(content="none")
    with _client() as client:
        client.post(CHAT, content=BODY)
        client.post(CHAT, content=BODY)
    found = wire_source.take(settings, FACTS)
    assert found is not None
    assert found.request.model == "gpt-4o"
    assert found.direct  # api.openai.com is OpenAI's own host
    assert (found.attempts, found.differ) == (2, False)
    other = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "bye"}]})
    with _client() as client:
        client.post(CHAT, content=BODY)
        client.post(CHAT, content=other)
    found = wire_source.take(settings, FACTS)
    assert found is not None
    assert (found.attempts, found.differ) == (2, True)
    assert found.request.messages[0]["parts"][0]["content"] == "bye"


def test_the_table_is_bounded(tapped: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past its bound in calls, the least recently sent call falls out first."""
    monkeypatch.setattr(tap, "MAX_CALLS", 3)
    for span in range(5):
        wire.SENT.add((1, span), wire.Sent(wire.OPENAI_CHAT, "h", BODY))
    assert len(wire.SENT) == 3
    assert wire.SENT.take((1, 0)) == ()
    assert wire.SENT.take((1, 4)) != ()


def test_a_forked_child_starts_with_an_empty_table(tapped: None) -> None:
    """What the parent kept is not the child's: after fork() the child's table is empty."""
    wire.SENT.add(KEY, wire.Sent(wire.OPENAI_CHAT, "h", BODY))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave at once
        os.write(write, str(len(wire.SENT)).encode())
        os._exit(0)
    os.close(write)
    assert os.read(read, 16) == b"0"
    os.waitpid(pid, 0)
    assert len(wire.SENT) == 1


def test_an_unused_tap_keeps_nothing() -> None:
    """Once no engine wants the tap, the patched send records nothing."""
    wire.install(lambda: KEY)
    wire.release()
    try:
        with _client() as client:
            client.post(CHAT, content=BODY)
        assert len(wire.SENT) == 0
    finally:
        wire.uninstall()


# -- the endpoints ---------------------------------------------------------------------------------

_PATH = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz/_-.0123456789"), max_size=40)
_ENDINGS = {
    "/chat/completions": wire.OPENAI_CHAT,
    "/responses": wire.OPENAI_RESPONSES,
    "/v1/messages": wire.ANTHROPIC_MESSAGES,
}


@given(_PATH, st.sampled_from(sorted(_ENDINGS)), st.one_of(st.none(), _PATH))
def test_an_llm_path_is_recognized_under_any_prefix_and_query(
    prefix: str, ending: str, query: str | None
) -> None:
    """A path ending in an LLM endpoint's path names it, whatever comes before or in the query."""
    raw = (prefix + ending + ("" if query is None else "?" + query)).encode()
    assert wire.endpoint_of(raw) == _ENDINGS[ending]


@given(_PATH)
def test_no_other_path_is_recognized(path: str) -> None:
    """A path that does not end in an LLM endpoint's path names none."""
    bedrock = ("/converse", "/converse-stream", "/invoke", "/invoke-with-response-stream")
    if not any(path.endswith(ending) for ending in (*_ENDINGS, *bedrock)):
        assert wire.endpoint_of(path.encode()) is None


# -- the readers -----------------------------------------------------------------------------------


def _read(endpoint: str, body: dict[str, Any]) -> tuple[Request, tuple[str, ...]]:
    found = wire.read_body(endpoint, orjson.dumps(body))
    assert found is not None
    return Request.from_dict(found.request), found.unread


_TEXT = st.text(max_size=12)
_ARGS = st.dictionaries(
    st.sampled_from(["city", "day", "n"]), st.integers(-(2**53), 2**53) | _TEXT, max_size=2
)


@st.composite
def chat_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """OpenAI Chat Completions bodies: every role, tool calls and results, tools and dials."""
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append(
            {"role": draw(st.sampled_from(["system", "developer"])), "content": draw(_TEXT)}
        )
    for turn in range(draw(st.integers(1, 4))):
        messages.append({"role": "user", "content": draw(_TEXT)})
        if draw(st.booleans()):
            call_id = f"call_{turn}"
            messages.append(
                {
                    "role": "assistant",
                    "content": draw(st.none() | _TEXT),
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": "get_time",
                                "arguments": orjson.dumps(draw(_ARGS)).decode(),
                            },
                        }
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": call_id, "content": draw(_TEXT)})
    body: dict[str, Any] = {
        "model": draw(st.sampled_from(["gpt-4o", "o3-mini"])),
        "messages": messages,
    }
    if draw(st.booleans()):
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": "get_time",
                    "description": draw(_TEXT),
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                    "strict": draw(st.booleans()),
                },
            }
        ]
        body["tool_choice"] = draw(
            st.sampled_from(
                ["auto", "none", "required", {"type": "function", "function": {"name": "get_time"}}]
            )
        )
        body["parallel_tool_calls"] = draw(st.booleans())
    dials = {
        "temperature": st.floats(0, 2),
        "max_completion_tokens": st.integers(1, 4096),
        "seed": st.integers(0, 99),
        "stop": st.lists(_TEXT, min_size=1, max_size=2),
        "reasoning_effort": st.sampled_from(["low", "medium", "high"]),
        "response_format": st.just(
            {
                "type": "json_schema",
                "json_schema": {"name": "a", "schema": {"type": "object"}, "strict": True},
            }
        ),
    }
    for key, values in dials.items():
        if draw(st.booleans()):
            body[key] = draw(values)
    return body


@given(chat_bodies())
def test_a_chat_body_reads_as_the_request_it_is(body: dict[str, Any]) -> None:
    """Read by the chat reader, a body's request equals the body field by field (the tests'
    own converter), and nothing is left unread."""
    request, unread = _read(wire.OPENAI_CHAT, body)
    assert differences(from_openai(body), from_view(request)) == []
    assert unread == ()
    assert request.provider == "openai"


def test_a_chat_key_no_reader_places_is_named_unread() -> None:
    """A key that may steer the model and that the request cannot hold is named, not dropped."""
    body = {"model": "gpt-4o", "messages": [], "logit_bias": {"1": 5}, "stream": True, "user": "u"}
    assert _read(wire.OPENAI_CHAT, body)[1] == ("logit_bias",)


def test_legacy_functions_are_tools() -> None:
    """A request's legacy ``functions`` are its tools, and ``function_call`` its tool choice."""
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "time?"}],
        "functions": [{"name": "get_time", "parameters": {"type": "object"}}],
        "function_call": {"name": "get_time"},
    }
    request, unread = _read(wire.OPENAI_CHAT, body)
    assert request.tool_names == ("get_time",)
    assert request.forced_tool() == "get_time"
    assert unread == ()


ANTHROPIC_BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 512,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "get_time", "description": "Time now.", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "tool", "name": "get_time", "disable_parallel_tool_use": True},
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "messages": [
        {"role": "user", "content": "Time?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Look it up.", "signature": "c2ln"},
                {"type": "tool_use", "id": "t1", "name": "get_time", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "down", "is_error": True}
            ],
        },
    ],
    "stream": True,
}


def test_an_anthropic_body_reads_as_the_request_it_is() -> None:
    """System blocks, thinking with its signature, tool use and an erroring tool result, forced
    tool with parallel use off and a thinking budget: all read, field by field."""
    request, unread = _read(wire.ANTHROPIC_MESSAGES, ANTHROPIC_BODY)
    assert differences(from_anthropic(ANTHROPIC_BODY), from_view(request)) == []
    assert unread == ()
    assert request.forced_tool() == "get_time"


def test_anthropic_output_config_is_named_unread() -> None:
    """``output_config`` steers the model and has no place in the request: it is named."""
    body = {**ANTHROPIC_BODY, "output_config": {"effort": "low"}}
    assert _read(wire.ANTHROPIC_MESSAGES, body)[1] == ("output_config",)


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"messages": []}', b'{"model": 1}'])
def test_a_body_of_another_shape_is_not_read(body: bytes) -> None:
    """A body that is not a JSON object naming a model is not read from the wire."""
    assert wire.read_body(wire.OPENAI_CHAT, body) is None


RESPONSES_BODY: dict[str, Any] = {
    "model": "o4-mini",
    "instructions": "Answer in one sentence.",
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Oslo?"}]},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Look."}],
            "encrypted_content": "ZW5j",
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Oslo"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "9C, rain"},
    ],
    "tools": [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather.",
            "parameters": {"type": "object"},
            "strict": True,
        }
    ],
    "tool_choice": {"type": "function", "name": "get_weather"},
    "parallel_tool_calls": False,
    "reasoning": {"effort": "low", "summary": "auto"},
    "text": {
        "format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}, "strict": True}
    },
    "max_output_tokens": 300,
    "store": False,
    "stream": True,
    "include": ["reasoning.encrypted_content"],
}


def test_a_responses_body_reads_as_the_request_it_is() -> None:
    """Instructions, every input item kind the agent replays (reasoning with its encrypted
    content, a function call and its output), strict tools and the nested settings: all read,
    item by item, with nothing held on the server."""
    from tests.wire.responses_server import input_items
    from tests.wire.test_responses import _flat, from_seen

    found = wire.read_body(wire.OPENAI_RESPONSES, orjson.dumps(RESPONSES_BODY))
    assert found is not None
    request = Request.from_dict(found.request)
    wire_side = _flat(
        from_seen(input_items(RESPONSES_BODY), RESPONSES_BODY["instructions"], RESPONSES_BODY)
    )
    assert differences(wire_side, _flat(from_view(request))) == []
    assert [t.get("strict") for t in request.tools] == [True]
    assert found.unread == ()
    assert found.held is None


def test_a_continued_responses_body_names_what_the_server_holds() -> None:
    """``previous_response_id`` is the held state the call continues; an unknown nested
    setting is named unread."""
    body = {**RESPONSES_BODY, "previous_response_id": "resp_7", "text": {"verbosity": "low"}}
    found = wire.read_body(wire.OPENAI_RESPONSES, orjson.dumps(body))
    assert found is not None
    assert found.held == "resp_7"
    assert found.unread == ("text.verbosity",)


# -- the record against the wire -------------------------------------------------------------------


def _chat(**extra: Any) -> Request:
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Oslo?"},
        ],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
        "temperature": 0.2,
        **extra,
    }
    return _read(wire.OPENAI_CHAT, body)[0]


def _record(**changes: Any) -> Request:
    """The call as an instrumentation records it: its instructions beside the messages."""
    sent = _chat()
    fields = {
        "system": [{"type": "text", "content": "Be brief."}],
        "messages": [{"role": "user", "parts": [{"type": "text", "content": "Weather in Oslo?"}]}],
        "tools": [dict(t) for t in sent.tools],
        "params": {"temperature": 0.2},
        "model": "gpt-4o",
        "provider": "openai",
    }
    return Request.from_dict({**fields, **changes})


def test_a_faithful_record_does_not_differ_from_the_wire() -> None:
    """Instructions recorded beside the messages rather than among them, and fields the record
    leaves out (a tool's strict flag, a dial): no difference."""
    assert wire_source.record_differs(_record(), _chat()) == ()
    assert wire_source.record_differs(_record(), _chat(seed=7)) == ()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"model": "gpt-4o-mini"}, "model"),
        ({"system": [{"type": "text", "content": "Be"}]}, "instructions"),
        (
            {"messages": [{"role": "user", "parts": [{"type": "text", "content": "Weather"}]}]},
            "messages",
        ),
        ({"messages": []}, None),  # nothing recorded is not a difference
        (
            {
                "tools": [
                    {"type": "function", "name": "get_weather", "parameters": {}, "strict": True}
                ]
            },
            "tools",
        ),
        ({"params": {"temperature": 0.7}}, "params.temperature"),
    ],
)
def test_a_record_that_says_otherwise_names_the_field(
    changes: dict[str, Any], field: str | None
) -> None:
    """A cut text, a tool echoed with a flag the client never sent, another model or dial: the
    field is named; a record that holds no messages at all names none."""
    found = wire_source.record_differs(_record(**changes), _chat())
    assert found == ((field,) if field else ())
