"""Builders of GenAI-shaped parts and messages from the flattened conventions' fields, and the
reasons an adapter stops.

An adapter builds a plain request from its convention's attributes; `af_otel.semconv.adapted.conclude`
then reads it into the GenAI shape by the request model's rules (`shape_request`), so the shape
is checked in one place, and refuses redaction placeholders (`refuse_placeholders`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


def content_text(value: object) -> str:
    """A text content field, refusing placeholders and anything that is not text."""
    refuse_placeholder(value)
    found = text(value)
    if found is None:
        raise unreadable()
    return found


def content_value(value: object) -> JsonValue:
    """A content attribute (JSON string or structured), refusing placeholders and bad JSON."""
    refuse_placeholder(value)
    parsed = json_or_plain(value)
    if isinstance(parsed, Bad):
        raise unreadable()
    return parsed


def refuse_placeholders(parts: Iterable[Mapping[str, object]]) -> None:
    """Stop with ``content-redacted`` when a part's content field holds a placeholder."""
    for part in parts:
        for field in _CONTENT_FIELDS:
            value = part.get(field)
            if isinstance(value, str):
                refuse_placeholder(value)


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
        return {"type": "text", "content": block}
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise unreadable()
    kind = block["type"]
    if kind in ("text", "input_text") and isinstance(block.get("text"), str):
        return {"type": "text", "content": block["text"]}
    if kind == "image_url":
        image = block.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if isinstance(url, str):
            return media_part(url)
    return dict(block)


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
        refuse_placeholders(content)  # nested in the response, out of `conclude`'s sight
        response: JsonValue = None
        if len(content) == 1 and content[0].get("type") == "text":
            response = content[0].get("content")
        elif content:
            response = list(content)
        result: Part = {"type": "tool_call_response", "response": response}
        if tool_call_id is not None:
            result["id"] = tool_call_id
        parts = [result]
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
    return part


def flat_tool(name: object, description: object, parameters: JsonValue) -> Part:
    """A function tool from flattened fields; a description must be text, not a placeholder."""
    tool: Part = {"type": "function", "name": text(name), "parameters": parameters}
    if description is not None:
        tool["description"] = content_text(description)
    return tool
