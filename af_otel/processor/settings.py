"""What the emit path is configured with: argument > environment > default, resolved once.

A bad value never stops the application: an unknown ``content`` mode, a negative inline limit or an
unreadable key file warns and falls back to the default (the OTel SDK's habit for its variables).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, get_args

from af_otel import names
from af_otel.store import Store, open_store

ContentMode = Literal["inline", "store", "none"]
CONTENT_MODES: Final[tuple[str, ...]] = get_args(ContentMode)
ENV_DISABLED: Final = "OTEL_SDK_DISABLED"  # "true": every af_otel hook is a pass-through

_logger = logging.getLogger("af_otel")


@dataclass(frozen=True, slots=True)
class Settings:
    """The resolved configuration of one processor, exporter or hook."""

    store: Store | None
    content: ContentMode = "inline"
    strip_instrumentation_content: bool = False
    inline_limit: int = names.DEFAULT_INLINE_LIMIT
    key: bytes | None = None
    disabled: bool = False


def sdk_disabled() -> bool:
    """``OTEL_SDK_DISABLED=true`` (case-insensitive), as the OTel SDK reads it."""
    return os.environ.get(ENV_DISABLED, "").strip().lower() == "true"


def resolve_settings(
    *,
    store: Store | str | os.PathLike[str] | None = None,
    content: str = "inline",
    strip_instrumentation_content: bool = False,
    inline_limit: int = names.DEFAULT_INLINE_LIMIT,
    key: bytes | str | None = None,
) -> Settings:
    """Resolve arguments against ``AF_OTEL_*``; never raises."""
    mode: ContentMode = "inline"
    if content in CONTENT_MODES:
        mode = content  # type: ignore[assignment]
    else:
        _logger.warning(
            "af_otel: content=%r is not one of %s; using 'inline'", content, CONTENT_MODES
        )
    limit = inline_limit
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        _logger.warning(
            "af_otel: inline_limit=%r is not a size; using %d", limit, names.DEFAULT_INLINE_LIMIT
        )
        limit = names.DEFAULT_INLINE_LIMIT
    return Settings(
        store=_store(store) if mode != "none" else None,
        content=mode,
        strip_instrumentation_content=bool(strip_instrumentation_content),
        inline_limit=limit,
        key=_key(key),
        disabled=sdk_disabled(),
    )


def _store(store: Store | str | os.PathLike[str] | None) -> Store | None:
    if store is not None and not isinstance(store, str | os.PathLike):
        return store
    try:
        return open_store(store)
    except Exception as exc:
        _logger.warning("af_otel: store %r cannot be opened (%s); commits stay inline", store, exc)
        return None


def _key(key: bytes | str | None) -> bytes | None:
    if key is not None:
        return key.encode("utf-8") if isinstance(key, str) else bytes(key)
    secret = os.environ.get(names.ENV_KEY)
    if secret:
        return secret.encode("utf-8")
    path = os.environ.get(names.ENV_KEY_FILE)
    if path:
        try:
            data = Path(path).read_bytes().strip()
        except OSError as exc:
            _logger.warning(
                "af_otel: %s=%s cannot be read (%s); receipts are plain",
                names.ENV_KEY_FILE,
                path,
                exc,
            )
            return None
        return data or None
    return None
