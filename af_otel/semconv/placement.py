"""One request, one form, whichever convention recorded it: where the system prompt lives, and
message fields a convention adds that the wire request does not carry (docs/receipt-spec.md).

Applied to every adapter's request (`conclude`, which the completion hook's request goes through
too) before a receipt is minted, so two instrumentations recording one wire request mint the same
receipt fields:

* The system prompt lives where the provider's API puts it. Anthropic's Messages API has a
  top-level ``system``: leading ``system`` messages (OpenInference records it as one) become its
  parts, after any the record already holds there. OpenAI's Chat Completions sends it as the first
  message, which every instrumentation of the OpenAI SDK records as a message. A ``system`` message
  after another turn is not the prompt and stays where it is.
* ``name`` on a ``tool`` message: neither API carries it (the call id says which call the result
  answers); a framework adds it from its own tool object, so it is dropped.
"""

from __future__ import annotations

from typing import Any, Final

# The providers whose API takes the system prompt in a field of its own, not as a message.
SYSTEM_AS_FIELD: Final = frozenset({"anthropic"})


def wire_form(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` (an adapter's plain dict) in the one form; a shape it does not expect stays
    as it is (the model's parser judges it)."""
    messages = request.get("messages")
    system = request.get("system")
    if not isinstance(messages, list) or not isinstance(system, list | type(None)):
        return request
    messages = [_without_tool_name(m) for m in messages]
    system = list(system or [])
    while request.get("provider") in SYSTEM_AS_FIELD and messages and _is_system(messages[0]):
        parts = messages.pop(0).get("parts")
        if not isinstance(parts, list):
            return request
        system.extend(parts)
    out = dict(request)
    out["messages"] = messages
    if "system" in request or system:
        out["system"] = system
    return out


def _is_system(message: object) -> bool:
    return isinstance(message, dict) and message.get("role") == "system"


def _without_tool_name(message: object) -> object:
    if isinstance(message, dict) and message.get("role") == "tool" and "name" in message:
        return {k: v for k, v in message.items() if k != "name"}
    return message
