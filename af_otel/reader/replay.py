"""The provider-native request body of one call, rebuilt from its served view, so that a user can
send exactly that call again (``af-otel served --request``, `replay_request`).

One writer per endpoint, each the inverse of its wire reader (af_otel/wire/): OpenAI Chat
Completions and Anthropic Messages; a Responses API call (a span named as one) is refused, its
writer is not built yet. A body is rebuilt only
from a view `verify` calls ``verified``: any other verdict, or a gap on the view, means the
record does not prove what was sent, and the rebuild is refused with `ReplayRefusedError` naming
the gap (or the reason). What no record keeps is spelled one way (docs/receipt-spec.md, Replayed
requests): the transport keys (``stream``, ``stream_options``, ...), Anthropic's
``cache_control`` marks, OpenAI's ``max_tokens`` for ``max_completion_tokens``, a one-element
``stop`` list for a bare string, and tool-call arguments as compact JSON text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from af_otel import names
from af_otel.errors import ReplayRefusedError
from af_otel.reader.verify import VerdictStatus, verify
from af_otel.reader.view import ServedView

__all__ = ["ReplayRefusedError", "replay_request"]

# Gap kinds about other calls of the run, not about this request's content.
_ABOUT_OTHER_CALLS: Final = frozenset({names.GAP_RUN_CUT_AT_END, names.GAP_UNRECORDED_CALL})


def replay_request(view: ServedView, key: Any = None) -> dict[str, Any]:
    """The body the client sent for ``view``'s call, in its provider's own shape (module rules);
    raises `ReplayRefusedError` where the record cannot rebuild it (``key``: as for `verify`)."""
    where = f"span {view.span_id} (run {view.run_id}, epoch {view.epoch})"
    verdict = verify(view, key=key)
    blocking = [g for g in view.gaps if g.kind not in _ABOUT_OTHER_CALLS and g.partial]
    if verdict.status is not VerdictStatus.VERIFIED or blocking:
        first = blocking[0] if blocking else None
        why = f"gap {first.kind}: {first.detail or first.why}" if first else verdict.reason
        raise ReplayRefusedError(f"{where}: cannot rebuild the request body ({why})")
    if view.held:
        raise ReplayRefusedError(
            f"{where}: cannot rebuild the request body (gap {names.GAP_HELD_HISTORY}: the server "
            "holds history this request does not carry)"
        )
    writer = _WRITERS.get(view.provider or "")
    if view.provider == "openai" and "respon" in view.name.lower():
        raise ReplayRefusedError(f"{where}: a Responses API request is not rebuilt yet")
    if writer is None:
        raise ReplayRefusedError(f"{where}: no writer for provider {view.provider!r}")
    try:
        return writer(view)
    except _Unwritable as exc:
        raise ReplayRefusedError(f"{where}: cannot rebuild the request body ({exc})") from None


class _Unwritable(Exception):
    """A part of the record the endpoint's writer has no spelling for."""


def plain(value: Any) -> Any:
    """A view's frozen values (mappings, tuples) as plain JSON values."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


# -- OpenAI Chat Completions ---------------------------------------------------------------------

_CHAT_PARAMS: Final = {
    "temperature": "temperature",
    "top_p": "top_p",
    "seed": "seed",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
    "max_tokens": "max_tokens",
    "stop_sequences": "stop",
    "choice_count": "n",
    "tool_choice": "tool_choice",
    "parallel_tool_calls": "parallel_tool_calls",
    "response_format": "response_format",
    "reasoning_effort": "reasoning_effort",
}
_CHAT_MESSAGE_KEYS: Final = frozenset({"refusal", "audio"})


def _chat_call(part: Mapping[str, Any]) -> dict[str, Any]:
    kind = part.get("tool_type", "function")
    if kind == "function":
        inner = {"name": part.get("name"), "arguments": _arguments(part.get("arguments"))}
    else:
        inner = {"name": part.get("name"), "input": part.get("input")}
    return {"id": part.get("id"), "type": kind, kind: inner}


def _chat_message(message: Mapping[str, Any]) -> dict[str, Any]:
    role, parts = message["role"], list(message.get("parts", ()))
    if role == "tool":
        if len(parts) != 1 or parts[0].get("type") != "tool_call_response":
            raise _Unwritable("a tool message that is not one tool result")
        return {"role": "tool", "tool_call_id": parts[0].get("id"), "content": parts[0]["response"]}
    content: list[Any] = []
    calls: list[Any] = []
    extra: dict[str, Any] = {}
    for part in parts:
        kind = part.get("type")
        if kind == "text":
            content.append({"type": "text", "text": part.get("content", "")})
        elif kind == "tool_call":
            calls.append(_chat_call(part))
        elif kind in _CHAT_MESSAGE_KEYS and set(part) == {"type", "content"}:
            extra[kind] = part["content"]
        elif kind in ("reasoning", "tool_call_response"):
            raise _Unwritable(f"a {kind} part in a {role} message of a chat request")
        else:
            content.append(part)  # a content block kept as it was sent (image, audio, file)
    out: dict[str, Any] = {"role": role}
    if (
        len(content) == 1
        and content[0].get("type") == "text"
        and set(content[0]) == {"type", "text"}
    ):
        out["content"] = content[0]["text"]
    else:
        out["content"] = content or None
    if calls:
        out["tool_calls"] = calls
    if "name" in message:
        out["name"] = message["name"]
    return out | extra


def _chat_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    kind = tool.get("type", "function")
    return {"type": kind, kind: {k: v for k, v in tool.items() if k != "type"}}


def _chat_body(view: ServedView) -> dict[str, Any]:
    params: dict[str, Any] = plain(view.params or {})
    if set(params) - set(_CHAT_PARAMS):
        raise _Unwritable(
            f"settings a chat request has no key for: {sorted(set(params) - set(_CHAT_PARAMS))}"
        )
    messages = [
        {"role": "system", "content": part.get("content", "")} for part in plain(view.system or ())
    ]
    messages += [_chat_message(m) for m in plain(view.messages or ())]
    body: dict[str, Any] = {"model": view.model, "messages": messages}
    if view.tools:
        body["tools"] = [_chat_tool(t) for t in plain(view.tools)]
    body |= {_CHAT_PARAMS[k]: v for k, v in params.items()}
    return body


# -- Anthropic Messages --------------------------------------------------------------------------

_ANTHROPIC_PARAMS: Final = frozenset(
    {"max_tokens", "temperature", "top_p", "top_k", "stop_sequences", "tool_choice", "thinking"}
)


def _anthropic_block(part: Mapping[str, Any]) -> dict[str, Any]:
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


def _anthropic_message(message: Mapping[str, Any]) -> dict[str, Any]:
    blocks = [_anthropic_block(p) for p in message.get("parts", ())]
    one_text = len(blocks) == 1 and set(blocks[0]) == {"type", "text"}
    if message["role"] == "user" and one_text and blocks[0]["type"] == "text":
        return {"role": "user", "content": blocks[0]["text"]}
    return {"role": message["role"], "content": blocks}


def _anthropic_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in tool.items() if k not in {"type", "parameters"}}
    if "parameters" in tool:
        out["input_schema"] = tool["parameters"]
    if tool.get("type", "function") != "function":
        out["type"] = tool["type"]
    return out


def _anthropic_body(view: ServedView) -> dict[str, Any]:
    params: dict[str, Any] = plain(view.params or {})
    if set(params) - _ANTHROPIC_PARAMS:
        raise _Unwritable(
            f"settings a Messages request has no key for: {sorted(set(params) - _ANTHROPIC_PARAMS)}"
        )
    body: dict[str, Any] = {"model": view.model}
    system = [_anthropic_block(p) for p in plain(view.system or ())]
    if system:
        body["system"] = system
    body["messages"] = [_anthropic_message(m) for m in plain(view.messages or ())]
    if view.tools:
        body["tools"] = [_anthropic_tool(t) for t in plain(view.tools)]
    return body | params


_WRITERS: Final[Mapping[str, Callable[[ServedView], dict[str, Any]]]] = {
    "openai": _chat_body,
    "anthropic": _anthropic_body,
}
