"""Total coercers: each reads one hostile attribute value and returns a plain value or ``None``.

Span attributes reach the adapters from any instrumentation, any SDK and any backend, so a value
can be of any type, and even an object whose ``__str__``, ``__eq__`` or ``__hash__`` raises. These
functions never raise, never call such methods, and hand back only exact built-in types.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Final

import orjson

JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]

# Deeper than any real message or JSON schema; bounds the recursion over structured values so a
# deeply nested or cyclic attribute value is unreadable instead of a RecursionError.
MAX_DEPTH: Final = 200


class Bad:
    """The sentinel for "not a JSON value" inside :func:`plain`, where ``None`` means ``null``."""

    __slots__ = ()


BAD: Final = Bad()


def text(value: object) -> str | None:
    """An exact ``str`` (a ``str`` subclass is copied, so its overrides cannot run later)."""
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str.__getitem__(value, slice(None))
    return None


def integer(value: object) -> int | None:
    """An ``int`` (not a ``bool``); an integral float such as ``256.0`` counts."""
    found = number(value)
    if isinstance(found, float):
        return int(found) if found.is_integer() else None
    return found


def boolean(value: object) -> bool | None:
    """An exact ``bool``."""
    return bool(value) if isinstance(value, bool) else None


def number(value: object) -> int | float | None:
    """A finite ``int`` or ``float`` (not a ``bool``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        exact = float.__float__(value)
        return exact if math.isfinite(exact) else None
    return None


def choice_count(value: object) -> int | None:
    """How many choices were asked for; 1 is dropped, as it is the default everywhere.

    The GenAI conventions record ``gen_ai.request.choice.count`` only when it is not 1, while
    OpenInference records ``n`` as the caller passed it; dropping 1 makes both mint alike.
    """
    count = integer(value)
    return None if count == 1 else count


def string_list(value: object) -> list[str] | None:
    """A list of strings: an OTel string array, or one string as a one-item list."""
    single = text(value)
    if single is not None:
        return [single]
    if not isinstance(value, list | tuple):
        return None
    out: list[str] = []
    for item in list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value):
        entry = text(item)
        if entry is None:
            return None
        out.append(entry)
    return out


def _finite_float(literal: str) -> float:
    parsed = float(literal)
    if not math.isfinite(parsed):
        raise ValueError("not a finite number")
    return parsed


def _reject_constant(literal: str) -> float:
    raise ValueError(f"{literal} is not JSON")


def parse_json(value: object) -> JsonValue | Bad:
    """Parse a JSON string; :data:`BAD` when it is not a string or not strict JSON.

    orjson does the common case. It refuses escaped lone surrogates, which the stdlib accepts;
    canonical JSON later turns those into U+FFFD, so the stdlib gets a second try, with NaN and
    infinities refused as they are by orjson.
    """
    raw = text(value)
    if raw is None:
        return BAD
    try:
        parsed: JsonValue = orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    else:
        return parsed
    try:
        loaded: JsonValue = json.loads(
            raw, parse_float=_finite_float, parse_constant=_reject_constant
        )
    except (ValueError, RecursionError):
        return BAD
    return plain(loaded)


def plain(value: object, depth: int = 0) -> JsonValue | Bad:
    """Copy a structured value into exact ``dict``/``list``/``str``/``int``/``float``/``bool``/``None``.

    OTel attributes can be sequences (and, since SDK 1.38, maps); a reader can hand over the dicts
    it decoded. Anything else — bytes, sets, NaN, non-string keys, objects — is :data:`BAD`.
    """
    if value is None:
        return None
    if depth > MAX_DEPTH:
        return BAD
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return text(value)
    found = number(value)
    if found is not None:
        return found
    if isinstance(value, int | float):  # a non-finite float
        return BAD
    if isinstance(value, list | tuple):
        items: list[JsonValue] = []
        # The base class's iterator, so a subclass's overrides never run.
        for item in list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value):
            copied = plain(item, depth + 1)
            if isinstance(copied, Bad):
                return BAD
            items.append(copied)
        return items
    if isinstance(value, Mapping):
        fields: dict[str, JsonValue] = {}
        pairs = dict.items(value) if isinstance(value, dict) else value.items()
        for key, item in pairs:
            name = text(key)
            copied = plain(item, depth + 1)
            if name is None or isinstance(copied, Bad):
                return BAD
            fields[name] = copied
        return fields
    return BAD


def structured(value: object) -> JsonValue:
    """A structured value (a setting given as an object) copied by :func:`plain`, or ``None``."""
    copied = plain(value)
    return None if isinstance(copied, Bad) else copied


def json_or_plain(value: object) -> JsonValue | Bad:
    """A content attribute as the conventions allow it: a JSON string or a structured value."""
    if isinstance(value, str):
        return parse_json(value)
    return plain(value)


# Placeholders that instrumentations and pipelines write where content was withheld: OpenInference
# writes `__REDACTED__`, the collector's redaction processor masks with asterisks. Matched against
# a whole value only — a message that merely mentions "redacted" is content.
_PLACEHOLDER_WORDS: Final = frozenset({"redacted", "redacted content", "content redacted"})
_PLACEHOLDER_TRIM: Final = " _-[]<>(){}"


def is_placeholder(value: object) -> bool:
    """True when a value is exactly a redaction placeholder such as ``__REDACTED__`` or ``****``."""
    raw = text(value)
    if raw is None:
        return False
    core = raw.strip()
    if len(core) >= 3 and core.strip("*") == "":
        return True
    if len(core) > 40:
        return False
    return core.strip(_PLACEHOLDER_TRIM).lower() in _PLACEHOLDER_WORDS


# Provider names as instrumentations write them -> the OTel `gen_ai.provider.name` well-known value.
# OpenInference writes `llm.provider`/`llm.system` values; OpenLLMetry <=0.54 derived a vendor from
# the base URL ("Azure", "AWS", "Google"); older semconv used `az.ai.*`.
_PROVIDERS: Final[Mapping[str, str]] = {
    "azure": "azure.ai.openai",
    "az.ai.openai": "azure.ai.openai",
    "az.ai.inference": "azure.ai.inference",
    "aws": "aws.bedrock",
    "bedrock": "aws.bedrock",
    "google": "gcp.gen_ai",
    "gemini": "gcp.gemini",
    "vertexai": "gcp.vertex_ai",
    "vertex_ai": "gcp.vertex_ai",
    "mistralai": "mistral_ai",
    "mistral": "mistral_ai",
    "xai": "x_ai",
    "moonshot": "moonshot_ai",
    "watsonx": "ibm.watsonx.ai",
}


def provider(value: object) -> str | None:
    """The semconv provider name for an instrumentation's provider string."""
    raw = text(value)
    if raw is None:
        return None
    key = raw.strip().lower()
    if not key:
        return None
    return _PROVIDERS.get(key, key)
