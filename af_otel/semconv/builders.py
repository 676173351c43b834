"""Builders of GenAI-shaped parts, messages and tools, shared by the convention adapters.

They check shape as they build, so an adapter either returns a request ``Request.from_dict``
accepts or stops with :class:`Absent` naming why no request can be had.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from af_otel import names
from af_otel.semconv.coerce import Bad, JsonValue, is_placeholder, json_or_plain, text

Part = dict[str, JsonValue]

# Part fields that hold the content itself; a placeholder in one of them means the content was
# withheld, and a receipt over the placeholder would fingerprint the placeholder.
_CONTENT_FIELDS: Final = ("content", "arguments", "response", "result")


class Absent(Exception):
    """No request can be minted; ``reason`` is one of the ``names.REASON_*`` values."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def unreadable() -> Absent:
    return Absent(names.REASON_UNREADABLE)


def holed() -> Absent:
    """An indexed family with a missing index: part of the record was lost (an evicted attribute,
    a cut export), and a request rebuilt without it would be a different request."""
    return Absent(names.REASON_CUT)


def refuse_placeholder(value: object) -> None:
    """Stop with ``content-redacted`` when ``value`` is a redaction placeholder."""
    if is_placeholder(value):
        raise Absent(names.REASON_REDACTED)


def content_value(value: object) -> JsonValue:
    """A content attribute (JSON string or structured), refusing placeholders and bad JSON."""
    refuse_placeholder(value)
    parsed = json_or_plain(value)
    if isinstance(parsed, Bad):
        raise unreadable()
    return parsed


def checked_part(part: Part) -> Part:
    """A part with a string ``type``; ``result`` read as ``response``; placeholders refused."""
    if not isinstance(part.get("type"), str):
        raise unreadable()
    for field in _CONTENT_FIELDS:
        refuse_placeholder(part.get(field))
    if part["type"] == "tool_call_response" and "response" not in part and "result" in part:
        part = {**part, "response": part["result"]}
        del part["result"]
    return part


def genai_parts(value: JsonValue) -> list[Part]:
    """GenAI parts as given in ``gen_ai.system_instructions`` or a message's ``parts``."""
    if isinstance(value, str):  # a bare string is read as one text part
        return [checked_part({"type": "text", "content": value})]
    if not isinstance(value, list):
        raise unreadable()
    parts: list[Part] = []
    for item in value:
        if isinstance(item, str):
            parts.append(checked_part({"type": "text", "content": item}))
        elif isinstance(item, dict):
            parts.append(checked_part(item))
        else:
            raise unreadable()
    return parts


def genai_messages(value: JsonValue) -> list[dict[str, JsonValue]]:
    """GenAI chat messages ``[{"role", "parts", "name"?}]``."""
    if not isinstance(value, list):
        raise unreadable()
    messages: list[dict[str, JsonValue]] = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("role"), str):
            raise unreadable()
        raw_parts = item.get("parts")
        if raw_parts is None and isinstance(item.get("content"), str):
            raw_parts = item["content"]
        parts: JsonValue = list(genai_parts(raw_parts if raw_parts is not None else []))
        message: dict[str, JsonValue] = {"role": item["role"], "parts": parts}
        name = item.get("name")
        if name is not None:
            if not isinstance(name, str):
                raise unreadable()
            message["name"] = name
        messages.append(message)
    return messages


def tool_definition(value: JsonValue) -> dict[str, JsonValue]:
    """One tool, flattened: OpenAI ``{"type","function":{...}}`` and Anthropic ``input_schema``
    both become ``{"type","name","description"?,"parameters"?}``."""
    if not isinstance(value, dict):
        raise unreadable()
    body = value
    inner = value.get("function")
    if isinstance(inner, dict):
        body = {**inner, "type": value.get("type") or "function"}
    if "parameters" not in body and "input_schema" in body:
        body = {**body, "parameters": body["input_schema"]}
        del body["input_schema"]
    tool: dict[str, JsonValue] = {key: item for key, item in body.items() if item is not None}
    tool.setdefault("type", "function")
    if not isinstance(tool.get("name"), str) or not isinstance(tool["type"], str):
        raise unreadable()
    return tool


def genai_tools(value: JsonValue) -> list[dict[str, JsonValue]]:
    if not isinstance(value, list):
        raise unreadable()
    return [tool_definition(item) for item in value]


def media_part(url: str, modality: str = "image") -> Part:
    """A media reference as OpenAI sends it: a ``data:`` URL is an inline blob, else a ``uri``."""
    if url.startswith("data:"):
        header, _, payload = url[len("data:") :].partition(",")
        blob: Part = {"type": "blob", "modality": modality, "content": payload}
        mime_type = header.split(";", 1)[0]
        if mime_type:
            blob["mime_type"] = mime_type
        return blob
    return {"type": "uri", "modality": modality, "uri": url}


def openai_block(block: JsonValue) -> Part:
    """One OpenAI content block (``text``, ``image_url``, ...) as a GenAI part."""
    if isinstance(block, str):
        return checked_part({"type": "text", "content": block})
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise unreadable()
    kind = block["type"]
    if kind in ("text", "input_text") and isinstance(block.get("text"), str):
        return checked_part({"type": "text", "content": block["text"]})
    if kind == "image_url":
        image = block.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if isinstance(url, str):
            return checked_part(media_part(url))
    return checked_part(dict(block))


def flat_message(
    role: str,
    name: str | None,
    content: list[Part],
    tool_calls: Iterable[Part],
    tool_call_id: str | None,
) -> dict[str, JsonValue]:
    """A message rebuilt from a flattened convention's fields.

    A ``tool`` message is one ``tool_call_response`` part, as util-genai writes it. Otherwise text
    comes before tool calls — the order of the Chat Completions fields; util-genai's OpenAI
    instrumentation writes tool calls first (docs/instrumentations.md).
    """
    parts: list[JsonValue]
    if role == "tool":
        response: JsonValue = None
        if len(content) == 1 and content[0].get("type") == "text":
            response = content[0].get("content")
        elif content:
            response = list(content)
        result: Part = {"type": "tool_call_response", "response": response}
        if tool_call_id is not None:
            result["id"] = tool_call_id
        parts = [checked_part(result)]
    else:
        parts = [*content, *tool_calls]
    message: dict[str, JsonValue] = {"role": role, "parts": parts}
    if name is not None:
        message["name"] = name
    return message


def tool_call(call_id: object, name: object, arguments: object) -> Part:
    """A ``tool_call`` part from flattened fields; ``arguments`` stay as given (JSON text)."""
    function = text(name)
    if function is None:
        raise unreadable()
    part: Part = {"type": "tool_call", "name": function}
    if text(call_id) is not None:
        part["id"] = text(call_id)
    args = text(arguments)
    if arguments is not None and args is None:
        raise unreadable()
    # An empty arguments string is what an SDK sends for "no arguments"; util-genai records null.
    if args:
        part["arguments"] = args
    return checked_part(part)
