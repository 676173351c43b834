"""Adapter for LiteLLM's own OpenTelemetry callback (``litellm.integrations.opentelemetry``).

The callback writes its span after the call returns, from LiteLLM's logging object, not from the
body sent: ``litellm_request`` (or, opted into the latest GenAI conventions, ``chat <model>``)
with the GenAI content keys in LiteLLM's own shape, and by default a ``raw_gen_ai_request`` child
whose ``llm.<provider>.<param>`` values are the provider request's and the provider response's
keys in one namespace, lists and mappings written with ``str()`` (Python ``repr``, not JSON).

What LiteLLM's record holds, read here:

- ``gen_ai.input.messages``: GenAI messages, but an assistant turn's tool calls sit in an
  OpenAI-shaped ``tool_calls`` key beside its (empty) ``parts``, and a tool result is a ``tool``
  message of text parts with a ``tool_call_id`` key. Both are read into GenAI parts
  (``tool_call``, ``tool_call_response``); a tool call that cannot be read makes the record
  unreadable, never an empty turn.
- Tool definitions only as ``llm.request.functions.N.{name,description,parameters}`` (the
  legacy OpenLLMetry spelling; no ``strict``, no tool ``type``).
- ``gen_ai.request.temperature``, ``max_tokens`` and ``top_p``, each written only when truthy (a
  temperature of 0 is left off), so the ledger counts temperature and top_p as recorded only
  where the span shows them.

``raw_gen_ai_request`` is not an LLM call (its parent is) and is never adapted: its Python
``repr`` values are not JSON, and its ``model`` key holds the *response's* model, which
overwrote the request's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from af_otel import names
from af_otel.semconv import genai
from af_otel.semconv.adapted import Adapted, conclude
from af_otel.semconv.builders import Absent, content_value, flat_tool, holed, tool_call, unreadable
from af_otel.semconv.coerce import JsonValue, text
from af_otel.semconv.rows import bucket, dense, read_rows

# Keys only LiteLLM's callback writes on its request span.
MARKERS: Final = frozenset({"litellm.call_id", "litellm.provider.model", "hidden_params"})
RAW_REQUEST_SPAN: Final = "raw_gen_ai_request"
FUNCTIONS: Final = "llm.request.functions."


def claims(attributes: Mapping[str, object], span_name: str) -> bool:
    """A request span LiteLLM's callback wrote."""
    return any(key in MARKERS for key in attributes)


def adapt(attributes: Mapping[str, object]) -> Adapted:
    """Adapt a LiteLLM callback span: its GenAI keys with its own tool-call and tool-result
    spelling, tools from ``llm.request.functions.*``."""
    return conclude("litellm", attributes, lambda: _build(attributes))


def _build(attributes: Mapping[str, object]) -> tuple[dict[str, object], list[str]]:
    if genai.MESSAGES.key not in attributes:
        raise Absent(names.REASON_NOT_CAPTURED)
    raw = content_value(attributes[genai.MESSAGES.key])
    if not isinstance(raw, list):
        raise unreadable()
    functions = dense(bucket(list(attributes.items()), FUNCTIONS))
    if functions is None:
        raise holed()
    basis, notes = genai.model_and_provider(attributes)
    request: dict[str, object] = {
        "system": [],
        "messages": [_message(message) for message in raw],
        "tools": [_tool(fields) for fields in functions],
        "params": read_rows(attributes, genai.PARAMS),
        **basis,
    }
    return request, notes


def _message(message: JsonValue) -> dict[str, JsonValue]:
    """One of LiteLLM's messages as a GenAI message."""
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        raise unreadable()
    role = text(message.get("role"))
    parts = message["parts"]
    if role is None or not isinstance(parts, list):
        raise unreadable()
    out: dict[str, JsonValue] = {"role": role}
    if "name" in message:
        out["name"] = message["name"]
    if role == "tool":
        out["parts"] = [_result(parts, message.get("tool_call_id"))]
        return out
    calls = message.get("tool_calls")
    if calls is None:
        out["parts"] = list(parts)
        return out
    if not isinstance(calls, list):
        raise unreadable()
    out["parts"] = [*parts, *(_call(call) for call in calls)]
    return out


def _result(parts: list[JsonValue], call_id: JsonValue) -> JsonValue:
    """A tool message's text parts as the one ``tool_call_response`` the request sent."""
    if not all(isinstance(p, dict) and p.get("type") == "text" for p in parts):
        raise unreadable()
    texts = [p["content"] for p in parts if isinstance(p, dict)]
    if not all(isinstance(t, str) for t in texts):
        raise unreadable()
    response: JsonValue = "".join(t for t in texts if isinstance(t, str))
    part: dict[str, JsonValue] = {"type": "tool_call_response", "response": response}
    if call_id is not None:
        identifier = text(call_id)
        if identifier is None:
            raise unreadable()
        part["id"] = identifier
    return part


def _call(call: JsonValue) -> dict[str, JsonValue]:
    """An OpenAI-shaped tool call (``{"id", "type", "function": {"name", "arguments"}}``)."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(call, dict) or not isinstance(function, dict):
        raise unreadable()
    return tool_call(call.get("id"), function.get("name"), function.get("arguments"))


def _tool(fields: dict[str, object]) -> JsonValue:
    parameters = content_value(fields["parameters"]) if "parameters" in fields else None
    if not isinstance(parameters, dict | None):
        raise unreadable()
    return flat_tool(fields.get("name"), fields.get("description"), parameters)
