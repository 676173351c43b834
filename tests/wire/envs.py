"""The Pythons the wire scenarios run in: the project's venv, or a pinned side venv for an
instrumentation that cannot share it.

opentelemetry-instrumentation-openai-v2 2.4b0 imports util-genai's ``instruments`` module, which
util-genai 1.2b0 renamed and 1.3b0 (needed by genai-openai and genai-anthropic) does not have, so
it runs against util-genai 1.1b0 in a venv of its own; OpenLLMetry's anthropic instrumentation
gets one too, as its openai one does in tests/semconv (tests/sidevenv.py builds and caches the
side venvs). af_otel itself is not installed there: the agent finds it on ``PYTHONPATH`` (the
repository root), with its dependencies pinned below.
"""

from __future__ import annotations

from typing import Final

from tests.sidevenv import CACHE, Env, ensure

__all__ = ["MAIN", "OPENAI_V2", "OPENLLMETRY_ANTHROPIC", "OPENLLMETRY_OPENAI", "Env", "ensure"]

# What af_otel and the agent need besides the instrumentation, at the project venv's releases.
_AGENT_NEEDS: Final = (
    "opentelemetry-sdk==1.45.2",
    "opentelemetry-exporter-otlp-json-file==0.66b1",
    "orjson>=3.10",
)


MAIN: Final = Env("main")
OPENAI_V2: Final = Env(
    "openai-v2",
    CACHE / "wire-openai-v2",
    (
        "opentelemetry-instrumentation-openai-v2==2.4b0",
        "opentelemetry-util-genai==1.1b0",
        "openai==3.57.0",
        "httpx>=0.27",  # openai-v2 reads URLs with httpx, whichever HTTP library openai uses
        *_AGENT_NEEDS,
    ),
)
OPENLLMETRY_OPENAI: Final = Env(
    "openllmetry-openai",
    CACHE / "wire-openllmetry-openai",
    ("opentelemetry-instrumentation-openai==0.62.4", "openai==3.57.0", *_AGENT_NEEDS),
)
OPENLLMETRY_ANTHROPIC: Final = Env(
    "openllmetry-anthropic",
    CACHE / "wire-openllmetry-anthropic",
    ("opentelemetry-instrumentation-anthropic==0.62.4", "anthropic==2.14.0", *_AGENT_NEEDS),
)
