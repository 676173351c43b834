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

from af_otel.wire.endpoint import Endpoint, Reader, Unwritable, Writer
from af_otel.wire.openai_chat import arguments_text
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


# -- the writer: the inverse of the reader (docs/receipt-spec.md §14) ----------------------------

WRITTEN: Final = {target: key for key, target in PARAMS.items()}  # params key -> body key
WRITTEN_NESTED: Final = {target: key for key, target in NESTED.items()}
_WRITTEN_PARTS: Final = frozenset({"text", "tool_call", "tool_call_response", "reasoning"})


def _write_reasoning(part: Mapping[str, Any]) -> dict[str, Any]:
    summary = part.get("content", "")
    extra = {k: v for k, v in part.items() if k not in {"type", "content"}}
    written = [{"type": "summary_text", "text": summary}] if summary else []
    return {"type": "reasoning", "summary": written, **extra}


def _write_part(role: str, part: Mapping[str, Any]) -> dict[str, Any]:
    """A part that is an item of its own: a call, a call's output, reasoning, another item."""
    kind = part.get("type")
    if kind == "tool_call":
        return {
            "type": "function_call",
            "call_id": part.get("id"),
            "name": part.get("name"),
            "arguments": arguments_text(part.get("arguments")),
        }
    if kind == "tool_call_response":
        return {
            "type": "function_call_output",
            "call_id": part.get("id"),
            "output": part["response"],
        }
    if kind == "reasoning":
        return _write_reasoning(part)
    if role != "assistant":
        raise Unwritable(f"a {kind} part in a {role} message of a Responses request")
    return dict(part)  # an item kept as it was sent (a web search call, ...)


def _write_blocks(role: str, parts: list[Mapping[str, Any]]) -> list[Any]:
    text = "output_text" if role == "assistant" else "input_text"
    return [
        {"type": text, "text": p.get("content", "")} if p.get("type") == "text" else dict(p)
        for p in parts
    ]


def write_elements(message: Mapping[str, Any]) -> list[Any]:
    """One normalized message as the input items it reads from: a message item for its text
    (a user's, system's or developer's one text as a string), an item for each other part."""
    role, parts = message["role"], list(message.get("parts", ()))
    items: list[Any] = []
    blocks: list[Mapping[str, Any]] = []
    for part in parts:
        kind = part.get("type")
        # a user's image or file is a block of its message; an assistant's other part an item
        if kind == "text" or (kind not in _WRITTEN_PARTS and role != "assistant"):
            blocks.append(part)
            continue
        if blocks:
            items.append(_write_message(role, blocks))
            blocks = []
        items.append(_write_part(role, part))
    if blocks or not parts:
        items.append(_write_message(role, blocks))
    return items


def _write_message(role: str, blocks: list[Mapping[str, Any]]) -> dict[str, Any]:
    one_text = len(blocks) == 1 and set(blocks[0]) == {"type", "content"}
    if role != "assistant" and one_text and blocks[0]["type"] == "text":
        return {"role": role, "content": blocks[0]["content"]}
    item = {"role": role, "content": _write_blocks(role, blocks)}
    return {"type": "message", **item} if role == "assistant" else item


def write_rest(request: Mapping[str, Any]) -> dict[str, Any]:
    """Every member of the body but ``input``: ``instructions`` from the system's one text."""
    params = dict(request.get("params") or {})
    loose = set(params) - set(WRITTEN) - set(WRITTEN_NESTED)
    if loose:
        raise Unwritable(f"settings a Responses request has no key for: {sorted(loose)}")
    body: dict[str, Any] = {"model": request.get("model")}
    system = list(request.get("system") or ())
    if system:
        if len(system) != 1 or set(system[0]) != {"type", "content"} or system[0]["type"] != "text":
            raise Unwritable("instructions that are not one text")
        body["instructions"] = system[0]["content"]
    if request.get("tools"):
        body["tools"] = [dict(t) for t in request["tools"]]
    for key, value in params.items():
        if key in WRITTEN:
            body[WRITTEN[key]] = value
        else:
            outer, inner = WRITTEN_NESTED[key]
            body.setdefault(outer, {})[inner] = value
    return body


ENDPOINT: Final = Endpoint(
    NAME,
    (b"/responses",),
    PROVIDER,
    reader=Reader(ITEMS, items, element, rest, mark),
    writer=Writer(ITEMS, write_elements, write_rest),
)
