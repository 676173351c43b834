"""Whether a host is a provider's own endpoint: then only the provider's client stood between the
body the tap saw and the provider (no ``cache-transform``). Gemini's and Bedrock's hosts carry a
region in their name, so they are matched by shape (each endpoint's `Endpoint.hosts`); OpenAI's
and Anthropic's are one name each (`af_otel.processor.export_gaps.PROVIDER_HOSTS`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from af_otel.wire.endpoints import ENDPOINTS

# provider (`gen_ai.provider.name` value) -> the full-match pattern of its own hosts.
PATTERNS: Final[Mapping[str, re.Pattern[str]]] = {
    provider: pattern for endpoint in ENDPOINTS for provider, pattern in endpoint.hosts.items()
}


def provider_host(provider: str | None, host: str) -> bool:
    """Whether ``host`` (lower case) is one of ``provider``'s own endpoints by `PATTERNS`."""
    pattern = PATTERNS.get(provider or "")
    return pattern is not None and pattern.fullmatch(host) is not None
