"""Two converters to one comparable form, written here and nowhere else: a request body as the
server received it (OpenAI Chat Completions or Anthropic Messages), and a served view as af_otel's
reader rebuilt it.

Nothing here calls af_otel's normalizers: a shared rule would make a wrong rule agree with itself.
The comparable form keeps what the model is shown and what steers it:

- ``system``: the instruction texts, in order (OpenAI's system/developer messages, Anthropic's
  ``system`` string or blocks); cache_control marks are caching advice, not content, and dropped.
- ``messages``: the other turns, each ``(role, parts)``; a turn holding only tool results is role
  ``tool`` whichever API spelled it (OpenAI's ``tool`` message, Anthropic's ``user`` turn). Parts:
  ``("text", text)``, ``("tool_call", id, name, arguments)`` with the arguments parsed as JSON,
  ``("tool_result", id, content, is_error)``, ``("thinking", text, signature)``, empty texts dropped.
- ``tools``: ``(name, description, parameters)``.
- ``model`` and ``params``: every dial the request set, under one name per meaning (``stop``,
  ``max_tokens``, ``tool_choice`` as ``auto``/``none``/``required``/``{"tool": name}``,
  ``parallel_tool_calls`` (Anthropic: ``tool_choice.disable_parallel_tool_use``),
  ``thinking_budget``, ...). Transport switches (``stream``, ``stream_options``) and bookkeeping
  (``metadata``, ``user``) are not dials.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

# Anthropic's switch for one tool call per turn lives inside tool_choice, so it is compared (and
# named by gaps) as part of it.
_NO_PARALLEL: Final = "tool_choice.disable_parallel_tool_use"
# Request keys that neither show the model anything nor steer it.
_NOT_DIALS: Final = frozenset(
    {"messages", "system", "tools", "model", "stream", "stream_options", "metadata", "user"}
)


@dataclass(frozen=True)
class Comparable:
    system: tuple[str, ...]
    messages: tuple[tuple[str, tuple[Any, ...]], ...]
    tools: tuple[tuple[str, str | None, Any], ...]
    model: str | None
    params: dict[str, Any] = field(default_factory=dict)


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _text_of(content: Any) -> str:
    """A tool result's content as the text the model reads."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(_text_of(item) for item in content)
    if isinstance(content, Mapping):
        for key in ("text", "content"):
            if isinstance(content.get(key), str):
                return str(content[key])
    return json.dumps(content, sort_keys=True)


def _turn(role: str, parts: list[tuple[Any, ...]]) -> tuple[str, tuple[Any, ...]]:
    parts = [p for p in parts if p != ("text", "")]
    if parts and all(p[0] == "tool_result" for p in parts):
        role = "tool"
    return role, tuple(parts)


def _choice(value: Any) -> Any:
    """A tool_choice in any provider's (or a recorder's) spelling."""
    if isinstance(value, str):
        return {"any": "required"}.get(value, value)
    if isinstance(value, Mapping) and value.get("type") == "allowed_tools":
        return dict(value)  # the Responses API's subset of tools: compared as it is
    if isinstance(value, Mapping):
        inner = value.get("function")
        name = inner.get("name") if isinstance(inner, Mapping) else value.get("name")
        if name:
            return {"tool": name}
        kind = value.get("type") or value.get("mode")
        return {"any": "required", "tool": "required"}.get(kind, kind)
    return value


# -- the wire --------------------------------------------------------------------------------------


def from_openai(body: Mapping[str, Any]) -> Comparable:
    system: list[str] = []
    messages = []
    for message in body["messages"]:
        role, content = message["role"], message.get("content")
        if role in ("system", "developer"):
            system.append(_text_of(content))
            continue
        parts: list[tuple[Any, ...]] = []
        if role == "tool":
            parts.append(("tool_result", message["tool_call_id"], _text_of(content), False))
        elif isinstance(content, str):
            parts.append(("text", content))
        elif content:
            parts += [("text", block["text"]) for block in content if block["type"] == "text"]
            parts += [("other", block["type"]) for block in content if block["type"] != "text"]
        for call in message.get("tool_calls") or []:
            fn = call["function"]
            parts.append(("tool_call", call["id"], fn["name"], _json(fn["arguments"])))
        messages.append(_turn(role, parts))
    tools = tuple(
        (t["function"]["name"], t["function"].get("description"), t["function"].get("parameters"))
        for t in body.get("tools") or []
    )
    params: dict[str, Any] = {}
    for key, value in body.items():
        if key in _NOT_DIALS or value is None:
            continue
        if key in ("max_tokens", "max_completion_tokens"):
            params["max_tokens"] = value
        elif key == "stop":
            params["stop"] = [value] if isinstance(value, str) else list(value)
        elif key == "tool_choice":
            params["tool_choice"] = _choice(value)
        else:
            params[key] = value
    return Comparable(tuple(system), tuple(messages), tools, body.get("model"), params)


def _anthropic_part(block: Any) -> tuple[Any, ...]:
    if isinstance(block, str):
        return ("text", block)
    kind = block["type"]
    if kind == "text":
        return ("text", block["text"])
    if kind == "tool_use":
        return ("tool_call", block["id"], block["name"], block.get("input"))
    if kind == "tool_result":
        return (
            "tool_result",
            block["tool_use_id"],
            _text_of(block.get("content")),
            bool(block.get("is_error")),
        )
    if kind == "thinking":
        return ("thinking", block.get("thinking") or "", block.get("signature") or None)
    return ("other", kind)


def from_anthropic(body: Mapping[str, Any]) -> Comparable:
    raw_system = body.get("system")
    if isinstance(raw_system, str):
        system: tuple[str, ...] = (raw_system,) if raw_system else ()
    else:
        system = tuple(block["text"] for block in raw_system or ())
    messages = []
    for message in body["messages"]:
        content = message["content"]
        blocks = [content] if isinstance(content, str) else content
        messages.append(_turn(message["role"], [_anthropic_part(b) for b in blocks]))
    tools = tuple(
        (t["name"], t.get("description"), t.get("input_schema")) for t in body.get("tools") or []
    )
    params: dict[str, Any] = {}
    for key, value in body.items():
        if key in _NOT_DIALS or value is None:
            continue
        if key == "stop_sequences":
            params["stop"] = list(value)
        elif key == "tool_choice":
            params["tool_choice"] = _choice(value)
            if value.get("disable_parallel_tool_use"):
                params[_NO_PARALLEL] = True
        elif key == "thinking":
            if value.get("type") == "enabled":
                params["thinking_budget"] = value.get("budget_tokens")
        else:
            params[key] = value
    return Comparable(system, tuple(messages), tools, body.get("model"), params)


def from_wire(path: str, body: Mapping[str, Any]) -> Comparable:
    return from_anthropic(body) if path.endswith("/messages") else from_openai(body)


# -- the served view -------------------------------------------------------------------------------

# The view's params under the comparable names; a key not listed keeps its own name, so a dial
# the reader shows under an unexpected name shows up as a difference.
_VIEW_PARAMS: Final = {
    "stop_sequences": "stop",
    "choice_count": "n",
    "reasoning_budget": "thinking_budget",
    "thinking_budget_tokens": "thinking_budget",
    "budget_tokens": "thinking_budget",
}


def _view_part(part: Mapping[str, Any]) -> tuple[Any, ...]:
    kind = part.get("type")
    if kind == "text":
        return ("text", part.get("content") or "")
    if kind == "tool_call":
        arguments = _json(_plain(part.get("arguments")))
        return ("tool_call", part.get("id"), part.get("name"), arguments)
    if kind == "tool_call_response":
        error = part.get("is_error", part.get("error", part.get("status") == "error"))
        response = _text_of(_plain(part.get("response")))
        return ("tool_result", part.get("id"), response, bool(error))
    if kind in ("reasoning", "thinking"):
        sealed = part.get("signature") or part.get("encrypted_content")
        return ("thinking", part.get("content") or "", sealed or None)
    return ("other", kind)


def from_view(view: Any) -> Comparable:
    """A served view (af_otel.reader.view.ServedView) read field by field. A field not on record
    (None) reads as empty, so that it shows as a difference wherever the wire had something."""
    system = [_text_of(p.get("content")) for p in view.system or () if p.get("type") == "text"]
    messages = []
    for message in view.messages or ():
        parts = [_view_part(p) for p in message.get("parts") or ()]
        if message["role"] in ("system", "developer"):
            system += [p[1] for p in parts if p[0] == "text"]
            continue
        messages.append(_turn(message["role"], parts))
    tools = tuple(
        (t.get("name"), t.get("description"), _plain(t.get("parameters"))) for t in view.tools or ()
    )
    params: dict[str, Any] = {}
    for key, recorded in (view.params or {}).items():
        name, value = _VIEW_PARAMS.get(key, key), recorded
        if key == "thinking":  # a budget, or Anthropic's {"type", "budget_tokens"}
            name = "thinking_budget"
            if isinstance(recorded, Mapping):
                value = recorded.get("budget_tokens") if recorded.get("type") == "enabled" else None
        if name == "n" and value == 1:
            continue  # one choice is what a request that sets no n gets
        if (
            name == "tool_choice"
            and isinstance(value, Mapping)
            and value.get("disable_parallel_tool_use")
        ):
            params[_NO_PARALLEL] = True
        if name == "parallel_tool_calls" and view.provider == "anthropic":
            name, value = _NO_PARALLEL, True if value is False else None
        params[name] = _choice(value) if name == "tool_choice" else _plain(value)
    return Comparable(tuple(system), tuple(messages), tools, view.model, params)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


# -- differences -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    """One way the served view is not the wire request: ``field`` is ``system``, ``messages``,
    ``tools``, ``model`` or ``params.<dial>``; ``aspect`` says what differs within it (for
    messages: a text, a tool result's error flag, a thinking signature, ...); ``where`` is the
    first index that differs, when the field is a list."""

    field: str
    wire: Any
    served: Any
    where: int | None = None
    aspect: str = ""


def _first_index(a: Sequence[Any], b: Sequence[Any]) -> int:
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))


def _part_aspect(wire: tuple[Any, ...], served: tuple[Any, ...]) -> str:
    if wire[0] != served[0]:
        return f"part {wire[0]} shown as {served[0]}"
    kind = wire[0]
    if kind == "text":
        cut = len(served[1]) < len(wire[1]) and wire[1].startswith(served[1])
        return "text cut" if cut else "text"
    if kind == "tool_result" and wire[3] != served[3]:
        return "tool result error flag"
    if kind == "thinking" and wire[2] != served[2]:
        return "thinking signature"
    labels = {"tool_call": "tool call", "tool_result": "tool result", "thinking": "thinking text"}
    return labels.get(kind, kind)


def _message_aspects(wire: Sequence[Any], served: Sequence[Any]) -> list[Difference]:
    """Each kind of difference between two message lists once, with its first occurrence."""
    found: dict[str, Difference] = {}
    if len(wire) != len(served):
        index = _first_index(wire, served)
        found["message count"] = Difference(
            "messages", f"{len(wire)} messages", f"{len(served)} messages", index, "message count"
        )
    for index, (a, b) in enumerate(zip(wire, served, strict=False)):
        if a == b:
            continue
        aspects = []
        if a[0] != b[0]:
            aspects.append("role")
        if len(a[1]) != len(b[1]):
            extra = [p[0] for p in b[1] if p not in a[1]] or [p[0] for p in a[1] if p not in b[1]]
            aspects.append(f"parts {len(a[1])} shown as {len(b[1])} ({', '.join(extra)})")
        else:
            aspects += [_part_aspect(x, y) for x, y in zip(a[1], b[1], strict=True) if x != y]
        for aspect in aspects:
            found.setdefault(aspect, Difference("messages", a, b, index, aspect))
    return list(found.values())


def differences(wire: Comparable, served: Comparable) -> list[Difference]:
    found: list[Difference] = []
    if wire.system != served.system and "\n".join(wire.system) != "\n".join(served.system):
        found.append(Difference("system", wire.system, served.system))  # not merely joined
    found += _message_aspects(wire.messages, served.messages)
    if wire.tools != served.tools:
        index = _first_index(wire.tools, served.tools)
        a, b = wire.tools, served.tools
        found.append(
            Difference(
                "tools",
                a[index] if index < len(a) else f"<{len(a)} tools>",
                b[index] if index < len(b) else f"<{len(b)} tools>",
                index,
            )
        )
    if wire.model != served.model:
        found.append(Difference("model", wire.model, served.model))
    for key in sorted(set(wire.params) | set(served.params)):
        a, b = wire.params.get(key), served.params.get(key)
        if _plain(a) != _plain(b):
            found.append(Difference(f"params.{key}", a, b))
    return found
