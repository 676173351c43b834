"""OpenAI Chat Completions (``POST .../chat/completions``, also every compatible server) read
into the normalized request.

Messages keep their order and roles (a system or developer message is a message, where it
stands); content becomes parts: text as ``text``, an assistant's ``tool_calls`` as ``tool_call``
parts after its text, a ``tool`` message as one ``tool_call_response``; other content blocks
(images, audio, files, refusals) are kept as they were sent. Legacy ``functions`` are tools and a
legacy ``function_call`` is a tool call (or, at the top level, the ``tool_choice``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from af_otel.wire.endpoint import Endpoint, Reader, Unwritable, Writer
from af_otel.wire.shapes import WireRead, listed, tool, unread, without

NAME: Final = "openai.chat_completions"
PROVIDER: Final = "openai"
ITEMS: Final = "messages"  # the body key whose array grows call by call
# Body key -> params key (rule 5 of af_otel.model.request).
PARAMS: Final = {
    "temperature": "temperature",
    "top_p": "top_p",
    "seed": "seed",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
    "max_tokens": "max_tokens",
    "max_completion_tokens": "max_tokens",
    "stop": "stop_sequences",
    "n": "choice_count",
    "tool_choice": "tool_choice",
    "function_call": "tool_choice",
    "parallel_tool_calls": "parallel_tool_calls",
    "response_format": "response_format",
    "reasoning_effort": "reasoning_effort",
}
PLACED: Final = frozenset({"model", "messages", "tools", "functions", *PARAMS})
# What shows the model nothing: how the answer travels, and bookkeeping about the caller.
DROPPED: Final = frozenset(
    {
        "stream",
        "stream_options",
        "metadata",
        "user",
        "store",
        "safety_identifier",
        "prompt_cache_key",
        "prompt_cache_retention",
    }
)
_MESSAGE_KEYS: Final = frozenset({"role", "content", "name", "tool_calls", "tool_call_id"})


def _content(content: Any) -> list[Any]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}] if content else []
    parts: list[Any] = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "text":
            parts.append({"type": "text", "content": block.get("text", "")})
        else:
            parts.append(dict(block) if isinstance(block, Mapping) else block)
    return parts


def _call(call: Mapping[str, Any]) -> dict[str, Any]:
    kind = call.get("type") or "function"
    found = call.get(kind)
    inner: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    part = {"type": "tool_call", "id": call.get("id"), "name": inner.get("name")}
    if kind == "function":
        part["arguments"] = inner.get("arguments")
    else:  # a custom tool's call carries free text
        part["input"] = inner.get("input")
        part["tool_type"] = kind
    return part


def element(raw: Mapping[str, Any]) -> dict[str, Any]:
    """One element of ``messages`` as a GenAI message."""
    role = raw["role"]
    if role == "tool":
        parts = [
            {
                "type": "tool_call_response",
                "id": raw.get("tool_call_id"),
                "response": raw.get("content"),
            }
        ]
    else:
        parts = _content(raw.get("content"))
    parts += [_call(call) for call in raw.get("tool_calls") or ()]
    legacy = raw.get("function_call")
    if isinstance(legacy, Mapping):
        parts.append(
            {"type": "tool_call", "name": legacy.get("name"), "arguments": legacy.get("arguments")}
        )
    # Any other key the message carries (audio, refusal, ...) is shown to the model as sent.
    parts += [
        {"type": key, "content": value}
        for key, value in raw.items()
        if key not in _MESSAGE_KEYS and key != "function_call" and value is not None
    ]
    message: dict[str, Any] = {"role": role, "parts": parts}
    if raw.get("name") is not None:
        message["name"] = raw["name"]
    return message


def rest(body: Mapping[str, Any]) -> tuple[WireRead, bool]:
    """Everything the body says but its ``messages`` (`af_otel.wire.read`): the request with no
    messages yet, and whether an element can name server-held state (never here)."""
    params: dict[str, Any] = {}
    for key, target in PARAMS.items():
        value = body.get(key)
        if value is not None:
            params[target] = value
    tools = [tool(t) for t in body.get("tools") or ()]
    tools += [{**without(f), "type": "function"} for f in body.get("functions") or ()]
    request = {
        "model": body["model"],
        "provider": PROVIDER,
        "messages": [],
        "tools": tools,
        "params": params,
    }
    return WireRead(request, unread(body, PLACED, DROPPED)), False


# -- the writer: the inverse of the reader (docs/receipt-spec.md §14) ----------------------------

# params key -> body key: PARAMS turned round, the first body key of each setting its one spelling
# (``max_tokens`` for ``max_completion_tokens`` too, ``tool_choice`` for ``function_call``).
WRITTEN: Final = {
    param: next(body for body, named in PARAMS.items() if named == param)
    for param in dict.fromkeys(PARAMS.values())
}
_MESSAGE_PARTS: Final = frozenset({"refusal", "audio"})  # parts that are a message's own keys


def arguments_text(value: Any) -> str:
    """Tool-call arguments as the JSON text a body carries: as on record when a string, else
    the compact JSON of the value (the client's spacing is not in the normalized request)."""
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _write_call(part: Mapping[str, Any]) -> dict[str, Any]:
    kind = part.get("tool_type", "function")
    if kind == "function":
        inner = {"name": part.get("name"), "arguments": arguments_text(part.get("arguments"))}
    else:
        inner = {"name": part.get("name"), "input": part.get("input")}
    return {"id": part.get("id"), "type": kind, kind: inner}


def write_elements(message: Mapping[str, Any]) -> list[Any]:
    """One normalized message as the one element of ``messages`` it reads from."""
    return [write_element(message)]


def write_element(message: Mapping[str, Any]) -> dict[str, Any]:
    """One normalized message as one element of ``messages``."""
    role, parts = message["role"], list(message.get("parts", ()))
    if role == "tool":
        if len(parts) != 1 or parts[0].get("type") != "tool_call_response":
            raise Unwritable("a tool message that is not one tool result")
        return {"role": "tool", "tool_call_id": parts[0].get("id"), "content": parts[0]["response"]}
    content: list[Any] = []
    calls: list[Any] = []
    extra: dict[str, Any] = {}
    for part in parts:
        kind = part.get("type")
        if kind == "text":
            content.append({"type": "text", "text": part.get("content", "")})
        elif kind == "tool_call":
            calls.append(_write_call(part))
        elif kind in _MESSAGE_PARTS and set(part) == {"type", "content"}:
            extra[kind] = part["content"]
        elif kind in ("reasoning", "tool_call_response"):
            raise Unwritable(f"a {kind} part in a {role} message of a chat request")
        else:
            content.append(part)  # a content block kept as it was sent (image, audio, file)
    out: dict[str, Any] = {"role": role}
    one_text = len(content) == 1 and set(content[0]) == {"type", "text"}
    if one_text and content[0].get("type") == "text":
        out["content"] = content[0]["text"]
    else:
        out["content"] = content or None
    if calls:
        out["tool_calls"] = calls
    if "name" in message:
        out["name"] = message["name"]
    return out | extra


def _write_lead(request: Mapping[str, Any]) -> list[Any]:
    """A record's system parts (a wire body holds its system messages among the others)."""
    return [
        {"role": "system", "content": p.get("content", "")} for p in request.get("system") or ()
    ]


def _write_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    kind = tool.get("type", "function")
    return {"type": kind, kind: {k: v for k, v in tool.items() if k != "type"}}


def write_rest(request: Mapping[str, Any]) -> dict[str, Any]:
    """Every member of the body but ``messages``."""
    params = request.get("params") or {}
    if set(params) - set(WRITTEN):
        raise Unwritable(
            f"settings a chat request has no key for: {sorted(set(params) - set(WRITTEN))}"
        )
    body: dict[str, Any] = {"model": request.get("model")}
    if request.get("tools"):
        body["tools"] = [_write_tool(t) for t in request["tools"]]
    return body | {WRITTEN[k]: v for k, v in params.items()}


ENDPOINT: Final = Endpoint(
    NAME,
    (b"/chat/completions",),
    PROVIDER,
    reader=Reader(ITEMS, listed(ITEMS), element, rest),
    writer=Writer(ITEMS, write_elements, write_rest, _write_lead),
)
