"""Anthropic Messages (``POST .../v1/messages``) read into the normalized request.

``system`` (a string or text blocks) is the system; content blocks become parts: ``text``,
``tool_use`` as ``tool_call`` (its ``input`` the arguments), ``tool_result`` as
``tool_call_response`` (``is_error`` kept when true), ``thinking`` as ``reasoning`` with its
signature; other blocks (images, documents, redacted thinking, server tool blocks) are kept as
sent. ``cache_control`` marks are caching advice and dropped. ``tool_choice`` and ``thinking`` are
kept as sent (``disable_parallel_tool_use`` stays inside ``tool_choice``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from af_otel.wire.endpoint import Endpoint, Reader, Unwritable, Writer
from af_otel.wire.shapes import WireRead, listed, tool, unread, without

NAME: Final = "anthropic.messages"
PROVIDER: Final = "anthropic"
ITEMS: Final = "messages"  # the body key whose array grows call by call
PARAMS: Final = {
    "max_tokens": "max_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "stop_sequences": "stop_sequences",
    "tool_choice": "tool_choice",
    "thinking": "thinking",
}
PLACED: Final = frozenset({"model", "system", "messages", "tools", *PARAMS})
DROPPED: Final = frozenset({"stream", "metadata", "service_tier"})


def _block(block: Any) -> Any:
    if isinstance(block, str):
        return {"type": "text", "content": block}
    if not isinstance(block, Mapping):
        return block
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "content": block.get("text", ""), **_extra(block, {"type", "text"})}
    if kind == "tool_use":
        return {
            "type": "tool_call",
            "id": block.get("id"),
            "name": block.get("name"),
            "arguments": block.get("input"),
            **_extra(block, {"type", "id", "name", "input"}),
        }
    if kind == "tool_result":
        part = {
            "type": "tool_call_response",
            "id": block.get("tool_use_id"),
            "response": block.get("content"),
            **_extra(block, {"type", "tool_use_id", "content", "is_error"}),
        }
        if block.get("is_error"):
            part["is_error"] = True
        return part
    if kind == "thinking":
        return {
            "type": "reasoning",
            "content": block.get("thinking", ""),
            **_extra(block, {"type", "thinking"}),
        }
    return without(block)


def _extra(block: Mapping[str, Any], known: set[str]) -> dict[str, Any]:
    """A block's keys beyond the ones its part spells otherwise (a signature, citations): kept."""
    return {k: v for k, v in block.items() if k not in known and k != "cache_control"}


def element(raw: Mapping[str, Any]) -> dict[str, Any]:
    """One element of ``messages`` as a GenAI message."""
    content = raw.get("content")
    blocks = [content] if isinstance(content, str) else content or []
    return {"role": raw["role"], "parts": [_block(b) for b in blocks]}


def rest(body: Mapping[str, Any]) -> tuple[WireRead, bool]:
    """Everything the body says but its ``messages`` (`af_otel.wire.read`): the request with no
    messages yet, and whether an element can name server-held state (never here)."""
    system = body.get("system")
    if isinstance(system, list):
        system = [_block(b) for b in system]
    params = {target: body[key] for key, target in PARAMS.items() if body.get(key) is not None}
    request = {
        "model": body["model"],
        "provider": PROVIDER,
        "system": system,
        "messages": [],
        "tools": [tool(t) for t in body.get("tools") or ()],
        "params": params,
    }
    return WireRead(request, unread(body, PLACED, DROPPED)), False


def read(body: Mapping[str, Any]) -> WireRead:
    """The whole body read, its rest and every element: for a reader that embeds this shape
    (Bedrock's InvokeModel, `af_otel.wire.bedrock`)."""
    found, _ = rest(body)
    messages = [element(m) for m in body.get(ITEMS) or ()]
    return WireRead({**found.request, "messages": messages}, found.unread, found.held)


# -- the writer: the inverse of the reader (docs/receipt-spec.md §14) ----------------------------


def _write_block(part: Mapping[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    rest = {k: v for k, v in part.items() if k not in {"type", "content", "id", "name"}}
    if kind == "text":
        return {"type": "text", "text": part.get("content", ""), **rest}
    if kind == "tool_call":
        rest.pop("arguments", None)
        return {
            "type": "tool_use",
            "id": part.get("id"),
            "name": part.get("name"),
            "input": part.get("arguments"),
            **rest,
        }
    if kind == "tool_call_response":
        rest = {k: v for k, v in part.items() if k not in {"type", "id", "response", "is_error"}}
        block = {"type": "tool_result", "tool_use_id": part.get("id"), "content": part["response"]}
        return block | ({"is_error": True} if part.get("is_error") else {}) | rest
    if kind == "reasoning":
        return {"type": "thinking", "thinking": part.get("content", ""), **rest}
    return dict(part)  # a block kept as it was sent (image, document, redacted thinking)


def write_elements(message: Mapping[str, Any]) -> list[Any]:
    """One normalized message as the one element of ``messages`` it reads from."""
    return [write_element(message)]


def write_element(message: Mapping[str, Any]) -> dict[str, Any]:
    """One normalized message as one element of ``messages``: a user's one text as a string."""
    blocks = [_write_block(p) for p in message.get("parts", ())]
    one_text = len(blocks) == 1 and set(blocks[0]) == {"type", "text"}
    if message["role"] == "user" and one_text and blocks[0]["type"] == "text":
        return {"role": "user", "content": blocks[0]["text"]}
    return {"role": message["role"], "content": blocks}


def _write_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in tool.items() if k not in {"type", "parameters"}}
    if "parameters" in tool:
        out["input_schema"] = tool["parameters"]
    if tool.get("type", "function") != "function":
        out["type"] = tool["type"]
    return out


def write_rest(request: Mapping[str, Any]) -> dict[str, Any]:
    """Every member of the body but ``messages``."""
    params = request.get("params") or {}
    if set(params) - set(PARAMS):
        raise Unwritable(
            f"settings a Messages request has no key for: {sorted(set(params) - set(PARAMS))}"
        )
    body: dict[str, Any] = {"model": request.get("model")}
    system = [_write_block(p) for p in request.get("system") or ()]
    if system:
        body["system"] = system
    if request.get("tools"):
        body["tools"] = [_write_tool(t) for t in request["tools"]]
    return body | dict(params)


ENDPOINT: Final = Endpoint(
    NAME,
    (b"/v1/messages",),
    PROVIDER,
    reader=Reader(ITEMS, listed(ITEMS), element, rest),
    writer=Writer(ITEMS, write_elements, write_rest),
)
