"""The Gemini and Bedrock replay writers (docs/receipt-spec.md §14): a body the writer writes reads
back, through the endpoint's own reader and path, to the request it was written from; a body read
from the wire is rebuilt from its request and its spelling exactly, as RFC 8785 JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import af_otel
from af_otel import wire
from af_otel.canonical import canonical_json
from af_otel.cli import main
from af_otel.model import Request
from af_otel.reader import replay
from af_otel.wire import endpoints, uninstall
from af_otel.wire.endpoints import BY_NAME
from af_otel.wire.spelling import plain
from af_otel.wire.tail import read_sent
from tests.builders import start_attributes
from tests.stacks.test_gb_wire import (
    CONVERSE_BODY,
    CONVERSE_PATH,
    CONVERSE_REQUEST,
    GEMINI_BODY,
    GEMINI_PATH,
    GEMINI_REQUEST,
)

INVOKE_PATH = CONVERSE_PATH.replace(b"/converse", b"/invoke")
INVOKE_BODY: dict[str, Any] = {
    "anthropic_version": "bedrock-2023-05-31",
    "max_tokens": 200,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    ],
    "stream": False,
}  # fmt: skip
VERTEX_PATH = (
    b"/v1beta1/projects/p-1/locations/us-central1/publishers/google/models/gemini-2.5-flash"
    b":streamGenerateContent?alt=sse"
)
SNAKE_BODY: dict[str, Any] = {
    "system_instruction": {"parts": [{"text": "Be brief."}]},
    "contents": [{"parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": "yo"}]}],
    "generation_config": {"max_output_tokens": 20},
    "model": "ignored",
}
VERTEX_ENDPOINT_PATH = (
    b"/v1/projects/123456789012/locations/us-central1/endpoints/4567:generateContent"
)
CASES = [
    (endpoints.GEMINI_GENERATE, GEMINI_BODY, GEMINI_PATH),
    (endpoints.GEMINI_STREAM, SNAKE_BODY, VERTEX_PATH),
    (endpoints.GEMINI_GENERATE, GEMINI_BODY, VERTEX_ENDPOINT_PATH),
    (endpoints.BEDROCK_CONVERSE, CONVERSE_BODY, CONVERSE_PATH),
    (endpoints.BEDROCK_INVOKE, INVOKE_BODY, INVOKE_PATH),
]


def _request(found: Request) -> dict[str, Any]:
    return {
        "system": plain(found.system or ()),
        "messages": plain(found.messages),
        "tools": plain(found.tools or ()),
        "params": plain(found.params),
        "model": found.model,
        "provider": found.provider,
    }


def _reads_back(endpoint: str, request: dict[str, Any]) -> None:
    writer = BY_NAME[endpoint].writer
    assert writer is not None
    assert writer.path is not None
    body, path = writer.body(request), writer.path(request)
    found = wire.read_body(endpoint, orjson.dumps(body), path.encode())
    assert found is not None, (body, path)
    assert (found.unread, found.held) == ((), None)
    back, proven = Request.from_dict(found.request), Request.from_dict(request)
    assert back == proven, (body, path)
    # and the body is the writer's own spelling: read from the wire, nothing is spelled apart
    sent, _ = read_sent(endpoint, orjson.dumps(body), path=path.encode())
    assert sent is not None
    assert sent.spelling is not None
    assert orjson.loads(sent.spelling.data)["items"] == {}, body
    assert orjson.loads(sent.spelling.rest[1]) == {"drop": [], "keys": {}}, body


@pytest.mark.parametrize(
    ("endpoint", "request_"),
    [
        (endpoints.GEMINI_GENERATE, GEMINI_REQUEST),
        (endpoints.GEMINI_STREAM, GEMINI_REQUEST),
        (endpoints.BEDROCK_CONVERSE, CONVERSE_REQUEST),
        (endpoints.BEDROCK_CONVERSE_STREAM, CONVERSE_REQUEST),
    ],
)
def test_a_written_body_reads_back_to_its_request(endpoint: str, request_: Any) -> None:
    _reads_back(endpoint, dict(request_))


_TEXT = st.text(min_size=1, max_size=6)
_ARGS = st.dictionaries(
    st.text(max_size=3), st.integers(-(2**40), 2**40) | st.text(max_size=3), max_size=2
)
_PART = st.one_of(
    st.builds(lambda t: {"type": "text", "content": t}, _TEXT),
    st.builds(lambda t, s: {"type": "reasoning", "content": t, "signature": s}, _TEXT, _TEXT),
    st.builds(
        lambda i, n, a: {"type": "tool_call", "id": i, "name": n, "arguments": a},
        _TEXT,
        _TEXT,
        _ARGS,
    ),
)
_MESSAGES = st.lists(
    st.builds(
        lambda r, p: {"role": r, "parts": p},
        st.sampled_from(["user", "assistant"]),
        st.lists(_PART, min_size=1, max_size=3),
    ),
    max_size=4,
)


@given(_MESSAGES, st.sampled_from([endpoints.GEMINI_GENERATE, endpoints.BEDROCK_CONVERSE]))
def test_any_drawn_request_reads_back(messages: list[Any], endpoint: str) -> None:
    """Drawn messages (texts, reasoning with signatures, tool calls), written and read back, are
    the request they were written from."""
    provider = BY_NAME[endpoint].provider
    model = "gemini-2.5-flash" if provider == "gcp.gemini" else "amazon.nova-lite-v1:0"
    request = {"model": model, "provider": provider, "system": [], "messages": messages}
    _reads_back(endpoint, {**request, "tools": [], "params": {"temperature": 0.5}})


@pytest.mark.parametrize(("endpoint", "body", "path"), CASES, ids=[c[0] for c in CASES])
def test_a_wire_body_is_rebuilt_exactly_from_its_spelling(
    endpoint: str, body: dict[str, Any], path: bytes
) -> None:
    """The body read from the wire, rebuilt from its request and spelling blobs, is the body sent
    as RFC 8785 JSON (snake-case keys, a role left out, cache marks, transport keys kept), and
    the spelling names the path without its query."""
    sent, _ = read_sent(endpoint, orjson.dumps(body), path=path)
    assert sent is not None
    assert sent.spelling is not None
    blob = orjson.loads(sent.spelling.data)
    rest = orjson.loads(sent.spelling.rest[1])
    elements = {int(k): v for k, v in blob["items"].items()}
    request = _request(sent.request)
    rebuilt = replay._spelled(BY_NAME[endpoint], request, blob, rest, elements)
    assert canonical_json(rebuilt) == canonical_json(body)
    assert blob["path"] == path.split(b"?")[0].decode()
    if body is not SNAKE_BODY:  # the writer's own spelling is the client's: no element as sent
        assert blob["items"] == {}, blob["items"]
    assert replay._path(BY_NAME[endpoint], request, (blob,)).encode() == path


def test_the_path_without_a_spelling_is_the_writers() -> None:
    """Without a spelling the path is written from the model: Vertex AI's project and location,
    which the record does not hold, are left as placeholders; Bedrock's model id quoted."""
    gemini = BY_NAME[endpoints.GEMINI_GENERATE]
    vertex = {"model": "gemini-2.5-flash", "provider": "gcp.vertex_ai"}
    assert replay._path(gemini, vertex, None) == (
        "/v1beta1/projects/{project}/locations/{location}/publishers/google/models/"
        "gemini-2.5-flash:generateContent"
    )
    converse = BY_NAME[endpoints.BEDROCK_CONVERSE]
    assert replay._path(converse, CONVERSE_REQUEST, None).encode() == CONVERSE_PATH


def test_a_vertex_endpoints_path_is_its_resource_name() -> None:
    """A call to a Vertex AI endpoint (a tuned model) is written to the endpoint's resource name,
    which holds its project and location, and reads back to the same model."""
    model = "projects/123456789012/locations/europe-west4/endpoints/4567"
    request = {**GEMINI_REQUEST, "model": model, "provider": "gcp.vertex_ai"}
    stream = BY_NAME[endpoints.GEMINI_STREAM]
    assert replay._path(stream, request, None) == f"/v1beta1/{model}:streamGenerateContent?alt=sse"
    _reads_back(endpoints.GEMINI_STREAM, request)


def test_a_setting_no_key_spells_is_refused() -> None:
    writer = BY_NAME[endpoints.BEDROCK_CONVERSE].writer
    assert writer is not None
    with pytest.raises(Exception, match="no key for"):
        writer.body({**CONVERSE_REQUEST, "params": {"seed": 3}})


def test_served_request_names_the_path_beside_the_body(tmp_path: Path, capsys: Any) -> None:
    """A Gemini call and a Bedrock Converse call sent through httpx2 under GenAI spans, minted from
    the wire: ``served --request`` prints each body as sent and names on standard error the path
    it goes to, the query (which may hold a key) left out but the stream's ``alt=sse`` kept."""
    provider = TracerProvider()
    processor = af_otel.ReceiptSpanProcessor(
        SimpleSpanProcessor(FileSpanExporter(tmp_path / "trace.jsonl")),
        store=tmp_path / "store",
        wire=True,
    )
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("app")
    http = httpx2.Client(transport=httpx2.MockTransport(lambda _: httpx2.Response(200, json={})))
    gemini_path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=sk-secret"
    calls = [
        ("gemini-2.5-flash", "gcp.gemini", gemini_path, SNAKE_BODY),
        (CONVERSE_REQUEST["model"], "aws.bedrock", CONVERSE_PATH.decode(), CONVERSE_BODY),
    ]
    try:
        for model, name, path, body in calls:
            with tracer.start_as_current_span("chat", attributes=start_attributes(model, name)):
                http.post(f"http://127.0.0.1{path}", content=orjson.dumps(body))
    finally:
        provider.shutdown()
        uninstall()
    code = main(
        ["served", str(tmp_path / "trace.jsonl"), "--store", str(tmp_path / "store"), "--request"]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    printed = [canonical_json(orjson.loads(line)) for line in out.out.splitlines()]
    assert printed == [canonical_json(body) for *_, body in calls]
    assert out.err.splitlines() == [
        "af-otel served --request: span " + f"{view.span_id}: POST {where} ({endpoint})"
        for view, where, endpoint in zip(
            af_otel.served_views(
                list(af_otel.read_spans(tmp_path / "trace.jsonl")), store=tmp_path / "store"
            ),
            [
                "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
                CONVERSE_PATH.decode(),
            ],
            [endpoints.GEMINI_STREAM, endpoints.BEDROCK_CONVERSE],
            strict=True,
        )
    ]
    assert "sk-secret" not in out.err


def _key(camel: str, snake: str) -> st.SearchStrategy[str]:
    return st.sampled_from([camel, snake])


_GEMINI_PART = st.one_of(
    st.builds(lambda t: {"text": t}, _TEXT),
    st.builds(lambda t, b: {"text": t, "thought": b}, _TEXT, st.booleans()),
    st.builds(
        lambda k, n, a, i: {k: {"name": n, "args": a, **i}},
        _key("functionCall", "function_call"),
        _TEXT,
        _ARGS,
        st.sampled_from([{}, {"id": "c1"}]),
    ),
    st.builds(lambda n, a: {"functionResponse": {"name": n, "response": a}}, _TEXT, _ARGS),
    st.builds(
        lambda k, m: {"inlineData": {k: m, "data": "iVBO"}},
        _key("mimeType", "mime_type"),
        st.sampled_from(["image/png", "audio/wav"]),
    ),
)
_GEMINI_BODY = st.builds(
    lambda contents, config, extra: {"contents": contents, **config, **extra},
    st.lists(
        st.builds(
            lambda role, parts: {**role, "parts": parts},
            st.sampled_from([{}, {"role": "user"}, {"role": "model"}]),
            st.lists(_GEMINI_PART, min_size=1, max_size=3),
        ),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from([{}, {"generationConfig": {"temperature": 0.5}}, {"generation_config": {}}]),
    st.sampled_from([{}, {"labels": {"team": "a"}}]),
)
_CONVERSE_BLOCK = st.one_of(
    st.builds(lambda t: {"text": t}, _TEXT),
    st.just({"cachePoint": {"type": "default"}}),
    st.builds(
        lambda i, n, a: {"toolUse": {"toolUseId": i, "name": n, "input": a}}, _TEXT, _TEXT, _ARGS
    ),
    st.builds(
        lambda i, t, s: {"toolResult": {"toolUseId": i, "content": [{"text": t}], **s}},
        _TEXT,
        _TEXT,
        st.sampled_from([{}, {"status": "error"}, {"status": "success"}]),
    ),
)
_CONVERSE_BODY = st.builds(
    lambda messages, system, extra: {"messages": messages, **system, **extra},
    st.lists(
        st.builds(
            lambda role, content: {"role": role, "content": content},
            st.sampled_from(["user", "assistant"]),
            st.lists(_CONVERSE_BLOCK, min_size=1, max_size=3),
        ),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from([{}, {"system": [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}]}]),
    st.sampled_from([{}, {"inferenceConfig": {"maxTokens": 9}}, {"requestMetadata": {"a": "b"}}]),
)


@given(
    st.one_of(
        st.tuples(st.just(endpoints.GEMINI_STREAM), _GEMINI_BODY, st.just(VERTEX_PATH)),
        st.tuples(st.just(endpoints.BEDROCK_CONVERSE), _CONVERSE_BODY, st.just(CONVERSE_PATH)),
    )
)
def test_any_drawn_wire_body_is_rebuilt_exactly(case: tuple[str, dict[str, Any], bytes]) -> None:
    """Drawn bodies in either key spelling, roles left out, thoughts marked false, call ids present
    or not, cache points and bookkeeping keys: rebuilt from request and spelling, each is the body
    sent (RFC 8785), and the rebuilt body reads back to the request."""
    endpoint, body, path = case
    sent, _ = read_sent(endpoint, orjson.dumps(body), path=path)
    assert sent is not None
    assert sent.spelling is not None
    blob = orjson.loads(sent.spelling.data)
    elements = {int(k): v for k, v in blob["items"].items()}
    request = _request(sent.request)
    found = BY_NAME[endpoint]
    rebuilt = replay._spelled(found, request, blob, orjson.loads(sent.spelling.rest[1]), elements)
    assert canonical_json(rebuilt) == canonical_json(body)
    replay._reads_back(found, rebuilt, request, replay._path(found, request, (blob,)), "drawn")
