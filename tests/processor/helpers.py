"""Builders for GenAI-convention spans and an oracle that folds commit events back into states."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Span, SpanKind, Tracer

from af_otel import names
from af_otel.store.items import load_items

SYSTEM = [{"type": "text", "content": "You are terse."}]
TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "parts": [{"type": "text", "content": text}]}


def start_attributes(model: str = "gpt-4o-mini") -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        # The system prompt stays a field for this provider (for OpenAI it goes first).
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": model,
    }


def end_attributes(
    messages: Sequence[Mapping[str, Any]],
    *,
    system: Sequence[Mapping[str, Any]] | None = SYSTEM,
    tools: Sequence[Mapping[str, Any]] | None = TOOLS,
    temperature: float | None = 0.2,
) -> dict[str, Any]:
    out: dict[str, Any] = {"gen_ai.input.messages": json.dumps(list(messages))}
    if system is not None:
        out["gen_ai.system_instructions"] = json.dumps(list(system))
    if tools is not None:
        out["gen_ai.tool.definitions"] = json.dumps(list(tools))
    if temperature is not None:
        out["gen_ai.request.temperature"] = temperature
    return out


def start_chat(tracer: Tracer, *, model: str = "gpt-4o-mini", **extra: Any) -> Span:
    return tracer.start_span(
        f"chat {model}", kind=SpanKind.CLIENT, attributes={**start_attributes(model), **extra}
    )


def chat(tracer: Tracer, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> None:
    """One whole LLM-call span, started and ended now, in the current context."""
    span = start_chat(tracer)
    span.set_attributes(end_attributes(messages, **kwargs))
    span.end()


def af(span: ReadableSpan) -> dict[str, Any]:
    return {k: v for k, v in (span.attributes or {}).items() if k.startswith("af.")}


def commits(span: ReadableSpan) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == names.COMMIT_EVENT]


def llm_spans(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if names.RECEIPT_STATE in (s.attributes or {})]


def stored(store: Any, address: str) -> Any:
    """A stored payload or base with its message references resolved (af_otel.store.items)."""
    value = store.get_json(address)
    if isinstance(value, list):
        return load_items(store, value)
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        return {**value, "messages": load_items(store, value["messages"])}
    return value


def fold(
    state: Mapping[str, Any], events: Sequence[Mapping[str, Any]], store: Any = None
) -> dict[str, Any]:
    """Apply commit events to a state, as a reader would (the test's own oracle)."""
    out = dict(state)
    for event in events:
        key, verb = event[names.COMMIT_KEY], event[names.COMMIT_VERB]
        if verb == "delete":
            out.pop(key, None)
            continue
        if names.COMMIT_VALUE in event:
            payload = json.loads(event[names.COMMIT_VALUE])
        else:
            payload = stored(store, event[names.COMMIT_REF])
        if verb == "append":
            out[key] = [*out.get(key, []), *payload]
        else:
            out[key] = payload
    return out


def states(
    spans: Sequence[ReadableSpan], store: Any = None, base: Mapping[str, Any] | None = None
) -> dict[int, dict[str, Any]]:
    """Each epoch's folded state, following af.epoch.parent (epoch 0 is the base)."""
    by_epoch = {int(s.attributes[names.EPOCH]): s for s in llm_spans(spans)}  # type: ignore[index]
    out: dict[int, dict[str, Any]] = {0: dict(base) if base is not None else {"messages": []}}
    for epoch in sorted(by_epoch):
        span = by_epoch[epoch]
        parent = int(span.attributes[names.EPOCH_PARENT])  # type: ignore[index]
        out[epoch] = fold(out[parent], commits(span), store)
    return out
