"""The instrumentation families af_otel reads, one module each, and the registry of them.

A family is one module that declares one `Convention` (`af_otel.semconv.convention`) and one line
in `BUILT_IN` below; docs/instrumentations.md ("Adding a convention") says how.
"""

from __future__ import annotations

from typing import Final

from af_otel.semconv.convention import Convention, install, named, register, registered, tables
from af_otel.semconv.conventions.completion_hook import COMPLETION_HOOK
from af_otel.semconv.conventions.genai import GENAI
from af_otel.semconv.conventions.google_genai import GOOGLE_GENAI
from af_otel.semconv.conventions.litellm import LITELLM, LITELLM_OPENINFERENCE
from af_otel.semconv.conventions.llama_index import LLAMA_INDEX
from af_otel.semconv.conventions.llm_call import LLM_CALL
from af_otel.semconv.conventions.openai_agents import OPENAI_AGENTS
from af_otel.semconv.conventions.openinference import OPENINFERENCE
from af_otel.semconv.conventions.openllmetry import OPENLLMETRY
from af_otel.semconv.conventions.openllmetry_legacy import OPENLLMETRY_LEGACY
from af_otel.semconv.conventions.pydantic_ai import PYDANTIC_AI

__all__ = ["BUILT_IN", "Convention", "named", "register", "registered", "tables"]

# Order matters: the first family that claims a span reads it. OpenInference first: with
# OPENINFERENCE_ENABLE_GENAI_SEMCONV its spans carry the gen_ai.* keys too, and its own keys are
# the record it always writes. OpenLLMetry <=0.54 before >=0.55 (which shares the GenAI content
# keys); google-genai (GenAI keys of a Google provider) after them; all before the GenAI
# default, which claims every span (`register` puts a new family ahead of it). The hook and the
# explicit API claim no span: they are handed their request. Frameworks that write a family's
# keys their own way come before that family: LlamaIndex's OpenInference spans, those built from
# a response's echo (the OpenAI Agents SDK) and LiteLLM's before OpenInference (their ledger
# rows' scopes are children of OpenInference's, so they must be asked first too); LiteLLM's
# callback before OpenLLMetry, whose `llm.request.type` and `llm.request.functions.*` it also
# writes; pydantic-ai's native spans before the GenAI default.
BUILT_IN: Final = (
    LLAMA_INDEX,
    OPENAI_AGENTS,
    LITELLM_OPENINFERENCE,
    OPENINFERENCE,
    LITELLM,
    OPENLLMETRY_LEGACY,
    OPENLLMETRY,
    GOOGLE_GENAI,
    PYDANTIC_AI,
    GENAI,
    COMPLETION_HOOK,
    LLM_CALL,
)
install(BUILT_IN)
