"""Adapter for opentelemetry-instrumentation-google-genai (util-genai, scope
``opentelemetry.instrumentation.google_genai``): the GenAI keys, with two things of its own.

It invents an id for every function call and function response the request carries without one
(the Gemini API pairs a response with its call by name, and sends no id unless the caller set
one): ``{name}_{index}``, the part's index in its turn, or the index alone. And it records a
function response without the function's name. So an id of that shape is not the request's and is
left out of the request, and the field ledger names ``tool_call.id`` and ``tool_result.name`` as
unrecorded wherever such parts are on record (`af_otel.semconv.ledger`, ``Entry.lacks``). Its spans name
the provider ``gemini`` or ``vertex_ai``. Google ADK's own ``generate_content`` span (with
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``) is of the same shape and read alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from af_otel.model import fields
from af_otel.model.request import SAMPLING_KEYS
from af_otel.semconv.adapted import NOTE_OUTPUT_TYPE, Adapted, conclude
from af_otel.semconv.coerce import text
from af_otel.semconv.convention import Convention, Entry
from af_otel.semconv.conventions import genai

PROVIDERS: Final = frozenset({"gemini", "vertex_ai", "gcp.gemini", "gcp.vertex_ai", "gcp.gen_ai"})
_PAIRED: Final = frozenset({"tool_call", "tool_call_response"})
# ADK's legacy ``call_llm`` span: the whole request as ADK's JSON, not the GenAI keys.
ADK_REQUEST: Final = "gcp.vertex.agent.llm_request"
# What every ADK generate_content span carries: its legacy format's names no provider.
ADK_INVOCATION: Final = "gcp.vertex.agent.invocation_id"


def claims(attributes: Mapping[str, object], span_name: str) -> bool:
    """A generate-content span naming a Google provider: the instrumentation's, or Google ADK's
    own (scope ``gcp.vertex.agent``, which writes the same keys and invents ids the same way),
    which in ADK's legacy format names no provider and is told by ADK's invocation id."""
    provider = text(attributes.get("gen_ai.provider.name") or attributes.get("gen_ai.system"))
    google = provider in PROVIDERS or (provider is None and ADK_INVOCATION in attributes)
    return (
        text(attributes.get(genai.OPERATION)) == "generate_content"
        and google
        and ADK_REQUEST not in attributes
    )


def is_llm_call(attributes: Mapping[str, object], span_name: str) -> bool:
    return genai.is_llm_call(attributes, span_name)


def invented(part: Mapping[str, Any], index: int) -> bool:
    """Whether ``part``'s id has the shape the instrumentation gives a part that had none."""
    found = part.get("id")
    if not isinstance(found, str):
        return False
    return found == str(index) or found.endswith(f"_{index}")


def _without_invented(message: Any) -> Any:
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        return message
    kept = [
        {k: v for k, v in part.items() if k != "id"}
        if isinstance(part, dict) and part.get("type") in _PAIRED and invented(part, index)
        else part
        for index, part in enumerate(parts)
    ]
    return {**message, "parts": kept}


def _build(attributes: Mapping[str, object]) -> tuple[dict[str, object], list[str]]:
    request, notes = genai.build_request(attributes)
    messages = request.get("messages")
    if isinstance(messages, list):
        request["messages"] = [_without_invented(m) for m in messages]
    return request, notes


def adapt(attributes: Mapping[str, object]) -> Adapted:
    return conclude("google-genai", attributes, lambda: _build(attributes))


# Fields beyond `fields.FIELDS` its rows lack (`Entry.lacks`).
TOOL_CALL_ID: Final = "tool_call.id"
TOOL_RESULT_NAME: Final = "tool_result.name"
_LACKS: Final = ((TOOL_CALL_ID, "tool_call"), (TOOL_RESULT_NAME, "tool_call_response"))
# The dials util-genai's instrumentation of the Google client records.
_GOOGLE_DIALS: Final = frozenset(SAMPLING_KEYS)

GOOGLE_GENAI: Final = Convention(
    "google-genai",
    claims=claims,
    is_llm_call=is_llm_call,
    adapt=adapt,
    content=genai.CONTENT,
    output=genai.OUTPUT,
    stacks=(
        Entry(
            "google-genai",
            ("opentelemetry.instrumentation.google_genai",),
            ("google-genai",),
            frozenset({fields.MODEL, fields.TOOLS, *_GOOGLE_DIALS}),
            "1.3b0 on google-genai 2.34.0 (and 3.6.1 with skip_dep_check)",
            marked=(("response_format", NOTE_OUTPUT_TYPE),),
            lacks=_LACKS,
        ),
        Entry(
            "google-adk",
            ("gcp.vertex.agent",),
            ("google-genai",),
            # Its generate_content span (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental):
            # the GenAI content keys, the ids google-genai's instrumentation would invent, no dials.
            frozenset({fields.MODEL, fields.TOOLS}),
            "2.13.0",
            lacks=_LACKS,
        ),
    ),
    model_keys=("gen_ai.request.model",),
    response_id_keys=("gen_ai.response.id",),
)
