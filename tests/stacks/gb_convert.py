"""Converters to one comparable form for the Google and Bedrock stack tests, written here and
nowhere else: a Gemini ``generateContent`` or Bedrock ``Converse`` body as the server received it,
and a served view as af_otel's reader rebuilt it. Nothing here calls af_otel's readers or
normalizers (a shared rule would make a wrong rule agree with itself).

- ``system``: the instruction texts, in order.
- ``messages``: ``(role, parts)``, role ``assistant`` for Gemini's ``model``; a turn of only tool
  results is role ``tool``. Parts: ``("text", text)``, ``("reasoning", text, signature)``,
  ``("tool_call", id, name, arguments, signature)``, ``("tool_result", id, name, response,
  is_error)``, ``("other", kind)``.
- ``tools``: ``(name, description, parameters)`` (Gemini ``parameters`` or
  ``parametersJsonSchema``, Bedrock ``inputSchema.json``).
- ``model`` (from the path) and ``params``: every setting the body carried, under the normalized
  names where there is one, else under its body path (``generationConfig.responseModalities``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import unquote


@dataclass(frozen=True)
class Comparable:
    system: tuple[str, ...]
    messages: tuple[tuple[str, tuple[Any, ...]], ...]
    tools: tuple[tuple[Any, Any, Any], ...]
    model: str | None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Difference:
    field: str
    wire: Any
    served: Any
    where: int | None = None
    aspect: str = ""


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return _plain(value)


def _turn(role: str, parts: list[tuple[Any, ...]]) -> tuple[str, tuple[Any, ...]]:
    parts = [p for p in parts if p != ("text", "")]
    if parts and all(p[0] == "tool_result" for p in parts):
        role = "tool"
    return role, tuple(parts)


# -- Gemini ----------------------------------------------------------------------------------------

_GEMINI_DIALS: Final = {
    "temperature": "temperature",
    "topP": "top_p",
    "topK": "top_k",
    "maxOutputTokens": "max_tokens",
    "stopSequences": "stop_sequences",
    "seed": "seed",
    "candidateCount": "choice_count",
    "presencePenalty": "presence_penalty",
    "frequencyPenalty": "frequency_penalty",
    "thinkingConfig": "thinking",
}
_FORMAT: Final = ("responseMimeType", "responseSchema", "responseJsonSchema")


def _gemini_part(part: Mapping[str, Any]) -> tuple[Any, ...]:
    signature = part.get("thoughtSignature")
    if isinstance(part.get("text"), str):
        if part.get("thought"):
            return ("reasoning", part["text"], signature)
        return ("text", part["text"])
    if "functionCall" in part:
        call = part["functionCall"]
        return ("tool_call", call.get("id"), call.get("name"), _plain(call.get("args")), signature)
    if "functionResponse" in part:
        answer = part["functionResponse"]
        return (
            "tool_result",
            answer.get("id"),
            answer.get("name"),
            _plain(answer.get("response")),
            False,
        )
    return ("other", next(iter(part), ""))


def gemini_model(path: str) -> str:
    """The model a Gemini path names: after ``/models/``, or a Vertex AI endpoint's resource name
    (``projects/.../endpoints/{id}``, the path after its API version)."""
    head = unquote(path.split("?", 1)[0]).rpartition(":")[0]
    if "/models/" not in head and "/endpoints/" in head:
        return head.lstrip("/").partition("/")[2]
    return head.rpartition("/models/")[2]


def from_gemini(path: str, body: Mapping[str, Any]) -> Comparable:
    system_parts = (body.get("systemInstruction") or {}).get("parts") or []
    system = tuple(p["text"] for p in system_parts if "text" in p)
    messages = tuple(
        _turn(
            {"model": "assistant"}.get(c.get("role") or "user", c.get("role") or "user"),
            [_gemini_part(p) for p in c.get("parts") or []],
        )
        for c in body.get("contents") or []
    )
    tools = tuple(
        (
            d.get("name"),
            d.get("description"),
            d.get("parameters") or d.get("parametersJsonSchema") or d.get("parameters_json_schema"),
        )
        for t in body.get("tools") or []
        for d in t.get("functionDeclarations") or []
    )
    params: dict[str, Any] = {}
    config = body.get("generationConfig") or {}
    for key, value in config.items():
        if key in _GEMINI_DIALS:
            params[_GEMINI_DIALS[key]] = value
        elif key not in _FORMAT:
            params[f"generationConfig.{key}"] = value
    found = {k: config[k] for k in _FORMAT if k in config}
    if found:
        params["response_format"] = found
    calling = (body.get("toolConfig") or {}).get("functionCallingConfig")
    if calling is not None:
        params["tool_choice"] = calling
    if body.get("safetySettings") is not None:
        params["safetySettings"] = body["safetySettings"]
    return Comparable(system, messages, tools, gemini_model(path), _plain(params))


# -- Bedrock Converse ------------------------------------------------------------------------------

_CONVERSE_DIALS: Final = {
    "maxTokens": "max_tokens",
    "temperature": "temperature",
    "topP": "top_p",
    "stopSequences": "stop_sequences",
}


def _converse_part(block: Mapping[str, Any]) -> tuple[Any, ...] | None:
    if "cachePoint" in block:
        return None
    if isinstance(block.get("text"), str):
        return ("text", block["text"])
    if "toolUse" in block:
        use = block["toolUse"]
        return ("tool_call", use.get("toolUseId"), use.get("name"), _plain(use.get("input")), None)
    if "toolResult" in block:
        result = block["toolResult"]
        error = result.get("status") == "error"
        return ("tool_result", result.get("toolUseId"), None, _plain(result.get("content")), error)
    if "reasoningContent" in block:
        text = block["reasoningContent"].get("reasoningText") or {}
        return ("reasoning", text.get("text", ""), text.get("signature"))
    return ("other", next(iter(block), ""))


def converse_model(path: str) -> str:
    return unquote(path.split("?", 1)[0].split("/model/", 1)[1].rpartition("/")[0])


def from_converse(path: str, body: Mapping[str, Any]) -> Comparable:
    system = tuple(b["text"] for b in body.get("system") or [] if "text" in b)
    messages = tuple(
        _turn(m["role"], [p for p in map(_converse_part, m.get("content") or []) if p is not None])
        for m in body.get("messages") or []
    )
    config = body.get("toolConfig") or {}
    tools = tuple(
        (s.get("name"), s.get("description"), (s.get("inputSchema") or {}).get("json"))
        for s in (t.get("toolSpec") for t in config.get("tools") or [])
        if s is not None
    )
    params: dict[str, Any] = {}
    for key, value in (body.get("inferenceConfig") or {}).items():
        params[_CONVERSE_DIALS.get(key, f"inferenceConfig.{key}")] = value
    for key, value in (body.get("additionalModelRequestFields") or {}).items():
        params[key if key in ("top_k", "thinking") else f"additionalModelRequestFields.{key}"] = (
            value
        )
    if config.get("toolChoice") is not None:
        params["tool_choice"] = config["toolChoice"]
    return Comparable(system, messages, tools, converse_model(path), _plain(params))


def _anthropic_part(block: Any) -> tuple[Any, ...]:
    if isinstance(block, str):
        return ("text", block)
    kind = block.get("type")
    if kind == "text":
        return ("text", block["text"])
    if kind == "tool_use":
        return ("tool_call", block.get("id"), block.get("name"), _plain(block.get("input")), None)
    if kind == "tool_result":
        error = bool(block.get("is_error"))
        return ("tool_result", block.get("tool_use_id"), None, _plain(block.get("content")), error)
    return ("other", kind)


def from_invoke(path: str, body: Mapping[str, Any]) -> Comparable:
    """An InvokeModel body in Anthropic's Messages shape."""
    raw = body.get("system")
    system = (raw,) if isinstance(raw, str) else tuple(b["text"] for b in raw or [])
    messages = []
    for message in body.get("messages") or []:
        content = message["content"]
        blocks = [content] if isinstance(content, str) else content
        messages.append(_turn(message["role"], [_anthropic_part(b) for b in blocks]))
    tools = tuple(
        (t.get("name"), t.get("description"), t.get("input_schema"))
        for t in body.get("tools") or []
    )
    skip = {"messages", "system", "tools", "anthropic_version"}
    params = {k: v for k, v in body.items() if k not in skip}
    return Comparable(system, tuple(messages), tools, converse_model(path), _plain(params))


def from_bedrock(path: str, body: Mapping[str, Any]) -> Comparable:
    invoke = path.split("?", 1)[0].endswith("/invoke")
    return from_invoke(path, body) if invoke else from_converse(path, body)


# -- the served view -------------------------------------------------------------------------------


def _view_part(part: Mapping[str, Any]) -> tuple[Any, ...]:
    kind = part.get("type")
    if kind == "text":
        return ("text", part.get("content") or "")
    if kind in ("reasoning", "thinking"):
        return ("reasoning", part.get("content") or "", part.get("signature"))
    if kind == "tool_call":
        arguments = _json(part.get("arguments"))
        return ("tool_call", part.get("id"), part.get("name"), arguments, part.get("signature"))
    if kind == "tool_call_response":
        response = _plain(part.get("response"))
        return (
            "tool_result",
            part.get("id"),
            part.get("name"),
            response,
            bool(part.get("is_error")),
        )
    return ("other", kind)


def from_view(view: Any) -> Comparable:
    system = [str(p.get("content")) for p in view.system or () if p.get("type") == "text"]
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
    params = {
        k: _plain(v) for k, v in (view.params or {}).items() if not (k == "choice_count" and v == 1)
    }
    return Comparable(tuple(system), tuple(messages), tools, view.model, params)


# -- differences -----------------------------------------------------------------------------------

_ASPECTS: Final = {
    1: "tool call id",
    2: "tool call name",
    3: "tool call arguments",
    4: "reasoning.signature",
}
_RESULT_ASPECTS: Final = {
    1: "tool call id",
    2: "tool_result.name",
    3: "tool result",
    4: "tool_result.is_error",
}


def _part_aspects(wire: tuple[Any, ...], served: tuple[Any, ...]) -> list[str]:
    if wire[0] != served[0]:
        return [f"part {wire[0]} shown as {served[0]}"]
    table = {"tool_call": _ASPECTS, "tool_result": _RESULT_ASPECTS}.get(wire[0])
    if table is None:
        return [
            "reasoning.signature" if wire[0] == "reasoning" and wire[1] == served[1] else wire[0]
        ]
    return [table[i] for i in range(1, len(wire)) if wire[i] != served[i]]


def differences(wire: Comparable, served: Comparable) -> list[Difference]:
    found: list[Difference] = []
    if wire.system != served.system:
        found.append(Difference("system", wire.system, served.system))
    if len(wire.messages) != len(served.messages):
        found.append(
            Difference("messages", len(wire.messages), len(served.messages), None, "message count")
        )
    seen: set[str] = set()
    for index, (a, b) in enumerate(zip(wire.messages, served.messages, strict=False)):
        if a == b:
            continue
        aspects = ["role"] if a[0] != b[0] else []
        if len(a[1]) != len(b[1]):
            aspects.append(f"parts {len(a[1])} shown as {len(b[1])}")
        else:
            aspects += [
                x for p, q in zip(a[1], b[1], strict=True) if p != q for x in _part_aspects(p, q)
            ]
        for aspect in aspects:
            if aspect not in seen:
                seen.add(aspect)
                found.append(Difference("messages", a, b, index, aspect))
    if wire.tools != served.tools:
        found.append(Difference("tools", wire.tools, served.tools))
    if wire.model != served.model:
        found.append(Difference("model", wire.model, served.model))
    for key in sorted(set(wire.params) | set(served.params)):
        if wire.params.get(key) != served.params.get(key):
            found.append(Difference(f"params.{key}", wire.params.get(key), served.params.get(key)))
    return found
