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
from dataclasses import replace
from typing import Any, Final

from af_otel import names
from af_otel.model import fields as ledger_fields
from af_otel.semconv.adapted import Adapted, conclude
from af_otel.semconv.builders import Absent, content_value, flat_tool, holed, tool_call, unreadable
from af_otel.semconv.coerce import JsonValue, json_or_plain, text
from af_otel.semconv.convention import Convention, Entry
from af_otel.semconv.conventions import genai, openinference
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


# -- LiteLLM under OpenInference (openinference-instrumentation-litellm) ---------------------------
#
# Its spans are OpenInference's, with two losses: the model is LiteLLM's routing name
# (``openai/gpt-4o-mini``: the provider, a slash, the model the provider is sent), and a tool
# message's ``tool_call_id`` is left out of ``llm.input_messages``. The call's arguments in
# ``input.value`` (LiteLLM's OpenAI-shaped ``messages``) still hold each id: where those messages
# line up with the recorded ones (same count, same roles), a tool result missing its id takes it
# from there; otherwise it stays without one.

INPUT_VALUE: Final = "input.value"


def routed_model(attributes: Mapping[str, object]) -> str | None:
    """The model a LiteLLM routing name sends (``openai/gpt-4o-mini`` -> ``gpt-4o-mini``), when
    the span's model is ``<its provider>/<model>``; else None."""
    name = text(attributes.get("llm.model_name"))
    provider = text(attributes.get("llm.provider"))
    if name is None or provider is None:
        return None
    prefix, slash, model = name.partition("/")
    return model if slash and model and prefix == provider else None


def claims_openinference(attributes: Mapping[str, object], span_name: str) -> bool:
    """An OpenInference LLM span of LiteLLM: its model is a routing name of its provider."""
    return openinference.is_llm_call(attributes) and routed_model(attributes) is not None


def adapt_openinference(attributes: Mapping[str, object]) -> Adapted:
    """OpenInference's adaptation with the model sent and the tool results' ids restored."""
    adapted = openinference.adapt(attributes)
    model = routed_model(attributes)
    if adapted.request is None or model is None:
        return adapted
    request = dict(adapted.request)
    if request.get("model") == text(attributes.get("llm.model_name")):
        request["model"] = model
    messages = request.get("messages")
    if isinstance(messages, list):
        request["messages"] = _with_call_ids(messages, attributes.get(INPUT_VALUE))
    return replace(adapted, request=request)


def _with_call_ids(messages: list[Any], raw: object) -> list[Any]:
    decoded = json_or_plain(raw)
    sent = decoded.get("messages") if isinstance(decoded, dict) else None
    if not isinstance(sent, list) or len(sent) != len(messages):
        return messages
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    if roles != [m.get("role") if isinstance(m, dict) else None for m in sent]:
        return messages
    return [
        _with_call_id(m, s) if isinstance(s, dict) else m
        for m, s in zip(messages, sent, strict=True)
    ]


def _with_call_id(message: Any, sent: Mapping[str, Any]) -> Any:
    parts = message.get("parts")
    call_id = text(sent.get("tool_call_id"))
    if message.get("role") != "tool" or call_id is None or not isinstance(parts, list):
        return message
    if len(parts) != 1 or not isinstance(parts[0], dict) or "id" in parts[0]:
        return message
    return {**message, "parts": [{**parts[0], "id": call_id}]}


# LiteLLM under OpenInference: OpenInference's keys with a routing-name model and tool results
# without their call ids (read here before OpenInference's own reading).
LITELLM_OPENINFERENCE: Final = Convention(
    "litellm-openinference", claims=claims_openinference, adapt=adapt_openinference
)
LITELLM: Final = Convention(
    "litellm",
    claims=claims,
    adapt=adapt,
    ledger=(
        Entry(
            "litellm",
            ("litellm",),
            ("litellm",),
            # temperature and top_p are written only when truthy: recorded where the span shows.
            frozenset({ledger_fields.MODEL, ledger_fields.TOOLS, "max_tokens"}),
            "1.110.2 (its OpenTelemetry callback)",
        ),
    ),
)
