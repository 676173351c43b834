"""One request, one form, whichever convention recorded it: where the system prompt lives, and
message fields a convention adds that the wire request does not carry (docs/receipt-spec.md).

Applied to every adapter's request (`conclude`) and to the completion hook's, before a receipt is
minted, so two instrumentations recording one wire request mint the same receipt fields:

* System placement follows the provider's wire: OpenAI's Chat Completions sends the system prompt
  as the first message, so a ``system`` field becomes one ``system`` message put first; Anthropic's
  Messages API sends it as the top-level ``system``, so leading ``system`` messages become the
  ``system`` parts. Any other provider keeps the record's placement.
* ``name`` on a ``tool`` message: neither API carries it (the call id says which call the result
  answers); a framework adds it from its own tool object, so it is dropped.
"""

from __future__ import annotations

from typing import Any, Final

# The providers whose wire puts the system prompt in the messages, or in a field of its own.
SYSTEM_AS_MESSAGE: Final = frozenset({"openai"})
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
    provider = request.get("provider")
    if provider in SYSTEM_AS_MESSAGE and system:
        messages.insert(0, {"role": "system", "parts": system})
        system = []
    elif provider in SYSTEM_AS_FIELD:
        while messages and _is_system(messages[0]):
            system.extend(messages.pop(0).get("parts") or [])
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
