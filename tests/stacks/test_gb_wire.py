"""The Gemini and Bedrock wire readers, the botocore tap's handler and the provider hosts: each
body read into the request it is, every key the reader cannot place named, nothing raised."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from af_otel import semconv, wire
from af_otel.model import Request
from af_otel.processor.wire_source import record_differs
from af_otel.semconv import ledger
from af_otel.wire import botocore_tap, endpoints
from af_otel.wire.gemini import names_model
from af_otel.wire.hosts import provider_host

GEMINI_PATH = b"/v1beta/models/gemini-2.5-flash:generateContent"
CONVERSE_PATH = b"/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"
GEMINI_BODY: dict[str, Any] = {
    "systemInstruction": {"role": "user", "parts": [{"text": "Be brief."}]},
    "contents": [
        {"role": "user", "parts": [{"text": "Weather?"}, {"inlineData": {"mimeType": "image/png", "data": "iVBO"}}]},
        {
            "role": "model",
            "parts": [
                {"text": "Let me think.", "thought": True, "thoughtSignature": "c2ln"},
                {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}, "thoughtSignature": "c2lnMg"},
            ],
        },
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"result": "12C"}}}]},
    ],
    "tools": [
        {"functionDeclarations": [{"name": "get_weather", "description": "Weather.", "parameters_json_schema": {"type": "object"}}]},
        {"googleSearch": {}},
    ],
    "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}},
    "generationConfig": {
        "temperature": 0.2,
        "topP": 0.9,
        "topK": 4,
        "maxOutputTokens": 300,
        "stopSequences": ["END"],
        "seed": 7,
        "candidateCount": 2,
        "thinkingConfig": {"thinkingBudget": 512, "includeThoughts": True},
        "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object"},
    },
}  # fmt: skip
GEMINI_REQUEST: dict[str, Any] = {
    "model": "gemini-2.5-flash",
    "provider": "gcp.gemini",
    "system": [{"type": "text", "content": "Be brief."}],
    "messages": [
        {"role": "user", "parts": [
            {"type": "text", "content": "Weather?"},
            {"type": "blob", "mime_type": "image/png", "modality": "image", "content": "iVBO"},
        ]},
        {"role": "assistant", "parts": [
            {"type": "reasoning", "content": "Let me think.", "signature": "c2ln"},
            {"type": "tool_call", "name": "get_weather", "arguments": {"city": "Oslo"}, "signature": "c2lnMg"},
        ]},
        {"role": "user", "parts": [
            {"type": "tool_call_response", "name": "get_weather", "response": {"result": "12C"}},
        ]},
    ],
    "tools": [
        {"type": "function", "name": "get_weather", "description": "Weather.", "parameters": {"type": "object"}},
        {"type": "googleSearch", "name": "googleSearch"},
    ],
    "params": {
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 4,
        "max_tokens": 300,
        "stop_sequences": ["END"],
        "seed": 7,
        "choice_count": 2,
        "thinking": {"thinkingBudget": 512, "includeThoughts": True},
        "response_format": {"responseMimeType": "application/json", "responseJsonSchema": {"type": "object"}},
        "tool_choice": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]},
    },
}  # fmt: skip


def _read(endpoint: str, body: dict[str, Any], path: bytes) -> wire.WireRead:
    found = wire.read_body(endpoint, orjson.dumps(body), path)
    assert found is not None
    return found


def test_a_gemini_body_reads_as_the_request_it_is() -> None:
    """Every part, tool and setting of a generateContent body lands in its place, the model is the
    path's, and nothing is left unread."""
    found = _read(endpoints.GEMINI_GENERATE, GEMINI_BODY, GEMINI_PATH)
    assert Request.from_dict(found.request) == Request.from_dict(GEMINI_REQUEST)
    assert found.unread == ()
    assert found.held is None


def test_gemini_settings_the_request_has_no_place_for_are_named_unread() -> None:
    """Safety settings, other generation settings and the retrieval config are named."""
    body = {
        **GEMINI_BODY,
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        "generationConfig": {"temperature": 0.1, "responseModalities": ["TEXT"]},
        "toolConfig": {"retrievalConfig": {"languageCode": "en"}},
        "labels": {"team": "a"},
    }
    found = _read(endpoints.GEMINI_STREAM, body, GEMINI_PATH)
    assert found.unread == (
        "generationConfig.responseModalities",
        "safetySettings",
        "toolConfig.retrievalConfig",
    )


def test_cached_content_is_history_the_server_holds() -> None:
    found = _read(
        endpoints.GEMINI_GENERATE, {**GEMINI_BODY, "cachedContent": "cachedContents/1"}, GEMINI_PATH
    )
    assert found.held == "cachedContent cachedContents/1"


def test_snake_case_keys_read_as_the_api_reads_them() -> None:
    """The API takes proto field names in either spelling, so the reader does."""
    body = {
        "system_instruction": {"parts": [{"text": "Be brief."}]},
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generation_config": {"max_output_tokens": 5},
    }
    found = _read(endpoints.GEMINI_GENERATE, body, GEMINI_PATH)
    request = Request.from_dict(found.request)
    assert request.params == {"max_tokens": 5}
    assert request.system == ({"type": "text", "content": "Be brief."},)
    assert found.unread == ()


@pytest.mark.parametrize(
    ("path", "model", "provider"),
    [
        (b"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini-2.5-flash", "gcp.gemini"),
        (b"/v1beta/tunedModels/my-model:generateContent", "my-model", "gcp.gemini"),
        (b"/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent",
         "gemini-2.0-flash", "gcp.vertex_ai"),
        (b"/v1beta1/projects/123456789012/locations/global/publishers/google/models/gemini-2.5-pro"
         b":streamGenerateContent?alt=sse", "gemini-2.5-pro", "gcp.vertex_ai"),
        (b"/v1/projects/123456789012/locations/us-central1/endpoints/4567:generateContent",
         "projects/123456789012/locations/us-central1/endpoints/4567", "gcp.vertex_ai"),
        (b"/v1beta1/projects/p-1/locations/europe-west4/endpoints/openapi%2Dx:streamGenerateContent",
         "projects/p-1/locations/europe-west4/endpoints/openapi-x", "gcp.vertex_ai"),
    ],
)  # fmt: skip
def test_the_model_and_provider_are_the_paths(path: bytes, model: str, provider: str) -> None:
    endpoint = wire.endpoint_of(path)
    assert endpoint in (endpoints.GEMINI_GENERATE, endpoints.GEMINI_STREAM)
    request = _read(endpoint, {"contents": []}, path).request
    assert (request["model"], request["provider"]) == (model, provider)


@pytest.mark.parametrize(
    "path",
    [
        b"/v1/projects/p/locations/us-central1/endpoints/:generateContent",
        b"/v1/projects/p/endpoints/4567:generateContent",
        b"/v1/projects/p/locations/l/endpoints/4567/deployedModels/1:generateContent",
        b"/v1/projects/p/locations/l/publishers/google/models/:generateContent",
    ],
)
def test_a_vertex_path_naming_no_model_is_not_read(path: bytes) -> None:
    """A path of Vertex AI's shape that names no model (or names more than an endpoint) is no
    request the reader can name a model for: the call keeps the record."""
    endpoint = wire.endpoint_of(path)
    assert endpoint == endpoints.GEMINI_GENERATE
    assert wire.read_body(endpoint, orjson.dumps(GEMINI_BODY), path) is None


@pytest.mark.parametrize(
    ("recorded", "named"),
    [
        ("gemini-2.5-flash", True),
        ("google/gemini-2.5-flash", True),
        ("publishers/google/models/gemini-2.5-flash", True),
        ("projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash", True),
        ("gemini-2.5-pro", False),
        ("publishers/google/gemini-2.5-flash", False),
        ("projects/p/locations/l/endpoints/gemini-2.5-flash", False),
    ],
)
def test_a_vertex_model_recorded_by_its_resource_name_is_the_paths(
    recorded: str, named: bool
) -> None:
    """The names google-genai takes for a Vertex AI publisher model all name the path's model,
    so the record does not differ from the wire on ``model``; another name does."""
    path = b"/v1beta1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent"
    sent = Request.from_dict(_read(endpoints.GEMINI_GENERATE, GEMINI_BODY, path).request)
    assert names_model(recorded, sent) is named
    assert (
        "model" in record_differs(Request.from_dict({**GEMINI_REQUEST, "model": recorded}), sent)
    ) is not named


def test_only_a_vertex_model_is_named_by_resource() -> None:
    """On the Gemini API (and any other provider) the record names the model only as sent."""
    sent = Request.from_dict(_read(endpoints.GEMINI_GENERATE, GEMINI_BODY, GEMINI_PATH).request)
    assert names_model("gemini-2.5-flash", sent)
    assert not names_model("publishers/google/models/gemini-2.5-flash", sent)
    endpoint = b"/v1/projects/p/locations/l/endpoints/4567:generateContent"
    tuned = Request.from_dict(_read(endpoints.GEMINI_GENERATE, GEMINI_BODY, endpoint).request)
    assert names_model("projects/p/locations/l/endpoints/4567", tuned)
    assert not names_model("4567", tuned)


CONVERSE_BODY: dict[str, Any] = {
    "system": [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}],
    "messages": [
        {"role": "user", "content": [{"text": "Weather?"}]},
        {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "Look.", "signature": "c2ln"}}},
            {"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {"city": "Oslo"}}},
        ]},
        {"role": "user", "content": [
            {"toolResult": {"toolUseId": "t1", "content": [{"text": "down"}], "status": "error"}},
        ]},
    ],
    "toolConfig": {
        "tools": [
            {"toolSpec": {"name": "get_weather", "description": "Weather.", "inputSchema": {"json": {"type": "object"}}}},
            {"cachePoint": {"type": "default"}},
        ],
        "toolChoice": {"tool": {"name": "get_weather"}},
    },
    "inferenceConfig": {"maxTokens": 300, "temperature": 0.2, "topP": 0.9, "stopSequences": ["END"]},
    "additionalModelRequestFields": {"top_k": 5, "thinking": {"type": "enabled", "budget_tokens": 1024}},
    "requestMetadata": {"team": "a"},
}  # fmt: skip
CONVERSE_REQUEST: dict[str, Any] = {
    "model": "anthropic.claude-3-5-sonnet-20240620-v1:0",
    "provider": "aws.bedrock",
    "system": [{"type": "text", "content": "Be brief."}],
    "messages": [
        {"role": "user", "parts": [{"type": "text", "content": "Weather?"}]},
        {"role": "assistant", "parts": [
            {"type": "reasoning", "content": "Look.", "signature": "c2ln"},
            {"type": "tool_call", "id": "t1", "name": "get_weather", "arguments": {"city": "Oslo"}},
        ]},
        {"role": "user", "parts": [
            {"type": "tool_call_response", "id": "t1", "response": [{"text": "down"}], "is_error": True},
        ]},
    ],
    "tools": [{"type": "function", "name": "get_weather", "description": "Weather.", "parameters": {"type": "object"}}],
    "params": {
        "max_tokens": 300,
        "temperature": 0.2,
        "top_p": 0.9,
        "stop_sequences": ["END"],
        "top_k": 5,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tool_choice": {"tool": {"name": "get_weather"}},
    },
}  # fmt: skip


def test_a_converse_body_reads_as_the_request_it_is() -> None:
    """Messages, system, tools, tool choice and every dial land in place; cache points and request
    metadata show the model nothing and are dropped."""
    found = _read(endpoints.BEDROCK_CONVERSE, CONVERSE_BODY, CONVERSE_PATH)
    assert Request.from_dict(found.request) == Request.from_dict(CONVERSE_REQUEST)
    assert found.unread == ()


def test_converse_settings_without_a_place_are_named_unread() -> None:
    body = {
        **CONVERSE_BODY,
        "additionalModelRequestFields": {"anthropic_beta": ["x"]},
        "guardrailConfig": {"guardrailIdentifier": "g", "guardrailVersion": "1"},
        "promptVariables": {"city": {"text": "Oslo"}},
    }
    found = _read(endpoints.BEDROCK_CONVERSE_STREAM, body, CONVERSE_PATH)
    assert found.unread == (
        "additionalModelRequestFields.anthropic_beta",
        "guardrailConfig",
        "promptVariables",
    )


def test_an_anthropic_invoke_body_reads_as_the_messages_api() -> None:
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 200,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "hi"}],
    }
    path = CONVERSE_PATH.replace(b"/converse", b"/invoke")
    found = _read(endpoints.BEDROCK_INVOKE, body, path)
    request = Request.from_dict(found.request)
    assert request.model == "anthropic.claude-3-5-sonnet-20240620-v1:0"
    assert request.provider == "aws.bedrock"
    assert request.params == {"max_tokens": 200}
    assert found.unread == ()


def test_another_model_familys_invoke_body_is_not_read() -> None:
    """An InvokeModel body of another family (Titan, Llama) is not read: its call keeps the record."""
    path = CONVERSE_PATH.replace(b"/converse", b"/invoke")
    assert wire.read_body(endpoints.BEDROCK_INVOKE, b'{"inputText": "hi"}', path) is None


def test_an_invoke_path_outside_bedrocks_shape_is_no_endpoint() -> None:
    assert wire.endpoint_of(b"/chain/invoke") is None
    assert wire.endpoint_of(b"/model/m/invoke") == endpoints.BEDROCK_INVOKE


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_KEYS = st.sampled_from(
    ["contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "messages",
     "system", "toolConfig", "inferenceConfig", "additionalModelRequestFields", "anthropic_version"]
)  # fmt: skip


@given(st.dictionaries(_KEYS, _JSON, max_size=5), st.sampled_from(sorted(endpoints.PATH_MODEL)))
def test_no_body_makes_a_reader_raise(body: dict[str, Any], endpoint: str) -> None:
    """Whatever the body, a reader gives a request or None; it never raises."""
    path = GEMINI_PATH if endpoint.startswith("gemini") else CONVERSE_PATH
    found = wire.read_body(endpoint, orjson.dumps(body), path)
    assert found is None or isinstance(found, wire.WireRead)


@pytest.mark.parametrize(
    ("provider", "host", "own"),
    [
        ("gcp.gemini", "generativelanguage.googleapis.com", True),
        ("gcp.vertex_ai", "us-central1-aiplatform.googleapis.com", True),
        ("gcp.vertex_ai", "aiplatform.googleapis.com", True),
        ("aws.bedrock", "bedrock-runtime.eu-west-1.amazonaws.com", True),
        ("aws.bedrock", "bedrock-runtime-fips.us-east-1.amazonaws.com", True),
        ("aws.bedrock", "bedrock-runtime.us-east-1.amazonaws.com.evil.example", False),
        ("aws.bedrock", "127.0.0.1", False),
        ("gcp.gemini", "gateway.example.com", False),
        ("openai", "generativelanguage.googleapis.com", False),
    ],
)
def test_provider_hosts(provider: str, host: str, own: bool) -> None:
    """The provider's own endpoints, and nothing that merely contains their name."""
    assert provider_host(provider, host) is own


# -- the botocore tap's handler --------------------------------------------------------------------


class _Request:
    """What botocore hands a before-send handler: method, URL and body (an AWSPreparedRequest's
    attributes); its headers raise, to show the handler never reads them."""

    def __init__(self, method: str, url: str, body: Any) -> None:
        self.method, self.url, self.body = method, url, body

    @property
    def headers(self) -> Any:
        raise AssertionError("the tap read a header")


def _kept(request: Any) -> list[tuple[str, str, bytes, bytes]]:
    kept: list[tuple[str, str, bytes, bytes]] = []
    botocore_tap._keep = lambda *args: kept.append(args)
    try:
        assert botocore_tap.on_send(request=request) is None  # a value would stop botocore's send
    finally:
        botocore_tap._keep = None
    return kept


def test_the_botocore_handler_keeps_a_bedrock_call_and_nothing_else() -> None:
    url = "https://bedrock-runtime.us-east-1.amazonaws.com" + CONVERSE_PATH.decode()
    body = orjson.dumps(CONVERSE_BODY)
    assert _kept(_Request("POST", url, body)) == [
        (endpoints.BEDROCK_CONVERSE, "bedrock-runtime.us-east-1.amazonaws.com", body, CONVERSE_PATH)
    ]
    assert _kept(_Request("POST", url, body.decode())) != []  # a str body is the same bytes
    assert _kept(_Request("GET", url, body)) == []
    assert (
        _kept(
            _Request(
                "POST", "https://bedrock-runtime.us-east-1.amazonaws.com/foundation-models", body
            )
        )
        == []
    )
    assert _kept(SimpleNamespace(method="POST", url=url, body=iter([body]))) == []  # a stream


@given(st.one_of(st.none(), st.integers(), st.text(), st.builds(SimpleNamespace)))
def test_the_botocore_handler_never_raises(request: Any) -> None:
    assert _kept(request) == []


# -- the google-genai convention -------------------------------------------------------------------

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "google_genai_span.json"


def _span() -> dict[str, Any]:
    loaded: dict[str, Any] = orjson.loads(FIXTURE.read_bytes())
    return loaded


def test_google_genai_ids_it_invented_are_left_out_and_named() -> None:
    """A real span of the instrumentation: its invented ids (``get_weather_0``) are not the
    request's, so they are left out, and the ledger names the ids and the names it lacks."""
    span = _span()
    adapted = semconv.adapt(span["attributes"], span["name"])
    assert adapted.convention == "google-genai"
    assert adapted.request is not None
    request = Request.from_dict(adapted.request)
    paired = [
        p
        for m in request.messages
        for p in m["parts"]
        if p["type"] in ("tool_call", "tool_call_response")
    ]
    assert paired
    assert all("id" not in p for p in paired)
    missing = ledger.unrecorded(request, span["scope"], adapted.convention, adapted.notes)
    assert {"tool_call.id", "tool_result.name"} <= set(missing)
    assert "temperature" not in missing  # it records the dials


def test_an_id_the_request_set_is_kept() -> None:
    """An id of another shape is the caller's own (the API echoes it back): it stays."""
    span = _span()
    messages = orjson.loads(span["attributes"]["gen_ai.input.messages"])
    for message in messages:
        for part in message["parts"]:
            if part["type"] in ("tool_call", "tool_call_response"):
                part["id"] = "call-from-caller"
    attributes = {**span["attributes"], "gen_ai.input.messages": orjson.dumps(messages).decode()}
    adapted = semconv.adapt(attributes, span["name"])
    assert adapted.request is not None
    ids = {p.get("id") for m in adapted.request["messages"] for p in m["parts"]}
    assert "call-from-caller" in ids
