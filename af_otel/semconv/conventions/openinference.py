"""OpenInference (Arize's ``openinference-instrumentation-*``): flattened, indexed
``llm.input_messages.N.message.*`` and ``llm.tools.N.tool.*``, dials in ``llm.invocation_parameters``.

Its indexed attributes always take the full path: proving their prefix unchanged means reading
every attribute again (no `Convention.incremental`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from af_otel import names
from af_otel.model import fields as ledger_fields
from af_otel.model.request import Request
from af_otel.semconv import responses
from af_otel.semconv.adapted import (
    NOTE_MODEL_FROM_RESPONSE,
    NOTE_MODEL_NOT_CAPTURED,
    NOTE_PARAMS_UNREADABLE,
    NOTE_TOOLS_ECHOED,
    NOTE_UNPLACED,
    Adapted,
    conclude,
)
from af_otel.semconv.builders import (
    Absent,
    Part,
    content_text,
    content_value,
    flat_message,
    flat_tool,
    holed,
    media_part,
    refuse_placeholder,
    tool_call,
    unreadable,
)
from af_otel.semconv.coerce import (
    Bad,
    JsonValue,
    is_placeholder,
    json_or_plain,
    plain,
    provider,
    text,
)
from af_otel.semconv.convention import Convention, Entry, Keys
from af_otel.semconv.rows import DIAL_TYPES, Row, bucket, dense, dial_rows, read_rows

SPAN_KIND: Final = "openinference.span.kind"
INPUT_MESSAGES: Final = "llm.input_messages."
PROMPTS: Final = "llm.prompts."
TOOLS: Final = "llm.tools."
CONTENTS: Final = "message.contents."
TOOL_CALLS: Final = "message.tool_calls."
CONTENT_PREFIX: Final = "message_content."


# The decoded `llm.invocation_parameters` object holds the caller's own argument names, which
# differ by provider SDK; most are the dial's own name.
PARAMS: Final = dial_rows(
    {dial: (dial,) for dial in DIAL_TYPES if dial != "choice_count"},
    {
        "max_tokens": ("max_completion_tokens", "max_output_tokens", "max_tokens_to_sample"),
        "stop_sequences": ("stop",),
        "choice_count": ("n", "candidate_count"),
    },
)
# `llm.model_name` is what openinference-instrumentation-openai copies from the *response*; the
# request model is in the invocation parameters (or `llm.request.model_name` in newer releases).
MODEL: Final = (Row("model", ("llm.request.model_name",), text),)
INVOKED_MODEL: Final = (Row("model", ("model", "model_name", "model_id"), text),)
RESPONSE_MODEL: Final = (Row("model", ("llm.response.model_name", "llm.model_name"), text),)
PROVIDER: Final = (Row("provider", ("llm.provider", "llm.system"), provider),)
# Invocation arguments the adapter reads (dials, the model, the Responses settings and the content
# it reads from attributes of their own), and those that show the model nothing (how the answer
# travels, bookkeeping). Any other argument is named unrecorded (`NOTE_UNPLACED`): a legacy
# `function_call`, Anthropic's `output_config`, `logit_bias`.
_INVOCATION_READ: Final = frozenset(
    {source for row in (*PARAMS, *INVOKED_MODEL) for source in row.sources}
    | {"reasoning", "text", "truncation", "store", *responses.HELD_KEYS}
    | {"messages", "input", "instructions", "system", "tools", "include"}
    | {"stream", "stream_options", "metadata", "user", "service_tier", "safety_identifier"}
    | {"prompt_cache_key", "prompt_cache_retention", "extra_headers", "extra_query"}
    | {"extra_body", "timeout"}
)


def claims(attributes: Mapping[str, object], span_name: str) -> bool:
    """A span OpenInference wrote."""
    return SPAN_KIND in attributes or any(key.startswith(INPUT_MESSAGES) for key in attributes)


def is_llm_call(attributes: Mapping[str, object]) -> bool:
    kind = text(attributes.get(SPAN_KIND))
    return kind is not None and kind.upper() == "LLM"


def adapt(attributes: Mapping[str, object]) -> Adapted:
    """Adapt an OpenInference span; ``input.value`` (the raw request) is not read."""
    return conclude("openinference", attributes, lambda: _build(attributes))


def _build(attributes: Mapping[str, object]) -> tuple[dict[str, object], list[str]]:
    items = list(attributes.items())
    messages = dense(responses.from_one(bucket(items, INPUT_MESSAGES), attributes))
    prompts = dense(bucket(items, PROMPTS))
    tools = dense(bucket(items, TOOLS))
    if messages is None or prompts is None or tools is None:
        raise holed()
    if messages:
        built = [_message(fields) for fields in messages]
    elif prompts:  # the completions API: each prompt text is a user turn
        built = [_prompt(fields) for fields in prompts]
    else:
        raise Absent(names.REASON_NOT_CAPTURED)
    notes: list[str] = []
    params, invocation = _invocation(attributes, notes)
    raw = attributes.get("input.value")  # the request's arguments: only looked at, not parsed
    if isinstance(raw, str) and '"functions":' in raw and "functions" not in invocation:
        notes.append(NOTE_UNPLACED + "functions")  # legacy tools OpenInference leaves off
    if tools and responses.is_responses(attributes):
        tools, notes = [], [*notes, NOTE_TOOLS_ECHOED]  # written from the response's echo
    model = read_rows(attributes, MODEL) or read_rows(invocation, INVOKED_MODEL)
    if not model:
        model = read_rows(attributes, RESPONSE_MODEL)
        notes.append(NOTE_MODEL_FROM_RESPONSE if model else NOTE_MODEL_NOT_CAPTURED)
    provider = read_rows(attributes, PROVIDER)
    if provider.get("provider") == "anthropic":
        built = _user_turns(built)
    request: dict[str, object] = {
        "system": [],  # a leading system message is moved here by `wire_form` where the API has it
        "messages": built,
        "tools": [_tool(fields) for fields in tools],
        "params": params,
        **model,
        **provider,
    }
    return request, notes


def _user_turns(built: list[dict[str, JsonValue]]) -> list[dict[str, JsonValue]]:
    """An Anthropic conversation's tool results back in the user turns they came in.

    openinference-anthropic splits a user turn's tool results off into ``tool`` messages ahead of
    the rest of that turn; the Messages API has no ``tool`` role, so a run of tool results with
    the user content right after it is one user turn again. (It also writes the request's
    ``system`` as a first message, which `wire_form` moves back, as for every convention.)
    """
    merged: list[dict[str, JsonValue]] = []
    pending: list[JsonValue] = []
    for message in built:
        parts = message["parts"]
        if message["role"] == "tool" and isinstance(parts, list):
            pending.extend(parts)
            continue
        if pending and message["role"] == "user" and isinstance(parts, list):
            merged.append({**message, "parts": [*pending, *parts]})
        else:
            if pending:
                merged.append({"role": "user", "parts": pending})
            merged.append(message)
        pending = []
    if pending:
        merged.append({"role": "user", "parts": pending})
    return merged


def parameters_hold(attributes: Mapping[str, object], keys: frozenset[str]) -> bool:
    """An OpenInference span whose invocation parameters decode to an object holding every key
    of ``keys``: how the frameworks that write them their own way tell their spans apart
    (LlamaIndex's LLM metadata, the OpenAI Agents SDK's response echo)."""
    if SPAN_KIND not in attributes:
        return False
    raw = attributes.get(responses.INVOCATION_PARAMETERS)
    if raw is None or is_placeholder(raw):
        return False
    decoded = json_or_plain(raw)
    return isinstance(decoded, dict) and decoded.keys() >= keys


def _invocation(
    attributes: Mapping[str, object], notes: list[str]
) -> tuple[dict[str, object], Mapping[str, object]]:
    if responses.INVOCATION_PARAMETERS not in attributes:
        return {}, {}
    raw = attributes[responses.INVOCATION_PARAMETERS]
    decoded = None if is_placeholder(raw) else json_or_plain(raw)
    if not isinstance(decoded, dict):
        notes.append(NOTE_PARAMS_UNREADABLE)
        return {}, {}
    notes += [
        NOTE_UNPLACED + key
        for key in sorted(decoded)
        if key not in _INVOCATION_READ and decoded[key] is not None
    ]
    # The Responses API nests its settings (reasoning.effort, text.format): read them too.
    return {**read_rows(decoded, PARAMS), **responses.params_of(decoded)}, decoded


def _message(fields: dict[str, object]) -> dict[str, JsonValue]:
    role = text(fields.get("message.role"))
    name = fields.get("message.name")
    if role is None or (name is not None and text(name) is None):
        raise unreadable()
    contents = dense(bucket(fields.items(), CONTENTS))
    calls = dense(bucket(fields.items(), TOOL_CALLS))
    if contents is None or calls is None:
        raise holed()
    if contents:
        # A `tool_use` entry repeats a call that `message.tool_calls` holds (openinference-anthropic).
        parts = [_content(entry) for entry in contents if not _repeats_a_call(entry)]
    elif "message.content" in fields:
        parts = [_text(fields["message.content"])]
    else:
        parts = []
    tool_calls = [
        tool_call(
            call.get("tool_call.id"),
            call.get("tool_call.function.name"),
            # OpenInference writes a call's arguments only when they are not empty.
            call.get("tool_call.function.arguments", "{}"),
        )
        for call in calls
    ]
    if "message.function_call_name" in fields:  # the pre-tools `function_call` API
        tool_calls.append(
            tool_call(
                None,
                fields["message.function_call_name"],
                fields.get("message.function_call_arguments_json"),
            )
        )
    tool_call_id = text(fields.get("message.tool_call_id"))
    return flat_message(role, text(name), parts, tool_calls, tool_call_id)


def _prompt(fields: dict[str, object]) -> dict[str, JsonValue]:
    return {"role": "user", "parts": [_text(fields.get("prompt.text"))]}


def _text(value: object) -> Part:
    return {"type": "text", "content": content_text(value)}


def _repeats_a_call(entry: dict[str, object]) -> bool:
    return text(entry.get(CONTENT_PREFIX + "type")) == "tool_use" and "tool_call.id" in entry


def _reasoning(entry: dict[str, object]) -> Part:
    """A reasoning entry: its text as a GenAI reasoning part with its signature; one that holds
    only sealed ``data`` is Anthropic's redacted thinking."""
    sealed = entry.get(CONTENT_PREFIX + "encrypted_content")
    if sealed is not None and CONTENT_PREFIX + "text" not in entry:
        # A Responses reasoning item replayed with its encrypted content and no summary.
        refuse_placeholder(sealed)
        return {"type": "reasoning", "content": "", "encrypted_content": text(sealed)}
    if CONTENT_PREFIX + "data" in entry and CONTENT_PREFIX + "text" not in entry:
        refuse_placeholder(entry[CONTENT_PREFIX + "data"])
        return {"type": "redacted_thinking", "data": text(entry[CONTENT_PREFIX + "data"])}
    part = _text(entry.get(CONTENT_PREFIX + "text"))
    part["type"] = "reasoning"
    signature = entry.get(CONTENT_PREFIX + "signature")
    if signature is not None:
        part["signature"] = text(signature)
        if part["signature"] is None:
            raise unreadable()
    return part


def _content(entry: dict[str, object]) -> Part:
    """One ``message.contents.M`` entry: text, reasoning, an image URL, or another typed part as
    it is."""
    kind = text(entry.get(CONTENT_PREFIX + "type"))
    if kind == "text":
        return _text(entry.get(CONTENT_PREFIX + "text"))
    if kind == "reasoning":
        return _reasoning(entry)
    if kind == "image":
        return media_part(content_text(entry.get(CONTENT_PREFIX + "image.image.url")))
    if kind is None:
        raise unreadable()
    part: Part = {"type": kind}
    for key, value in entry.items():
        if key.startswith(CONTENT_PREFIX) and key != CONTENT_PREFIX + "type":
            copied = plain(value)
            if isinstance(copied, Bad):
                raise unreadable()
            part[key[len(CONTENT_PREFIX) :]] = copied
    return part


def _tool(fields: dict[str, object]) -> JsonValue:
    """``tool.json_schema`` (the provider's whole tool object) or ``tool.name``/``description``/
    ``parameters``."""
    if "tool.json_schema" in fields:
        return content_value(fields["tool.json_schema"])
    parameters = fields.get("tool.parameters")
    return flat_tool(
        fields.get("tool.name"),
        fields.get("tool.description"),
        None if parameters is None else content_value(parameters),
    )


LEDGER: Final = (
    Entry(
        "openinference",
        ("openinference.instrumentation",),
        ("openinference",),
        # anthropic 3.1 writes a thinking block's signature; older releases may not, so a
        # signature counts as recorded only where the span shows one.
        frozenset(ledger_fields.FIELDS)
        - {ledger_fields.TOOL_ERROR, ledger_fields.SIGNATURE, ledger_fields.TOOLS},
        "openai 0.1.66, anthropic 3.1",
        # On a Responses call its tools are the response's echo, which the adapter leaves out.
        marked=((ledger_fields.TOOLS, NOTE_TOOLS_ECHOED),),
    ),
)
CONTENT: Final = Keys(
    frozenset({"input.value", "output.value"})
    | {"llm.prompt_template.template", "llm.prompt_template.variables"},
    (INPUT_MESSAGES, "llm.output_messages.", TOOLS, PROMPTS, "llm.choices."),
)
OUTPUT: Final = Keys(frozenset({"output.value"}), ("llm.output_messages.", "llm.choices."))


def responses_missing(request: Request) -> tuple[str, ...]:
    """openai 0.1.66 leaves out a Responses input item's arguments string of "{}", so a replayed
    call shown without arguments may have had "{}"."""
    calls = (
        p for m in request.messages for p in m.get("parts", ()) if p.get("type") == "tool_call"
    )
    return (responses.CALL_ARGUMENTS,) if any("arguments" not in p for p in calls) else ()


def responses_call(attributes: Mapping[str, object], span_name: str = "") -> bool:
    """A Responses API call as OpenInference records it: its invocation parameters hold a key
    no Chat Completions request has, or its ``input.value`` (the request's own arguments as
    JSON) holds ``input``."""
    if responses.RESPONSES_ONLY & set(responses.invocation(attributes)):
        return True
    raw = attributes.get("input.value")
    return isinstance(raw, str) and '"input"' in raw and "input" in (responses.decoded(raw) or {})


OPENINFERENCE: Final = Convention(
    "openinference",
    claims=claims,
    is_llm_call=lambda attributes, span_name: is_llm_call(attributes),
    adapt=adapt,
    content=CONTENT,
    output=OUTPUT,
    ledger=LEDGER,
    sdk_scopes=frozenset(
        {"openinference.instrumentation.openai", "openinference.instrumentation.anthropic"}
    ),
    model_keys=("llm.model_name",),
    # It keeps the request's own arguments and every input item.
    responses=frozenset(responses.RESPONSES_FIELDS),
    responses_missing=responses_missing,
    responses_call=responses_call,
)
