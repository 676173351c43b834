"""The normalized model request (docs/receipt-spec.md §3): one value whatever instrumentation captured it.

Normalization is what makes the same request captured by different instrumentations mint the same
receipt, so each rule lives here once and `docs/receipt-spec.md` restates it:

1. ``null`` and absent are the same: keys whose value is ``None`` are dropped at the schema level
   (request, message, part, tool, params). Inside free-form content (tool arguments and responses,
   JSON schemas) values are kept exactly as given.
2. ``tool_call.arguments`` given as a string is parsed as JSON when it parses; otherwise the string
   is kept. A ``tool_call_response`` whose payload is under ``result`` is read as ``response``.
3. OpenAI-style tools ``{"type": "function", "function": {...}}`` flatten to
   ``{"type": "function", "name", "description"?, "parameters"?}``; a tool without ``type`` is a
   ``function``; Anthropic's ``input_schema`` is read as ``parameters`` when those are absent.
4. ``system`` given as one string is one text part (an empty string is no part); a message given
   ``content`` instead of ``parts`` has one text part for a string, or the list as its parts; when
   both are given ``parts`` wins. A part given as a bare string is a text part. Unknown part types
   are kept as they are; message keys other than ``role``, ``parts`` and ``name`` are not part of
   the normalized message (adapters turn them into parts).
5. ``params`` keep only the dials of ``gen_ai.request.*`` and the settings that steer the model
   (``tool_choice``, ``parallel_tool_calls``, ``response_format``, ``reasoning_effort``,
   ``thinking``; the Responses API's ``reasoning_summary``, ``truncation``, ``store``) that are set, each as the caller gave it; ``stop_sequences`` is a list. Empty
   ``system``/``tools``/``params`` are the same as absent. A ``tool_call_response`` part's
   ``is_error`` is kept when true and dropped when false (false is the default).
6. Key order never matters (the hash is over RFC 8785 canonical JSON).

Values are frozen at the schema level (`FrozenDict`, tuples). Free-form content inside parts is not
copied — copying a 1,000-row tool result on every call would cost more than hashing it — so it is
shared with the caller, who must not mutate it after handing it over.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

import orjson

from af_otel.errors import RequestShapeError

PARAM_KEYS: Final = (
    "temperature",
    "max_tokens",
    "top_p",
    "top_k",
    "stop_sequences",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "choice_count",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "reasoning_effort",
    "thinking",
    # the Responses API's own settings (reasoning.summary, truncation, store)
    "reasoning_summary",
    "truncation",
    "store",
)
REQUEST_KEYS: Final = ("system", "messages", "tools", "params", "model", "provider")


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses mutation: JSON writers and ``==`` see a plain dict."""

    __slots__ = ()

    def _refuse(self, *_: object, **__: object) -> NoReturn:
        raise TypeError("af_otel request values are immutable")

    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        # Over the keys only: equal dicts have equal keys, while `1 == 1.0 == True` and free-form
        # values may be unhashable, so a hash over values could break `a == b -> hash equal`.
        return hash(frozenset(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))


def _fail(where: str, what: str) -> NoReturn:
    raise RequestShapeError(f"{where}: {what}")


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        _fail(where, f"expected an object, got {type(value).__name__}")
    return value


def _items(value: object, where: str) -> Iterable[Any]:
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        return value
    _fail(where, f"expected a list, got {type(value).__name__}")


def _drop_none(mapping: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    for key, value in mapping.items():
        if value is not None:
            yield key, value


def normalize_part(part: object, where: str) -> FrozenDict:
    """One content part, normalized (rules 1, 2 and 4 of the module docstring)."""
    if isinstance(part, str):
        return FrozenDict(type="text", content=part)
    raw = _mapping(part, where)
    body = dict(_drop_none(raw))
    kind = body.get("type")
    if not isinstance(kind, str):
        _fail(where, "a part needs a string 'type'")
    if kind == "tool_call":
        arguments = body.get("arguments")
        if isinstance(arguments, str):
            # rule 2: a string that does not parse is kept as the string
            with contextlib.suppress(orjson.JSONDecodeError):
                body["arguments"] = orjson.loads(arguments)
    elif kind == "tool_call_response":
        if "response" not in body and "result" in body:
            body["response"] = body.pop("result")
        if body.get("is_error") is False:
            del body["is_error"]
    return FrozenDict(body)


def normalize_message(message: object, where: str) -> FrozenDict:
    """One chat message ``{"role", "parts", "name"?}``, normalized."""
    raw = _mapping(message, where)
    role = raw.get("role")
    if not isinstance(role, str):
        _fail(where, "a message needs a string 'role'")
    parts_in = raw.get("parts")
    if parts_in is None:
        content = raw.get("content")
        if isinstance(content, str):
            parts_in = [{"type": "text", "content": content}]
        elif isinstance(content, list | tuple):
            parts_in = content
        elif content is not None:
            _fail(f"{where}.content", "expected a string or a list of parts")
    parts = tuple(
        normalize_part(p, f"{where}.parts[{i}]")
        for i, p in enumerate(_items(parts_in, f"{where}.parts"))
    )
    body: dict[str, Any] = {"role": role, "parts": parts}
    name = raw.get("name")
    if name is not None:
        if not isinstance(name, str):
            _fail(where, "'name' must be a string")
        body["name"] = name
    return FrozenDict(body)


def normalize_tool(tool: object, where: str) -> FrozenDict:
    """One tool definition, OpenAI-style nesting flattened (rule 3)."""
    raw = _mapping(tool, where)
    inner = raw.get("function")
    if isinstance(inner, Mapping):
        merged = {**dict(_drop_none(inner)), "type": raw.get("type") or "function"}
    else:
        merged = dict(_drop_none(raw))
    merged.setdefault("type", "function")
    if "input_schema" in merged and "parameters" not in merged:
        # Anthropic's spelling of the same JSON Schema (rule 3): one tool, one receipt
        merged["parameters"] = merged.pop("input_schema")
    if not isinstance(merged.get("name"), str):
        _fail(where, "a tool needs a string 'name'")
    return FrozenDict(merged)


def normalize_params(params: object, where: str = "params") -> FrozenDict:
    """The dials that were set (rule 5)."""
    if params is None:
        return FrozenDict()
    raw = _mapping(params, where)
    body: dict[str, Any] = {}
    for key in PARAM_KEYS:
        value = raw.get(key)
        if value is None:
            continue
        if key == "stop_sequences":
            value = [value] if isinstance(value, str) else list(_items(value, f"{where}.{key}"))
        body[key] = value
    return FrozenDict(body)


@dataclass(frozen=True, slots=True)
class Request:
    """A normalized model request. Build with :meth:`from_dict`; compare with ``==``."""

    system: tuple[FrozenDict, ...] = ()
    messages: tuple[FrozenDict, ...] = ()
    tools: tuple[FrozenDict, ...] = ()
    params: FrozenDict = field(default_factory=FrozenDict)
    model: str | None = None
    provider: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Request:
        """Build from a GenAI-shaped dict; raises :class:`RequestShapeError` naming the field."""
        raw = _mapping(data, "request")
        system_in = raw.get("system")
        if isinstance(system_in, str):
            system_in = [system_in] if system_in else []
        system = tuple(
            normalize_part(p, f"system[{i}]") for i, p in enumerate(_items(system_in, "system"))
        )
        messages = tuple(
            normalize_message(m, f"messages[{i}]")
            for i, m in enumerate(_items(raw.get("messages"), "messages"))
        )
        tools = tuple(
            normalize_tool(t, f"tools[{i}]")
            for i, t in enumerate(_items(raw.get("tools"), "tools"))
        )
        model = raw.get("model")
        provider = raw.get("provider")
        for name, value in (("model", model), ("provider", provider)):
            if value is not None and not isinstance(value, str):
                _fail(name, f"expected a string, got {type(value).__name__}")
        return cls(system, messages, tools, normalize_params(raw.get("params")), model, provider)

    def to_dict(self) -> dict[str, Any]:
        """The normalized plain form; its canonical JSON is what ``af.receipt.bytes`` measures."""
        out: dict[str, Any] = {"messages": list(self.messages)}
        if self.system:
            out["system"] = list(self.system)
        if self.tools:
            out["tools"] = list(self.tools)
        if self.params:
            out["params"] = self.params
        if self.model is not None:
            out["model"] = self.model
        if self.provider is not None:
            out["provider"] = self.provider
        return out

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(str(tool["name"]) for tool in self.tools)

    def forced_tool(self) -> str | None:
        """The tool ``tool_choice`` forces: its name, ``"required"`` for any tool, else None."""
        return forced_tool(self.params.get("tool_choice"))


def forced_tool(choice: object) -> str | None:
    """Read ``tool_choice`` in the shapes providers use: a name, ``{"name"}``, OpenAI's
    ``{"type": "function", "function": {"name"}}``, or ``"required"``/``"any"``."""
    if isinstance(choice, str):
        if choice in ("required", "any"):
            return "required"
        if choice in ("auto", "none", ""):
            return None
        return choice
    if isinstance(choice, Mapping):
        inner = choice.get("function")
        name = inner.get("name") if isinstance(inner, Mapping) else choice.get("name")
        if isinstance(name, str) and name:
            return name
        if choice.get("type") in ("any", "required"):
            return "required"
    return None


# Reasoning the model read but the record cannot show (the `thinking-replay` gap): a part of a
# redacted-reasoning type, or a reasoning part whose text is empty or that carries a signature or
# an encrypted payload. The emitter and the reader both ask this one question.
REASONING_TYPES: Final = frozenset({"reasoning", "thinking"})
REDACTED_REASONING_TYPES: Final = frozenset({"redacted_thinking", "redacted_reasoning"})
SEALED_KEYS: Final = ("signature", "encrypted_content", "encrypted", "redacted")


def sealed_reasoning(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` replays reasoning whose content is withheld or encrypted."""
    for part in message.get("parts", ()):
        kind = part.get("type")
        if kind in REDACTED_REASONING_TYPES:
            return True
        if kind in REASONING_TYPES and (
            not part.get("content") or any(key in part for key in SEALED_KEYS)
        ):
            return True
    return False
