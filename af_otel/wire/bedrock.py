"""Amazon Bedrock ``Converse`` / ``ConverseStream`` (``POST /model/{modelId}/converse[-stream]``)
and ``InvokeModel`` with an Anthropic Messages body (``POST /model/{modelId}/invoke[-with-response-
stream]``) read into the normalized request.

The model is the path's (URL-decoded: ``anthropic.claude-...-v1:0``, an inference profile or an
ARN). Converse: ``system`` blocks are the system, each message's content blocks its parts:
``text``, ``toolUse`` as ``tool_call`` (its ``input`` the arguments), ``toolResult`` as
``tool_call_response`` (its content blocks the response, ``status: "error"`` as ``is_error``),
``reasoningContent`` as ``reasoning`` (text and signature; redacted content kept as sent);
images, documents, videos and guard content are kept as sent, and ``cachePoint`` marks (caching
advice) are dropped. ``toolConfig.tools`` are tools (``toolSpec`` lifted, its ``inputSchema.json``
the parameters), ``toolConfig.toolChoice`` the ``tool_choice``; ``inferenceConfig`` holds the
sampling dials; ``additionalModelRequestFields`` may hold ``top_k`` and ``thinking`` (placed), any
other key there is named unread, as are ``guardrailConfig``, ``promptVariables`` and
``performanceConfig``. InvokeModel's Anthropic body is read by the Anthropic Messages reader;
``anthropic_version`` says which API version the body is, not what the model sees.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote, unquote

from af_otel.wire import anthropic_messages
from af_otel.wire.endpoint import Endpoint, Unwritable, Writer
from af_otel.wire.shapes import WireRead, unread

PROVIDER: Final = "aws.bedrock"
INFERENCE: Final = {
    "maxTokens": "max_tokens",
    "temperature": "temperature",
    "topP": "top_p",
    "stopSequences": "stop_sequences",
}
# additionalModelRequestFields keys the normalized request has (Anthropic's and others' spelling).
ADDITIONAL: Final = {"top_k": "top_k", "topK": "top_k", "thinking": "thinking"}
PLACED: Final = frozenset(
    {"messages", "system", "toolConfig", "inferenceConfig", "additionalModelRequestFields"}
)
# What shows the model nothing: bookkeeping, which response fields come back, the service tier.
DROPPED: Final = frozenset(
    {"requestMetadata", "additionalModelResponseFieldPaths", "serviceTier", "modelId"}
)
_DROPPED_BLOCKS: Final = frozenset({"cachePoint"})


def model_of(path: bytes) -> str | None:
    """The model id a ``/model/{modelId}/<operation>`` path names, URL-decoded."""
    text = path.split(b"?", 1)[0].decode("latin-1")
    at = text.find("/model/")
    if at < 0:
        return None
    name, slash, _ = text[at + len("/model/") :].rpartition("/")
    return unquote(name) if slash and name else None


def _block(raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        return raw
    if isinstance(raw.get("text"), str):
        return {"type": "text", "content": raw["text"], **_rest(raw, "text")}
    if isinstance(use := raw.get("toolUse"), Mapping):
        part = {"type": "tool_call", "id": use.get("toolUseId"), "name": use.get("name")}
        return {
            **part,
            "arguments": use.get("input"),
            **_beyond(use, {"toolUseId", "name", "input"}),
        }
    if isinstance(result := raw.get("toolResult"), Mapping):
        part = {"type": "tool_call_response", "id": result.get("toolUseId")}
        part["response"] = result.get("content")
        if result.get("status") == "error":
            part["is_error"] = True
        return {**part, **_beyond(result, {"toolUseId", "content", "status"})}
    if isinstance(thought := raw.get("reasoningContent"), Mapping):
        text = thought.get("reasoningText")
        if isinstance(text, Mapping):
            part = {"type": "reasoning", "content": text.get("text", "")}
            return {**part, **_beyond(text, {"text"}), **_beyond(thought, {"reasoningText"})}
    # image, document, video, guardContent, redacted reasoning, ...: the block's key is its type.
    kind = next(iter(raw), "block")
    return {"type": kind, **raw}


def _rest(raw: Mapping[str, Any], known: str) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k != known}


def _beyond(inner: Mapping[str, Any], known: set[str]) -> dict[str, Any]:
    return {k: v for k, v in inner.items() if k not in known}


def _blocks(raw: Any) -> list[Any]:
    return [
        _block(b)
        for b in raw or ()
        if not (isinstance(b, Mapping) and _DROPPED_BLOCKS.intersection(b))
    ]


def _tool(raw: Mapping[str, Any]) -> dict[str, Any] | None:
    spec = raw.get("toolSpec")
    if not isinstance(spec, Mapping):
        return None if _DROPPED_BLOCKS.intersection(raw) else {"type": next(iter(raw)), **raw}
    tool = {"type": "function", **_beyond(spec, {"inputSchema"})}
    schema = spec.get("inputSchema")
    if isinstance(schema, Mapping):
        tool["parameters"] = schema.get("json")
        tool.update(_beyond(schema, {"json"}))
    return tool


def read_converse(body: Mapping[str, Any], model: str) -> WireRead:
    loose: list[str] = []
    params: dict[str, Any] = {}
    inference = body.get("inferenceConfig")
    if isinstance(inference, Mapping):
        params = {INFERENCE[k]: v for k, v in inference.items() if k in INFERENCE}
        loose += [f"inferenceConfig.{k}" for k, v in inference.items() if k not in INFERENCE]
    extra = body.get("additionalModelRequestFields")
    if isinstance(extra, Mapping):
        params |= {ADDITIONAL[k]: v for k, v in extra.items() if k in ADDITIONAL}
        loose += [
            f"additionalModelRequestFields.{k}"
            for k, v in extra.items()
            if k not in ADDITIONAL and v is not None
        ]
    tools: list[dict[str, Any]] = []
    config = body.get("toolConfig")
    if isinstance(config, Mapping):
        tools = [t for t in map(_tool, config.get("tools") or ()) if t is not None]
        if config.get("toolChoice") is not None:
            params["tool_choice"] = config["toolChoice"]
        loose += [f"toolConfig.{k}" for k in config if k not in ("tools", "toolChoice")]
    request = {
        "model": model,
        "provider": PROVIDER,
        "system": _blocks(body.get("system")),
        "messages": [
            {"role": m["role"], "parts": _blocks(m.get("content"))}
            for m in body.get("messages") or ()
        ],
        "tools": tools,
        "params": params,
    }
    return WireRead(request, tuple(sorted({*unread(body, PLACED, DROPPED), *loose})))


def read_invoke(body: Mapping[str, Any], model: str) -> WireRead | None:
    """An InvokeModel body in Anthropic's Messages shape (``anthropic_version`` and
    ``messages``); another model family's body is not read (its call keeps the record)."""
    if "anthropic_version" not in body or not isinstance(body.get("messages"), list):
        return None
    plain = {k: v for k, v in body.items() if k != "anthropic_version"}
    found = anthropic_messages.read({**plain, "model": model})
    request = {**found.request, "provider": PROVIDER}
    return WireRead(request, found.unread, found.held)


def read_converse_path(body: Mapping[str, Any], path: bytes) -> WireRead | None:
    model = model_of(path)
    return None if model is None else read_converse(body, model)


def read_invoke_path(body: Mapping[str, Any], path: bytes) -> WireRead | None:
    model = model_of(path)
    return None if model is None else read_invoke(body, model)


# -- the writers: the inverses of the readers (docs/receipt-spec.md §14) --------------------------

ITEMS: Final = "messages"
ANTHROPIC_VERSION: Final = "bedrock-2023-05-31"  # the version Bedrock's Messages bodies name
_WRITE_INFERENCE: Final = {target: key for key, target in INFERENCE.items()}
_WRITE_ADDITIONAL: Final = {"top_k": "top_k", "thinking": "thinking"}


def _write_block(part: Mapping[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind == "text":
        return {"text": part.get("content", ""), **_beyond(part, {"type", "content"})}
    if kind == "tool_call":
        use = {
            "toolUseId": part.get("id"),
            "name": part.get("name"),
            "input": part.get("arguments"),
        }
        return {"toolUse": use | _beyond(part, {"type", "id", "name", "arguments"})}
    if kind == "tool_call_response":
        result = {"toolUseId": part.get("id"), "content": part.get("response")}
        if part.get("is_error"):
            result["status"] = "error"
        return {"toolResult": result | _beyond(part, {"type", "id", "response", "is_error"})}
    if kind == "reasoning":
        text = {"text": part.get("content", ""), **_beyond(part, {"type", "content"})}
        return {"reasoningContent": {"reasoningText": text}}
    return _beyond(part, {"type"})  # a block kept as sent: its key is its type


def write_elements(message: Mapping[str, Any]) -> list[Any]:
    """One normalized message as the one Converse message it reads from."""
    return [{"role": message["role"], "content": [_write_block(p) for p in message["parts"]]}]


def _write_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    if tool.get("type", "function") != "function":
        return _beyond(tool, {"type"})
    spec = _beyond(tool, {"type", "parameters"})
    if "parameters" in tool:
        spec["inputSchema"] = {"json": tool["parameters"]}
    return {"toolSpec": spec}


def write_converse(request: Mapping[str, Any]) -> dict[str, Any]:
    """Every member of a Converse body but ``messages`` (the model is the path's)."""
    params = dict(request.get("params") or {})
    body: dict[str, Any] = {}
    if request.get("system"):
        body["system"] = [_write_block(p) for p in request["system"]]
    config: dict[str, Any] = {}
    if request.get("tools"):
        config["tools"] = [_write_tool(t) for t in request["tools"]]
    if "tool_choice" in params:
        config["toolChoice"] = params.pop("tool_choice")
    left = set(params) - set(_WRITE_INFERENCE) - set(_WRITE_ADDITIONAL)
    if left:
        raise Unwritable(f"settings a Converse request has no key for: {sorted(left)}")
    inference = {_WRITE_INFERENCE[k]: v for k, v in params.items() if k in _WRITE_INFERENCE}
    extra = {_WRITE_ADDITIONAL[k]: v for k, v in params.items() if k in _WRITE_ADDITIONAL}
    for key, value in (
        ("inferenceConfig", inference),
        ("toolConfig", config),
        ("additionalModelRequestFields", extra),
    ):
        if value:
            body[key] = value
    return body


def write_invoke(request: Mapping[str, Any]) -> dict[str, Any]:
    """Every member of an InvokeModel Anthropic body but ``messages``: the Messages writer's, the
    model left to the path, the Bedrock ``anthropic_version`` named."""
    body = anthropic_messages.write_rest(request)
    body.pop("model", None)
    return {"anthropic_version": ANTHROPIC_VERSION, **body}


def _path(operation: str) -> Any:
    def write_path(request: Mapping[str, Any]) -> str:
        """The path the body goes to: the model id quoted as the AWS clients quote it."""
        return f"/model/{quote(str(request.get('model')), safe='')}/{operation}"

    return write_path


HOSTS: Final = {
    PROVIDER: re.compile(r"bedrock-runtime(?:-fips)?\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?"),
}


def _endpoint(name: str, ending: bytes, read: Any, rest: Any) -> Endpoint:
    # ``/model/{modelId}/<operation>``: an ending alone (``/invoke``) is too common a path.
    elements = write_elements if rest is write_converse else anthropic_messages.write_elements
    writer = Writer(ITEMS, elements, rest, path=_path(ending.decode()[1:]))
    return Endpoint(
        name, (ending,), PROVIDER, read_path=read, writer=writer, within=b"/model/", hosts=HOSTS
    )


ENDPOINTS: Final = (
    _endpoint("bedrock.converse_stream", b"/converse-stream", read_converse_path, write_converse),
    _endpoint("bedrock.converse", b"/converse", read_converse_path, write_converse),
    _endpoint(
        "bedrock.invoke_model_stream",
        b"/invoke-with-response-stream",
        read_invoke_path,
        write_invoke,
    ),
    _endpoint("bedrock.invoke_model", b"/invoke", read_invoke_path, write_invoke),
)
