"""OpenAI Responses (``POST .../responses``) read into the normalized request.

``instructions`` (a string) is the system; ``input`` (a string, or items) becomes one message per
item: a ``message`` item with its role and text blocks as ``text`` parts (other blocks, such as
images and files, kept as sent), a ``function_call`` an assistant ``tool_call`` (its ``call_id``
the id), a ``function_call_output`` a ``tool`` message's ``tool_call_response``, a ``reasoning``
item an assistant ``reasoning`` part (its summary texts, its encrypted content); any other item
is an assistant part of its own type, kept as sent. ``previous_response_id`` or ``conversation``
(and an ``item_reference`` item) is state the server holds: the call carries
``server-held-history``. Settings: ``text.format`` is the response format, ``reasoning.effort``
and ``reasoning.summary`` the reasoning settings, ``max_output_tokens`` the token limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from af_otel.wire.endpoint import Endpoint, Reader
from af_otel.wire.shapes import WireRead, tool, unread

NAME: Final = "openai.responses"
PROVIDER: Final = "openai"
ITEMS: Final = "input"  # the body key whose array grows call by call
PARAMS: Final = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_output_tokens": "max_tokens",
    "tool_choice": "tool_choice",
    "parallel_tool_calls": "parallel_tool_calls",
    "truncation": "truncation",
    "store": "store",
}
# Nested settings: (body key, inner key) -> params key.
NESTED: Final = {
    ("text", "format"): "response_format",
    ("reasoning", "effort"): "reasoning_effort",
    ("reasoning", "summary"): "reasoning_summary",
}
HELD: Final = ("previous_response_id", "conversation")
PLACED: Final = frozenset(
    {"model", "instructions", "input", "tools", *PARAMS, *HELD, *(k for k, _ in NESTED)}
)
DROPPED: Final = frozenset(
    {
        "stream",
        "stream_options",
        "include",
        "metadata",
        "user",
        "background",
        "safety_identifier",
        "prompt_cache_key",
        "prompt_cache_retention",
    }
)
_TEXT_BLOCKS: Final = frozenset({"input_text", "output_text", "text"})
_BOOKKEEPING: Final = frozenset({"id", "status"})  # an item's own id and state, not content


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}] if content else []
    parts: list[Any] = []
    for block in content or ():
        if isinstance(block, Mapping) and block.get("type") in _TEXT_BLOCKS:
            parts.append({"type": "text", "content": block.get("text", "")})
        else:
            parts.append(dict(block) if isinstance(block, Mapping) else block)
    return parts


def element(item: Any) -> dict[str, Any]:
    """One item of ``input`` as a GenAI message."""
    if isinstance(item, str):
        return {"role": "user", "parts": [{"type": "text", "content": item}]}
    kind = item.get("type", "message")
    if kind == "message":
        return {"role": item["role"], "parts": _blocks(item.get("content"))}
    if kind == "function_call":
        part = {
            "type": "tool_call",
            "id": item.get("call_id"),
            "name": item.get("name"),
            "arguments": item.get("arguments"),
        }
        return {"role": "assistant", "parts": [part]}
    if kind == "function_call_output":
        part = {
            "type": "tool_call_response",
            "id": item.get("call_id"),
            "response": item.get("output"),
        }
        return {"role": "tool", "parts": [part]}
    if kind == "reasoning":
        summary = "".join(str(s.get("text", "")) for s in item.get("summary") or ())
        part = {"type": "reasoning", "content": summary}
        if item.get("encrypted_content"):
            part["encrypted_content"] = item["encrypted_content"]
        extra = {
            k: v
            for k, v in item.items()
            if k not in {"type", "summary", "encrypted_content", *_BOOKKEEPING}
        }
        return {"role": "assistant", "parts": [{**extra, **part}]}
    return {
        "role": "assistant",
        "parts": [{k: v for k, v in item.items() if k not in _BOOKKEEPING}],
    }


def items(body: Mapping[str, Any]) -> list[Any]:
    """The items of ``input``: a string is one user item."""
    given = body.get(ITEMS)
    return [given] if isinstance(given, str) else list(given or ())


def mark(item: Any) -> str | None:
    """The server-held state an item names: an ``item_reference``, by its id."""
    if isinstance(item, Mapping) and item.get("type") == "item_reference":
        return f"item_reference {item.get('id')}"
    return None


def rest(body: Mapping[str, Any]) -> tuple[WireRead, bool]:
    """Everything the body says but its ``input`` items (`af_otel.wire.read`): the request with no
    messages yet, and whether the items' `mark` decides the held state (no body key names one)."""
    params = {target: body[key] for key, target in PARAMS.items() if body.get(key) is not None}
    loose: list[str] = []
    for (outer, inner), target in NESTED.items():
        nested = body.get(outer)
        if isinstance(nested, Mapping):
            if nested.get(inner) is not None:
                params[target] = nested[inner]
            known = {i for o, i in NESTED if o == outer}
            loose += [f"{outer}.{k}" for k, v in nested.items() if k not in known and v is not None]
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        loose.append("instructions")
        instructions = None
    request = {
        "model": body["model"],
        "provider": PROVIDER,
        "system": instructions,
        "messages": [],
        "tools": [tool(t) for t in body.get("tools") or ()],
        "params": params,
    }
    held = next((body[key] for key in HELD if body.get(key)), None)
    if isinstance(held, Mapping):
        held = held.get("id")
    found = WireRead(
        request,
        tuple(sorted({*unread(body, PLACED, DROPPED), *loose})),
        held if isinstance(held, str) else None,
    )
    return found, held is None


ENDPOINT: Final = Endpoint(
    NAME,
    (b"/responses",),
    PROVIDER,
    reader=Reader(ITEMS, items, element, rest, mark),
)
