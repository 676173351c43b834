"""The side venvs of the four agent stacks of issue 27 this folder drives: the OpenAI Agents SDK,
pydantic-ai, LiteLLM and LlamaIndex, each with its real instrumentation.

Each framework pins its own openai (and OpenTelemetry) releases, which the project venv's
openai 3.x does not meet, so each gets a venv of its own (tests/sidevenv.py builds and caches
them). af_otel is not installed there: the agent finds it on ``PYTHONPATH`` (the repository root),
with its dependencies below.
"""

from __future__ import annotations

from typing import Final

from tests.sidevenv import CACHE, Env

_AGENT_NEEDS: Final = (
    "opentelemetry-sdk>=1.39",
    "opentelemetry-exporter-otlp-json-file==0.66b1",
    "orjson>=3.10",
)

OPENAI_AGENTS: Final = Env(
    "stack-openai-agents",
    CACHE / "stack-openai-agents",
    (
        "openai-agents==0.24.0",
        "opentelemetry-instrumentation-genai-openai-agents==1.3b0",
        "opentelemetry-instrumentation-genai-openai==1.3b0",
        "openinference-instrumentation-openai-agents==2.6.0",
        *_AGENT_NEEDS,
    ),
)
PYDANTIC_AI: Final = Env(
    "stack-pydantic-ai",
    CACHE / "stack-pydantic-ai",
    ("pydantic-ai-slim[openai]==2.68.0", *_AGENT_NEEDS),
)
LITELLM: Final = Env(
    "stack-litellm",
    CACHE / "stack-litellm",
    ("litellm==1.110.2", "openinference-instrumentation-litellm==0.1.51", *_AGENT_NEEDS),
)
LLAMA_INDEX: Final = Env(
    "stack-llama-index",
    CACHE / "stack-llama-index",
    (
        "llama-index-core==0.14.25",
        "llama-index-llms-openai==0.8.3",
        "openinference-instrumentation-llama-index==4.6.1",
        *_AGENT_NEEDS,
    ),
)
