"""Small shape rules every endpoint reader uses: a tool in any provider's nesting, and a body's
keys sorted into placed, dropped and unread."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class WireRead:
    """One body read: the request in the GenAI shape (`af_otel.model.Request.from_dict` reads it),
    the body keys it could not place, and the server-held state it continues, if any."""

    request: dict[str, Any]
    unread: tuple[str, ...] = ()
    held: str | None = None


# Per-block keys that advise the provider's cache or carry citations back, not content.
CACHE_KEYS = frozenset({"cache_control"})


def without(block: Mapping[str, Any], keys: Iterable[str] = CACHE_KEYS) -> dict[str, Any]:
    drop = frozenset(keys)
    return {k: v for k, v in block.items() if k not in drop}


def tool(raw: Mapping[str, Any]) -> dict[str, Any]:
    """One tool definition with its nested spec lifted (``{"type": "function", "function": {...}}``,
    ``{"type": "custom", "custom": {...}}``): the normalizer flattens the rest (rule 3)."""
    kind = raw.get("type")
    inner = raw.get(kind) if isinstance(kind, str) else None
    if isinstance(inner, Mapping):
        return {**without(inner), "type": kind}
    return without(raw)


def listed(key: str) -> Callable[[Mapping[str, Any]], Any]:
    """The items of a body's growing array under ``key``, none when it is absent or null."""

    def items(body: Mapping[str, Any]) -> Any:
        return body.get(key) or ()

    return items


def unread(
    body: Mapping[str, Any], placed: frozenset[str], dropped: frozenset[str]
) -> tuple[str, ...]:
    """The body's keys set to a value that neither ``placed`` nor ``dropped`` names, sorted."""
    return tuple(
        sorted(k for k, v in body.items() if v is not None and k not in placed and k not in dropped)
    )
