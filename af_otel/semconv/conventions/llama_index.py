"""LlamaIndex under OpenInference (``openinference-instrumentation-llama-index``): what differs
from the OpenInference spans of a provider SDK.

- Every method of an LLM class is a span of kind ``LLM``, including
  ``<LLM>._prepare_chat_with_tools``, which only builds the arguments of the chat call that
  follows it (no input messages, no request sent): it is not an LLM call.
- ``llm.invocation_parameters`` is the LLM object's metadata (``context_window``,
  ``num_output``, ``is_chat_model``, ``model_name``, ...), not the arguments of the request:
  ``num_output`` is the LLM's configured output budget, and the temperature is not there at
  all. So no dial is read from it (only the model name), and the ledger counts no dial as
  recorded (`af_otel.semconv.ledger`): the view never says a setting was left to the provider
  when the request set it.

Otherwise the span is OpenInference's (`af_otel.semconv.openinference`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from af_otel.model import fields
from af_otel.semconv.adapted import Adapted
from af_otel.semconv.convention import Convention, Entry
from af_otel.semconv.conventions import openinference

# The methods of llama-index's function-calling LLMs that prepare a call without making one.
PREPARES_ONLY: Final = frozenset({"_prepare_chat_with_tools"})
# Keys of llama-index's LLMMetadata, the object its instrumentation writes as the parameters.
METADATA_KEYS: Final = frozenset({"context_window", "num_output", "is_chat_model"})


def prepares_only(attributes: Mapping[str, object], span_name: str) -> bool:
    """An OpenInference span of a method that prepares an LLM call and makes none."""
    method = span_name.rpartition(".")[2]
    return method in PREPARES_ONLY and openinference.SPAN_KIND in attributes


def claims(attributes: Mapping[str, object], span_name: str) -> bool:
    """An OpenInference span whose parameters are llama-index's LLM metadata."""
    return openinference.parameters_hold(attributes, METADATA_KEYS)


def adapt(attributes: Mapping[str, object]) -> Adapted:
    """OpenInference's adaptation with no dial taken from the LLM's metadata."""
    adapted = openinference.adapt(attributes)
    if adapted.request is None or not adapted.request.get("params"):
        return adapted
    return replace(adapted, request={**adapted.request, "params": {}})


LLAMA_INDEX: Final = Convention(
    "llama-index",
    claims=claims,
    vetoes=prepares_only,
    adapt=adapt,
    ledger=(
        Entry(
            "openinference-llama-index",
            ("openinference.instrumentation.llama_index",),
            ("openinference",),
            # Its parameters are the LLM's metadata, not the request's (this module).
            frozenset({fields.MODEL, fields.TOOLS}),
            "4.6.1 (llama-index-core 0.14.25, llama-index-llms-openai 0.8.3)",
        ),
    ),
)
