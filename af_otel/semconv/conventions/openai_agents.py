"""The OpenAI Agents SDK under OpenInference (``openinference-instrumentation-openai-agents``):
its LLM spans are built from the SDK's response span data after the call, not from the request.

The input messages are the request's input items, but everything else on the span is the
*response's echo*: ``llm.invocation_parameters`` is the Response object's settings (with its
``id`` and ``created_at``), ``llm.tools`` the tools the response names, ``llm.model_name`` the
model the response names. A provider echoes its defaults for what the request left out
(``top_p`` 1, ``tool_choice`` auto, ``truncation`` disabled) and its own form of each tool, so none
of these can stand for what was sent: the request read here has no settings, no tools and the
model noted as the response's, and the ledger (`af_otel.semconv.ledger`) names them unrecorded.
The instructions, which the echo repeats as they were sent, stay as the first message.

The same holds for any OpenInference span whose parameters are a response echo (they carry the
response's ``id`` and ``created_at``), which is how such a span is known.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from af_otel.semconv.adapted import NOTE_MODEL_FROM_RESPONSE, Adapted
from af_otel.semconv.convention import Convention, Entry
from af_otel.semconv.conventions import openinference

ECHO_KEYS: Final = frozenset({"id", "created_at"})


def claims(attributes: Mapping[str, object], span_name: str) -> bool:
    """An OpenInference span whose parameters are the response's echo."""
    return openinference.parameters_hold(attributes, ECHO_KEYS)


def adapt(attributes: Mapping[str, object]) -> Adapted:
    """OpenInference's adaptation without what the response echoed."""
    adapted = openinference.adapt(attributes)
    if adapted.request is None:
        return adapted
    request = {**adapted.request, "params": {}, "tools": []}
    notes = tuple(n for n in adapted.notes if n != NOTE_MODEL_FROM_RESPONSE)
    return replace(adapted, request=request, notes=(*notes, NOTE_MODEL_FROM_RESPONSE))


OPENAI_AGENTS: Final = Convention(
    "openai-agents",
    claims=claims,
    adapt=adapt,
    ledger=(
        Entry(
            "openinference-openai-agents",
            ("openinference.instrumentation.openai_agents",),
            ("openinference",),
            # Settings, tools and model are the response's echo (this module leaves them out).
            frozenset(),
            "2.6.0 (openai-agents 0.24.0)",
        ),
    ),
)
