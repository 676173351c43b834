"""The side venvs of the Google GenAI, Google ADK and Bedrock stack tests: each stack's real
package and its real instrumentation, pinned, built once outside the repository by
tests/sidevenv.py. af_otel is not installed there: the agents find it on ``PYTHONPATH``.

opentelemetry-instrumentation-google-genai 1.3b0 supports ``google-genai >=1.32, <3``, so it runs
against google-genai 2.34.0 (which sends through httpx); google-genai 3.6.1 (which sends through
httpx2) gets a venv of its own with the same instrumentation, whose dependency check then refuses
to instrument. google-adk 2.13.0 pins google-genai <3 and opentelemetry-sdk <=1.44.
"""

from __future__ import annotations

from typing import Final

from tests.sidevenv import CACHE, Env

_AGENT_NEEDS: Final = (
    "opentelemetry-sdk==1.45.2",
    "opentelemetry-exporter-otlp-json-file==0.66b1",
    "orjson>=3.10",
)
_GOOGLE_GENAI_INSTRUMENTATION: Final = (
    "opentelemetry-instrumentation-google-genai==1.3b0",
    "opentelemetry-util-genai==1.3b0",
)

GOOGLE_GENAI: Final = Env(
    "google-genai-2",
    CACHE / "stacks-google-genai-2",
    ("google-genai==2.34.0", *_GOOGLE_GENAI_INSTRUMENTATION, *_AGENT_NEEDS),
)
GOOGLE_GENAI_3: Final = Env(
    "google-genai-3",
    CACHE / "stacks-google-genai-3",
    ("google-genai==3.6.1", *_GOOGLE_GENAI_INSTRUMENTATION, *_AGENT_NEEDS),
)
GOOGLE_ADK: Final = Env(
    "google-adk",
    CACHE / "stacks-google-adk",
    (
        "google-adk==2.13.0",
        "google-genai==2.34.0",
        "opentelemetry-sdk==1.44.0",
        "opentelemetry-exporter-otlp-json-file",
        "orjson>=3.10",
    ),
)
BEDROCK: Final = Env(
    "bedrock",
    CACHE / "stacks-bedrock",
    (
        "boto3==1.44.5",
        "botocore==1.44.5",
        "opentelemetry-instrumentation-botocore==0.66b2",
        "opentelemetry-instrumentation-genai-bedrock==1.3b0",
        "opentelemetry-util-genai==1.3b0",
        *_AGENT_NEEDS,
    ),
)
