"""pydantic-ai's native GenAI spans (``InstrumentationSettings``, data format version 2 and
later): what differs from util-genai's record of the same call.

pydantic-ai writes its span at the framework, from its own message model, not from the body its
model class sends; so its spans never count as captured at the provider SDK (the reader keeps
``cache-transform``), and what this module reads back is pydantic-ai's own knowledge of the
request:

- ``model_request_parameters`` (JSON) holds the tool definitions as pydantic-ai hands them to the
  model class, with their resolved ``strict`` flag, which ``gen_ai.tool.definitions`` leaves
  out. pydantic-ai's OpenAI model classes send ``"strict": true`` exactly for a tool whose flag is
  true, so for an OpenAI call the tools are read from there when they name the same tools, in
  the same order, as ``gen_ai.tool.definitions``; otherwise (other providers, native tools,
  anything unexpected) ``gen_ai.tool.definitions`` stands as recorded.
- Tool results are ``tool_call_response`` parts in a ``user`` turn (pydantic-ai's request
  message); OpenAI's APIs take each as a ``tool`` message of its own (Chat Completions' ``tool``
  role, the Responses API's ``function_call_output`` item), so for an OpenAI call a user turn
  of tool results only is read as those tool messages.

It names no dial pydantic-ai does not record (``tool_choice`` is decided inside the model class
and not on the span): the field ledger (`af_otel.semconv.ledger`) says what is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from af_otel.model import fields
from af_otel.semconv.adapted import Adapted, conclude
from af_otel.semconv.coerce import JsonValue, json_or_plain, text
from af_otel.semconv.convention import Convention, Entry, Keys
from af_otel.semconv.conventions import genai

PARAMETERS: Final = "model_request_parameters"
_TOOL_LISTS: Final = ("function_tools", "output_tools")


def claims(attributes: Mapping[str, object], span_name: str) -> bool:
    """A span pydantic-ai's instrumentation wrote for a model request."""
    return PARAMETERS in attributes and genai.OPERATION in attributes


def adapt(attributes: Mapping[str, object]) -> Adapted:
    return conclude("genai", attributes, lambda: _build(attributes))


def _build(attributes: Mapping[str, object]) -> tuple[dict[str, object], list[str]]:
    request, notes = genai.build_request(attributes)
    if request.get("provider") != "openai":
        return request, notes
    tools = request.get("tools")
    if isinstance(tools, list):
        request["tools"] = _with_strict(tools, attributes.get(PARAMETERS))
    messages = request.get("messages")
    if isinstance(messages, list):
        request["messages"] = [m for message in messages for m in _tool_turns(message)]
    return request, notes


def _definitions(raw: object) -> list[Mapping[str, object]] | None:
    decoded = json_or_plain(raw)
    if not isinstance(decoded, dict) or decoded.get("native_tools"):
        return None
    found: list[Mapping[str, object]] = []
    for key in _TOOL_LISTS:
        listed = decoded.get(key) or []
        if not isinstance(listed, list) or not all(isinstance(t, dict) for t in listed):
            return None
        found += [t for t in listed if isinstance(t, dict)]
    return found


def _with_strict(tools: list[JsonValue], raw: object) -> list[JsonValue]:
    """The recorded tools, each with ``strict: true`` where pydantic-ai's definition of the same
    tool says so; the recorded tools unchanged when the two lists do not name the same tools."""
    definitions = _definitions(raw)
    if definitions is None or len(definitions) != len(tools):
        return tools
    out: list[JsonValue] = []
    for tool, definition in zip(tools, definitions, strict=True):
        if not isinstance(tool, dict) or text(tool.get("name")) != text(definition.get("name")):
            return tools
        strict = definition.get("strict")
        if strict is not None and not isinstance(strict, bool):
            return tools
        out.append({**tool, "strict": True} if strict else tool)
    return out


def _tool_turns(message: JsonValue) -> list[JsonValue]:
    """A user turn of tool results only as one ``tool`` message per result; else the turn."""
    if not isinstance(message, dict) or message.get("role") != "user":
        return [message]
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        return [message]
    if not all(isinstance(p, dict) and p.get("type") == "tool_call_response" for p in parts):
        return [message]
    return [{"role": "tool", "parts": [part]} for part in parts]


PYDANTIC_AI: Final = Convention(
    "pydantic-ai",
    claims=claims,
    adapt=adapt,
    # Its request parameters carry tool definitions and instruction texts.
    content=Keys(frozenset({PARAMETERS})),
    ledger=(
        Entry(
            "pydantic-ai",
            ("pydantic-ai",),
            ("genai",),
            # The settings it writes as gen_ai.request.* (this module reads the rest).
            frozenset({fields.MODEL, fields.TOOLS, "max_tokens", "top_p", "seed", "temperature"})
            | {"presence_penalty", "frequency_penalty"},
            "2.68.0 (native, data format 5)",
        ),
    ),
)
