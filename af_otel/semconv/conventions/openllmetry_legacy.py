"""OpenLLMetry up to 0.54: indexed ``gen_ai.prompt.N.*`` messages and
``llm.request.functions.N.*`` tools, ``gen_ai.completion.*`` the output (not read). Asked before
the >=0.55 family, which claims its spans too (it shares their markers).

Its indexed attributes always take the full path: proving their prefix unchanged means reading
every attribute again (no `Convention.incremental`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from af_otel import names
from af_otel.semconv.adapted import Adapted, conclude
from af_otel.semconv.builders import (
    Absent,
    Part,
    content_text,
    content_value,
    flat_message,
    flat_tool,
    holed,
    openai_block,
    tool_call,
    unreadable,
)
from af_otel.semconv.coerce import JsonValue, parse_json, text
from af_otel.semconv.convention import Convention, Entry, Keys
from af_otel.semconv.conventions import genai
from af_otel.semconv.conventions.openllmetry import (
    FUNCTIONS,
    PARAMS,
    PROMPTS,
    RECORDED,
    REQUEST_TYPE,
    SDK_SCOPES,
)
from af_otel.semconv.rows import bucket, dense, read_rows

TOOL_CALLS: Final = "tool_calls."


def is_legacy(attributes: Mapping[str, object]) -> bool:
    """Written by OpenLLMetry <=0.54: indexed prompts, or its request type, and no GenAI content."""
    if genai.MESSAGES.key in attributes:
        return False
    return REQUEST_TYPE in attributes or any(
        key.startswith((PROMPTS, FUNCTIONS)) for key in attributes
    )


def adapt_legacy(attributes: Mapping[str, object]) -> Adapted:
    """Adapt an OpenLLMetry <=0.54 span; ``gen_ai.completion.*`` (the output) is not read."""
    return conclude("openllmetry-legacy", attributes, lambda: _build_legacy(attributes))


def _build_legacy(attributes: Mapping[str, object]) -> tuple[dict[str, object], list[str]]:
    items = list(attributes.items())
    prompts = dense(bucket(items, PROMPTS))
    if prompts is None:
        raise holed()
    if not prompts:
        raise Absent(names.REASON_NOT_CAPTURED)
    messages = [_legacy_message(fields) for fields in prompts]
    functions = dense(bucket(items, FUNCTIONS))
    if functions is None:
        raise holed()
    basis, notes = genai.model_and_provider(attributes)
    request: dict[str, object] = {
        "system": [],
        "messages": messages,
        "tools": [_legacy_tool(fields) for fields in functions],
        "params": read_rows(attributes, PARAMS),
        **basis,
    }
    return request, notes


def _legacy_message(fields: dict[str, object]) -> dict[str, JsonValue]:
    role = text(fields.get("role"))
    raw_content = fields.get("content")
    if role is None and "user" in fields:  # the completions API wrote `gen_ai.prompt.0.user`
        role, raw_content = "user", fields["user"]
    if role is None:
        raise unreadable()
    calls = dense(bucket(fields.items(), TOOL_CALLS))
    if calls is None:
        raise holed()
    tool_calls = [tool_call(c.get("id"), c.get("name"), c.get("arguments")) for c in calls]
    tool_call_id = text(fields.get("tool_call_id"))
    return flat_message(role, None, _legacy_content(raw_content), tool_calls, tool_call_id)


def _legacy_content(value: object) -> list[Part]:
    """Message content: a string, or (list content) the JSON of OpenAI's content blocks."""
    if value is None:
        return []
    content = content_text(value)
    if content.startswith("["):
        blocks = parse_json(content)
        if isinstance(blocks, list) and blocks and all(_is_block(b) for b in blocks):
            return [openai_block(block) for block in blocks]
    return [{"type": "text", "content": content}]


def _is_block(value: JsonValue) -> bool:
    return isinstance(value, dict) and isinstance(value.get("type"), str)


def _legacy_tool(fields: dict[str, object]) -> dict[str, JsonValue]:
    # Written with json.dumps, so a function without parameters reads "null".
    parameters = content_value(fields["parameters"]) if "parameters" in fields else None
    if not isinstance(parameters, dict | None):
        raise unreadable()
    return flat_tool(fields.get("name"), fields.get("description"), parameters)


OPENLLMETRY_LEGACY: Final = Convention(
    "openllmetry-legacy",
    claims=lambda attributes, span_name: is_legacy(attributes),
    # Its LLM calls are told by the >=0.55 family's `llm.request.type`, which it writes too.
    adapt=adapt_legacy,
    content=Keys(prefixes=(PROMPTS, "gen_ai.completion.", FUNCTIONS)),
    output=Keys(prefixes=("gen_ai.completion.",)),
    ledger=(
        Entry(
            "openllmetry-legacy",
            ("opentelemetry.instrumentation",),
            ("openllmetry-legacy",),
            RECORDED,
            "<=0.54",
        ),
    ),
    sdk_scopes=SDK_SCOPES,
)
