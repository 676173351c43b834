"""One request, one form, whichever convention recorded it: where the system prompt lives, and
message fields a convention adds that the wire request does not carry (docs/receipt-spec.md).

Applied to every adapter's request (`conclude`, which the completion hook's request goes through
too) before a receipt is minted, so two instrumentations recording one wire request mint the same
receipt fields:

* The system prompt lives where the provider's API puts it, the provider being the one the record
  names (``gen_ai.provider.name``, ``gen_ai.system``, ``llm.provider``, ``llm.system``, as the
  adapter normalized it). Anthropic's Messages API has a top-level ``system``: leading ``system``
  messages (OpenInference records it as one) become its parts, after any the record already holds
  there. OpenAI's Chat Completions (and the APIs shaped like it) sends it as the first message: a
  top-level ``system`` (OpenLLMetry's LangChain instrumentation records it so) becomes one leading
  ``system`` message, before any the record holds. A ``system`` message after another turn is not
  the prompt and stays where it is. The Responses API's ``instructions`` is a field of its own on
  the wire and is left as recorded, and so is every record whose provider is unnamed or another:
  the span does not say where the wire put the prompt.
* ``name`` on a ``tool`` message: neither API carries it (the call id says which call the result
  answers); a framework adds it from its own tool object, so it is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from af_otel.semconv.responses import is_responses

# The providers whose API takes the system prompt in a field of its own, not as a message.
SYSTEM_AS_FIELD: Final = frozenset({"anthropic"})
# The providers whose chat API takes it as the first message: OpenAI's Chat Completions and the
# APIs that copy its request shape (`gen_ai.provider.name` values).
SYSTEM_AS_MESSAGE: Final = frozenset(
    {
        "openai",
        "azure.ai.openai",
        "azure.ai.inference",
        "deepseek",
        "groq",
        "mistral_ai",
        "perplexity",
        "x_ai",
    }
)


def wire_form(
    request: dict[str, Any], attributes: Mapping[str, object] | None = None
) -> dict[str, Any]:
    """``request`` (an adapter's plain dict, read off ``attributes``) in the one form; a shape it
    does not expect stays as it is (the model's parser judges it)."""
    messages = request.get("messages")
    system = request.get("system")
    if not isinstance(messages, list) or not isinstance(system, list | type(None)):
        return request
    messages = [_without_tool_name(m) for m in messages]
    system = list(system or [])
    provider = request.get("provider")
    while provider in SYSTEM_AS_FIELD and messages and _is_system(messages[0]):
        parts = messages.pop(0).get("parts")
        if not isinstance(parts, list):
            return request
        system.extend(parts)
    if system and prompt_first(provider, attributes):
        messages.insert(0, {"role": "system", "parts": system})
        system = []
    out = dict(request)
    out["messages"] = messages
    if "system" in request or system:
        out["system"] = system
    return out


def prompt_first(provider: object, attributes: Mapping[str, object] | None) -> bool:
    """Whether a top-level ``system`` recorded for ``provider`` is sent as the first message:
    an OpenAI-shaped provider, and not the Responses API (read off the span's ``attributes``)."""
    return provider in SYSTEM_AS_MESSAGE and not is_responses(attributes or {})


def _is_system(message: object) -> bool:
    return isinstance(message, dict) and message.get("role") == "system"


def _without_tool_name(message: object) -> object:
    if isinstance(message, dict) and message.get("role") == "tool" and "name" in message:
        return {k: v for k, v in message.items() if k != "name"}
    return message
