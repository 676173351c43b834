"""The explicit API, for code that calls a model without an instrumentation (or wants its own run).

``with af_otel.run("order-42", base=state):`` makes every LLM call inside part of run
``order-42`` (the salt of its receipts), whichever thread or asyncio task it runs on, as long as
the context is carried there (contextvars). ``base`` is the state the run starts from (a dict
with request keys: ``system``, ``messages``, ``tools``, ``params``, ``model``, ``provider``); it is
stored once and named on every call span as ``af.run.base``. When the block exits it writes the
run's close record (``af.run.close``, `af_otel.processor.closing`): the last epoch of each lane and
its digest, so that a reader can tell a run cut at the end from a shorter one.

``with af_otel.llm_call(model=..., provider=..., messages=...) as call:`` opens a GenAI-convention
span (``chat {model}``, kind CLIENT) through the global tracer provider and hands the request to
af_otel directly, so no content attribute is written unless ``capture_content=True``; without it,
the default ``content=auto`` writes the call's commits to the store, so the span holds no prompt
text at all. The request is read as the block is entered (copies of it: the caller's dicts may
change later), and the receipt minted on the span when the block exits, before the span ends: it
needs no processor, and a processor or exporter passes it through. ``call.set_response(...)``
records the answer. ``messages`` may be an `af_otel.Conversation`, the append-only history, which
is read in time flat in the run's length (`af_otel.processor.explicit_memo`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import orjson
from opentelemetry import trace

from af_otel import names
from af_otel.model import Request
from af_otel.model.conversation import Conversation
from af_otel.processor import explicit_memo
from af_otel.processor.closing import close_run
from af_otel.processor.context import current_run, declare_base, run_entered
from af_otel.processor.engine import Supplied, engine_for, live_engines
from af_otel.processor.guard import guard, settle
from af_otel.processor.hook import live_facts, write_on_span
from af_otel.processor.settings import sdk_disabled
from af_otel.semconv import DIAL_KEYS, SLOTS


@contextmanager
def run(run_id: str, *, base: Mapping[str, Any] | None = None) -> Iterator[str]:
    """Make every LLM call inside part of run ``run_id``; ``base`` is the state it starts from.

    A base that is not a GenAI-shaped request raises `RequestShapeError` here, in the caller's
    code, where the mistake can be fixed (it is not telemetry failing)."""
    request = Request.from_dict(explicit_memo.detached(base)) if base is not None else None
    if request is not None:
        declare_base(run_id, request)
    token = current_run.set(run_id)
    run_entered()
    try:
        yield run_id
    finally:
        current_run.reset(token)
        if request is not None:
            declare_base(run_id, None)
        if not sdk_disabled():
            with guard("run.close"):
                close_run(run_id)
        with guard("run.exit"):
            for engine in live_engines():
                engine.release_run(run_id)


class LLMCall:
    """The open call of an `llm_call` block: record the response on it."""

    def __init__(self, span: trace.Span, capture_content: bool) -> None:
        self.span = span
        self._capture = capture_content

    def set_response(
        self,
        content: str | None = None,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        finish_reason: str | None = None,
        response_model: str | None = None,
        response_id: str | None = None,
    ) -> None:
        """Record the model's answer: usage and finish reason always, the text only when the
        call captures content."""
        attributes: dict[str, Any] = {}
        if input_tokens is not None:
            attributes["gen_ai.usage.input_tokens"] = input_tokens
        if output_tokens is not None:
            attributes["gen_ai.usage.output_tokens"] = output_tokens
        if finish_reason is not None:
            attributes["gen_ai.response.finish_reasons"] = [finish_reason]
        if response_model is not None:
            attributes["gen_ai.response.model"] = response_model
        if response_id is not None:
            attributes["gen_ai.response.id"] = response_id
        if self._capture and content is not None:
            message = {"role": "assistant", "parts": [{"type": "text", "content": content}]}
            if finish_reason is not None:
                message["finish_reason"] = finish_reason
            attributes["gen_ai.output.messages"] = orjson.dumps([message]).decode()
        self.span.set_attributes(attributes)


@contextmanager
def llm_call(
    *,
    model: str,
    provider: str,
    system: str | Sequence[Any] | None = None,
    messages: Sequence[Any] = (),
    tools: Sequence[Any] | None = None,
    params: Mapping[str, Any] | None = None,
    capture_content: bool = False,
) -> Iterator[LLMCall]:
    """Open one LLM call's span; its receipt is minted when the block exits."""
    request: dict[str, Any] = {
        "system": system,
        # A Conversation is read as one: only what was added since the run's last call is new.
        "messages": messages if isinstance(messages, Conversation) else list(messages),
        "tools": list(tools) if tools is not None else None,
        "params": dict(params) if params is not None else None,
        "model": model,
        "provider": provider,
    }
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
    }
    explicit = current_run.get()
    if explicit is not None:
        # On the span too, so that the exporter form (which sees no context) finds the run.
        attributes[names.RUN_ID] = explicit
    # The dials as the GenAI conventions record them, where the processor reads them back.
    for key, (attribute,) in DIAL_KEYS.items():
        value = (params or {}).get(key)
        if isinstance(value, bool | int | float | str) or (
            isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
        ):
            attributes[attribute] = list(value) if isinstance(value, tuple) else value
    if capture_content:
        with guard("llm_call.content"):
            attributes.update(_content(request))
    tracer = trace.get_tracer("af_otel")
    with tracer.start_as_current_span(
        f"chat {model}", kind=trace.SpanKind.CLIENT, attributes=attributes
    ) as span:
        # The request is read as the block is entered, the call being made: what the caller
        # changes in its dicts later is not this call's.
        supplied = None if sdk_disabled() else _read(span, request, capture_content)
        try:
            yield LLMCall(span, capture_content)
        finally:
            if supplied is not None and not sdk_disabled():
                _mint(span, supplied)


def _read(span: trace.Span, request: Mapping[str, Any], capture_content: bool) -> Supplied | None:
    """The call's request as the engine takes it, with only the messages that are new since the
    run's last call normalized (`explicit_memo`); None when the span does not record."""
    with guard("llm_call.read"):
        if not span.is_recording():
            return None
        facts = live_facts(span, dict(getattr(span, "attributes", None) or {}), "af_otel")
        engine = engine_for(facts.key)
        run_state = engine.runs.get(engine.run_of(facts.key, facts.attributes, pop=False))
        found = explicit_memo.read(request, run_state)
        # af_otel sees what the caller says it sends, not the wire: cache-transform stays raised.
        # With content capture off (the default) the request is not on the span, so the default
        # content mode writes its commits to the store: no prompt text on the trace.
        if found is None:
            return Supplied(explicit_memo.detached(request), direct=False, on_span=capture_content)
        return Supplied(
            found.request,
            direct=False,
            on_span=capture_content,
            sealed=found.sealed,
            scan=found.scan,
            prefix=found.prefix,
        )
    return None


def _mint(span: trace.Span, supplied: Supplied) -> None:
    failure: Exception | None = None
    try:
        if not span.is_recording():
            return
        facts = live_facts(span, dict(getattr(span, "attributes", None) or {}), "af_otel")
        write_on_span(span, engine_for(facts.key).enrich_handed(facts, supplied))
    except Exception as exc:
        failure = exc
    if failure is not None:
        settle("llm_call", failure)


def _content(request: Mapping[str, Any]) -> dict[str, str]:
    """The GenAI content attributes of the call, written only when asked."""
    normalized = Request.from_dict(request).to_dict()
    return {
        slot.key: orjson.dumps(normalized[slot.target]).decode()
        for slot in SLOTS
        if slot.target in normalized
    }
