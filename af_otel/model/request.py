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
   ``function``; Anthropic's ``input_schema`` is read as ``parameters`` when those are absent;
   a tool needs a string ``name`` and ``type``.
4. ``system`` given as one string is one text part (an empty string is no part); a message given
   ``content`` instead of ``parts`` has one text part for a string, or the list as its parts (and
   ``parts`` given as a string is one text part); when both are given ``parts`` wins. A part given
   as a bare string is a text part. Unknown part types are kept as they are. A message in the
   Chat Completions shape (no ``parts``) is read as its wire reader reads it: an assistant's
   ``tool_calls`` (and ``function_call``) are ``tool_call`` parts after its text, a ``tool``
   message with a ``tool_call_id`` is one ``tool_call_response``. Other message keys than
   ``role``, ``parts`` and ``name`` are not part of the normalized message.
5. ``params`` keep only the dials of ``gen_ai.request.*`` and the settings that steer the model
   (``tool_choice``, ``parallel_tool_calls``, ``response_format``, ``reasoning_effort``,
   ``thinking``; the Responses API's ``reasoning_summary``, ``truncation``, ``store``) that are set, each as the caller gave it; ``stop_sequences`` is a list. Empty
   ``system``/``tools``/``params`` are the same as absent. A ``tool_call_response`` part's
   ``is_error`` is kept when true and dropped when false (false is the default).
6. Key order never matters (the hash is over RFC 8785 canonical JSON).

The reading rules (the shape: 1, 3, 4 and the ``result`` spelling of 2) are `read_part`,
`read_message` and `read_tool`, which `shape_request` applies for the adapters, whose requests
stay plain values; `fix_part` and `fix_message` apply the value rules and freeze, and the
``normalize_*`` functions do both. `Request.from_shaped` builds from an adapter's request
without reading it a second time.

Values are frozen at the schema level (`FrozenDict`, tuples). Free-form content inside parts is not
copied — copying a 1,000-row tool result on every call would cost more than hashing it — so it is
shared with the caller, who must not mutate it after handing it over.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn, TypeVar

import orjson

from af_otel.errors import RequestShapeError

# The params (rule 5): the sampling dials of ``gen_ai.request.*``, the settings that steer the
# model, and the Responses API's own settings (reasoning.summary, truncation, store).
SAMPLING_KEYS: Final = (
    "temperature",
    "max_tokens",
    "top_p",
    "top_k",
    "stop_sequences",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "choice_count",
)
STEERING_KEYS: Final = (
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "reasoning_effort",
    "thinking",
)
RESPONSES_KEYS: Final = ("reasoning_summary", "truncation", "store")
PARAM_KEYS: Final = (*SAMPLING_KEYS, *STEERING_KEYS, *RESPONSES_KEYS)
REQUEST_KEYS: Final = ("system", "messages", "tools", "params", "model", "provider")
# Roles that give instructions rather than take a turn: conventions record them as a message or
# beside the messages (the Responses API's ``instructions``, a ``system`` field).
INSTRUCTION_ROLES: Final = frozenset({"system", "developer"})

_T = TypeVar("_T")


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
    if type(value) is dict:  # what JSON parsers give: the ABC check is the slow way to say yes
        return value
    if not isinstance(value, Mapping):
        _fail(where, f"expected an object, got {type(value).__name__}")
    return value


def _items(value: object, where: str) -> Iterable[Any]:
    if value is None:
        return ()
    if type(value) is list or isinstance(value, list | tuple):
        return value
    _fail(where, f"expected a list, got {type(value).__name__}")


def _drop_none(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in mapping.items() if value is not None}


def each(value: object, where: str, read: Callable[[object, str], _T]) -> list[_T]:
    """``read`` over the items of the list ``value``. Reading is pure, so the items are read
    without naming each one's place, and read again, each named, only to say where one failed."""
    items = _items(value, where)
    try:
        return [read(item, where) for item in items]
    except RequestShapeError:
        for index, item in enumerate(items):
            read(item, f"{where}[{index}]")
        raise


def read_part(part: object, where: str) -> dict[str, Any]:
    """One content part in the GenAI shape (rules 1, 4 and the ``result`` spelling of rule 2)."""
    if isinstance(part, str):
        return {"type": "text", "content": part}
    body = _drop_none(_mapping(part, where))
    kind = body.get("type")
    if not isinstance(kind, str):
        _fail(where, "a part needs a string 'type'")
    if kind == "tool_call_response" and "response" not in body and "result" in body:
        body["response"] = body.pop("result")
    return body


def fix_part(body: Mapping[str, Any]) -> FrozenDict:
    """A part as `read_part` gives it, with the values rules 2 and 5 fix, frozen (``body``
    itself is left as it is: an adapter's request is read once and fixed here)."""
    kind = _word(body["type"])
    if kind == "tool_call":
        arguments = body.get("arguments")
        if isinstance(arguments, str):
            # rule 2: a string that does not parse is kept as the string
            with contextlib.suppress(orjson.JSONDecodeError):
                return FrozenDict(body, type=kind, arguments=orjson.loads(arguments))
    elif kind == "tool_call_response" and body.get("is_error") is False:
        return FrozenDict({k: v for k, v in body.items() if k != "is_error"}, type=kind)
    return FrozenDict(body, type=kind)


def read_message(message: object, where: str) -> dict[str, Any]:
    """One chat message ``{"role", "parts", "name"?}``, its parts read by `read_part` (rule 4:
    ``parts``, else ``content``; either given as a string is one text part)."""
    raw = _mapping(message, where)
    role = raw.get("role")
    if not isinstance(role, str):
        _fail(where, "a message needs a string 'role'")
    key = "parts" if raw.get("parts") is not None else "content"
    given = raw.get(key)
    if isinstance(given, str):
        given = [given]
    elif given is not None and not isinstance(given, list | tuple):
        _fail(f"{where}.{key}", "expected a string or a list of parts")
    parts = each(given, where + ".parts", read_part)
    if raw.get("parts") is None:
        parts = _chat_parts(raw, role, parts, where)
    body: dict[str, Any] = {"role": role, "parts": parts}
    name = raw.get("name")
    if name is not None:
        if not isinstance(name, str):
            _fail(where, "'name' must be a string")
        body["name"] = name
    return body


def _chat_parts(
    raw: Mapping[str, Any], role: str, parts: list[dict[str, Any]], where: str
) -> list[dict[str, Any]]:
    """A Chat Completions message's parts (rule 4): a ``tool`` message's ``content`` is one
    ``tool_call_response`` with its ``tool_call_id``, and an assistant's ``tool_calls`` (and
    legacy ``function_call``) follow its text as ``tool_call`` parts, as the wire reader of Chat
    Completions reads them, so a history handed in either shape mints one receipt."""
    if role == "tool" and raw.get("tool_call_id") is not None:
        answer = {"type": "tool_call_response", "id": raw["tool_call_id"]}
        parts = [_drop_none({**answer, "response": raw.get("content")})]
    calls = raw.get("tool_calls")
    if calls is not None and not isinstance(calls, list | tuple):
        _fail(f"{where}.tool_calls", "expected a list of tool calls")
    parts += each(calls or (), where + ".tool_calls", _chat_call)
    legacy = raw.get("function_call")
    if legacy is not None:
        parts.append(_chat_call({"type": "function", "function": legacy}, where + ".function_call"))
    return parts


def _chat_call(call: object, where: str) -> dict[str, Any]:
    """One Chat Completions tool call (``{"id", "type", "function": {"name", "arguments"}}``, or
    a custom tool's ``{"custom": {"name", "input"}}``) as a ``tool_call`` part."""
    raw = _mapping(call, where)
    kind = raw.get("type") or "function"
    inner = _mapping(raw.get(kind), f"{where}.{kind}")
    if not isinstance(inner.get("name"), str):
        _fail(f"{where}.{kind}", "a tool call needs a string 'name'")
    part = {"type": "tool_call", "id": raw.get("id"), "name": inner["name"]}
    if kind == "function":
        part["arguments"] = inner.get("arguments")
    else:  # a custom tool's call carries free text
        part |= {"input": inner.get("input"), "tool_type": kind}
    return _drop_none(part)


def fix_message(
    body: Mapping[str, Any], part: Callable[[Mapping[str, Any]], FrozenDict] = fix_part
) -> FrozenDict:
    """A message as `read_message` gives it, its role held once and each part fixed by ``part``
    (`fix_part`, or a reader's variant of it that also freezes the part's content)."""
    return FrozenDict(body, role=_word(body["role"]), parts=tuple(map(part, body["parts"])))


def normalize_message(
    message: object, where: str, part: Callable[[Mapping[str, Any]], FrozenDict] = fix_part
) -> FrozenDict:
    """One chat message, normalized: `read_message`, then `fix_message`."""
    return fix_message(read_message(message, where), part)


def _word(value: str) -> str:
    """A role or a part type, held once however many messages carry it (a run keeps thousands of
    messages and a handful of such words)."""
    return sys.intern(value) if type(value) is str else value


def read_tool(tool: object, where: str) -> dict[str, Any]:
    """One tool definition, OpenAI-style nesting flattened (rule 3)."""
    raw = _mapping(tool, where)
    inner = raw.get("function")
    if isinstance(inner, Mapping):
        merged = {**_drop_none(inner), "type": raw.get("type") or "function"}
    else:
        merged = _drop_none(raw)
    merged.setdefault("type", "function")
    if "input_schema" in merged and "parameters" not in merged:
        # Anthropic's spelling of the same JSON Schema (rule 3): one tool, one receipt
        merged["parameters"] = merged.pop("input_schema")
    if not isinstance(merged.get("name"), str) or not isinstance(merged["type"], str):
        _fail(where, "a tool needs a string 'name' and 'type'")
    return merged


def normalize_tool(tool: object, where: str) -> FrozenDict:
    """One tool definition, normalized."""
    return FrozenDict(read_tool(tool, where))


def _system(value: object) -> list[dict[str, Any]]:
    if isinstance(value, str):  # rule 4: one text part, none for an empty string
        value = [value] if value else []
    return each(value, "system", read_part)


def shape_request(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with its system, messages and tools read into the GenAI shape as plain values:
    what `Request.from_dict` reads before it fixes values and freezes. The adapters hand on this
    form; the other keys are left as they are."""
    out = dict(_mapping(data, "request"))
    if "system" in out:
        out["system"] = _system(out["system"])
    out["messages"] = each(out.get("messages"), "messages", read_message)
    if "tools" in out:
        out["tools"] = each(out["tools"], "tools", read_tool)
    return out


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
        system = tuple(map(fix_part, _system(raw.get("system"))))
        messages = tuple(each(raw.get("messages"), "messages", normalize_message))
        tools = tuple(each(raw.get("tools"), "tools", normalize_tool))
        return cls._completed(raw, system, messages, tools)

    @classmethod
    def from_shaped(cls, shaped: Mapping[str, Any]) -> Request:
        """Build from what `shape_request` gives (the adapters' form): the reading is done, so
        only the value rules are applied and the result frozen. Raises as `from_dict` does."""
        return cls._completed(
            shaped,
            tuple(map(fix_part, shaped.get("system") or ())),
            tuple(map(fix_message, shaped.get("messages") or ())),
            tuple(map(FrozenDict, shaped.get("tools") or ())),
        )

    @classmethod
    def _completed(
        cls,
        raw: Mapping[str, Any],
        system: tuple[FrozenDict, ...],
        messages: tuple[FrozenDict, ...],
        tools: tuple[FrozenDict, ...],
    ) -> Request:
        model = raw.get("model")
        provider = raw.get("provider")
        for name, value in (("model", model), ("provider", provider)):
            if value is not None and not isinstance(value, str):
                _fail(name, f"expected a string, got {type(value).__name__}")
        return cls(system, messages, tools, normalize_params(raw.get("params")), model, provider)

    def to_dict(self) -> dict[str, Any]:
        """The normalized plain form; its canonical JSON is what ``af.receipt.bytes`` measures."""
        return {
            key: list(value) if isinstance(value, tuple) else value
            for key, value in self.set_fields().items()
        }

    def set_fields(self) -> dict[str, Any]:
        """The fields the plain form holds (``messages`` always, the others when set), sharing
        this request's own tuples: `to_dict` without its copies, for a reader that only reads."""
        out: dict[str, Any] = {"messages": self.messages}
        if self.system:
            out["system"] = self.system
        if self.tools:
            out["tools"] = self.tools
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
