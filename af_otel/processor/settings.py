"""Every option of the emit path, in one place: argument > environment > default.

The processor, the exporter, the completion hook and the explicit API all take their settings
from `resolve_settings` (the hook and `llm_call` through the engine that numbered their span, or
through the default engine, which is resolved from the environment alone). docs/processor.md
lists every option in one table.

A bad *argument* is a mistake in code and raises ``ValueError`` naming the argument and what it
accepts. A bad *environment* value must not stop an application that was deployed with it: it
warns once and the default is used (the OTel SDK's habit for its own variables).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypedDict, TypeVar, Unpack, get_args

from af_otel import forksafe, names
from af_otel.keys import KeyProblem, find_key
from af_otel.store import Store, open_store

ContentMode = Literal["auto", "inline", "store", "none"]
WriteMode = Literal["inline", "store", "none"]
CONTENT_MODES: Final[tuple[str, ...]] = get_args(ContentMode)

ENV_CONTENT: Final = "AF_OTEL_CONTENT"
ENV_STORE: Final = names.ENV_STORE
ENV_STRIP: Final = "AF_OTEL_STRIP_CONTENT"
ENV_INLINE_LIMIT: Final = "AF_OTEL_INLINE_LIMIT"
ENV_TRUSTED_HOSTS: Final = "AF_OTEL_TRUSTED_HOSTS"
ENV_RUN_TABLE_BYTES: Final = "AF_OTEL_RUN_TABLE_BYTES"
# What the run table of one processor or exporter may hold (processor/run_table.py): a service's
# thousands of open conversations stay within it, least recently used first out.
DEFAULT_RUN_TABLE_BYTES: Final = 256 * 1024 * 1024
ENV_TRUSTED_SCOPE: Final = "AF_OTEL_TRUSTED_SCOPE"
ENV_KEY: Final = names.ENV_KEY
ENV_KEY_FILE: Final = names.ENV_KEY_FILE
ENV_STRICT: Final = "AF_OTEL_STRICT"
ENV_CHAIN_HOOK: Final = "AF_OTEL_CHAIN_HOOK"
ENV_DISABLED: Final = "OTEL_SDK_DISABLED"
DEFAULT_STORE: Final = names.DEFAULT_STORE

_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})
_HOST_FORBIDDEN: Final = frozenset(" \t/\\@?#,")
_MAX_NOTED: Final = 1024

_logger = logging.getLogger("af_otel")
_warned: set[tuple[str, str]] = set()
_noted: set[str] = set()
_lock = forksafe.lock()

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Settings:
    """The resolved configuration of one processor, exporter or default engine."""

    store: Store | None
    content: ContentMode = "auto"
    strip_instrumentation_content: bool = False
    inline_limit: int = names.DEFAULT_INLINE_LIMIT
    key: bytes | None = None
    trusted_hosts: frozenset[str] = frozenset()
    disabled: bool = False
    run_table_bytes: int = DEFAULT_RUN_TABLE_BYTES
    # When two spans record one call, the scope whose span is the call (see dedupe.py).
    trusted_scope: str | None = None

    def write_mode(self, on_span: bool) -> WriteMode:
        """How one call's commit payloads are written. ``auto`` follows the instrumentation:
        inline only when the span already carries the request content (``on_span``), else the
        store, so af_otel never puts on the trace text the instrumentation kept off it."""
        if self.content == "auto":
            return "inline" if on_span else "store"
        return self.content


class Options(TypedDict, total=False):
    """What `ReceiptSpanProcessor` and `ReceiptSpanExporter` take, each left out or None for its
    ``AF_OTEL_*`` variable, else its default (docs/processor.md)."""

    store: Store | str | os.PathLike[str] | None
    content: str | None
    strip_instrumentation_content: bool | None
    inline_limit: int | None
    key: bytes | str | None
    trusted_hosts: str | Iterable[str] | None
    trusted_scope: str | None


class AllOptions(Options, total=False):
    """`Options` and the tuning `resolve_settings` alone takes."""

    run_table_bytes: int | None


def resolve_settings(**options: Unpack[AllOptions]) -> Settings:
    """Each option from its argument, else its environment variable, else its default.

    Raises ``ValueError`` for a bad argument (``TypeError`` for an unknown one); a bad environment
    value warns once and falls back."""
    unknown = sorted(options.keys() - AllOptions.__optional_keys__)
    if unknown:
        raise TypeError(f"unexpected option {unknown[0]!r}")
    mode: ContentMode = _choose(options, "content", ENV_CONTENT, _content, "auto")
    return Settings(
        store=None if mode == "none" else _store(options.get("store")),
        content=mode,
        strip_instrumentation_content=_choose(
            options, "strip_instrumentation_content", ENV_STRIP, _flag, False
        ),
        inline_limit=_choose(
            options, "inline_limit", ENV_INLINE_LIMIT, _size, names.DEFAULT_INLINE_LIMIT
        ),
        key=_key(options.get("key")),
        trusted_hosts=_choose(options, "trusted_hosts", ENV_TRUSTED_HOSTS, _hosts, frozenset()),
        disabled=sdk_disabled(),
        run_table_bytes=_choose(
            options, "run_table_bytes", ENV_RUN_TABLE_BYTES, _size, DEFAULT_RUN_TABLE_BYTES
        ),
        trusted_scope=_choose(options, "trusted_scope", ENV_TRUSTED_SCOPE, _scope, None),
    )


def sdk_disabled() -> bool:
    """``OTEL_SDK_DISABLED=true`` (case-insensitive), as the OTel SDK reads it."""
    return os.environ.get(ENV_DISABLED, "").strip().lower() == "true"


def strict() -> bool:
    """``AF_OTEL_STRICT=1``: internal errors re-raise instead of being logged once. Only ever on
    request (the project's own tests set it); never inferred from the environment it runs in."""
    raw = os.environ.get(ENV_STRICT, "")
    try:
        return _flag(raw) if raw.strip() else False
    except ValueError:
        warn_once(ENV_STRICT, raw, "off")
        return False


def warn_once(variable: str, value: str, fallback: object) -> None:
    """Log a bad environment value once per (variable, value)."""
    with _lock:
        if (variable, value) in _warned or len(_warned) >= _MAX_NOTED:
            return
        _warned.add((variable, value))
    _logger.warning("af_otel: %s=%r is not valid; using %s", variable, value, fallback)


def note_written(store: Store) -> None:
    """Say once, at INFO, where a store's first payload went (the default is a directory in the
    working directory, which nobody should discover by accident)."""
    try:
        url = store.url
    except Exception:
        url = repr(store)
    with _lock:
        if url in _noted or len(_noted) >= _MAX_NOTED:
            return
        _noted.add(url)
    _logger.info(
        "af_otel: writing payloads and run bases to the store at %s (set %s or store= to move it)",
        url,
        ENV_STORE,
    )


# -- one option each -------------------------------------------------------------------------


def _choose(
    options: Mapping[str, object],
    argument: str,
    variable: str,
    parse: Callable[[object], T],
    default: T,
) -> T:
    value = options.get(argument)
    if value is not None:
        try:
            return parse(value)
        except ValueError as exc:
            raise ValueError(f"{argument}={value!r}: {exc}") from None
    raw = os.environ.get(variable, "")
    if not raw.strip():
        return default
    try:
        return parse(raw)
    except ValueError:
        warn_once(variable, raw, repr(default))
        return default


def _scope(value: object) -> str | None:
    text = value.strip() if isinstance(value, str) else None
    if not text or any(c.isspace() for c in text):
        raise ValueError("not an instrumentation scope name")
    return text


def _content(value: object) -> ContentMode:
    text = value.strip().lower() if isinstance(value, str) else value
    if text not in CONTENT_MODES:
        raise ValueError(f"not one of {', '.join(map(repr, CONTENT_MODES))}")
    return text  # type: ignore[return-value]


def _flag(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ValueError("not True or False (in the environment: 1/true/yes/on or 0/false/no/off)")


def _size(value: object) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("not a whole number of bytes, 0 or more")
    return value


def _hosts(value: object) -> frozenset[str]:
    items: Iterable[object]
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, Iterable) and not isinstance(value, bytes | bytearray):
        items = value
    else:
        raise ValueError("not host names (a list, or one string separated by commas)")
    out: set[str] = set()
    for item in items:
        host = item.strip().lower() if isinstance(item, str) else None
        if host == "" and isinstance(value, str):
            continue
        if not host or _HOST_FORBIDDEN.intersection(host):
            raise ValueError(f"{item!r} is not a host name (give e.g. 'gateway.example.com')")
        out.add(host)
    return frozenset(out)


def _store(store: object) -> Store:
    if store is not None:
        if isinstance(store, str | os.PathLike):
            try:
                return open_store(store)
            except Exception as exc:
                raise ValueError(f"store={store!r}: {exc}") from None
        if callable(getattr(store, "put", None)) and callable(getattr(store, "put_json", None)):
            return store  # type: ignore[return-value]
        raise ValueError(f"store={store!r}: give a Store, a directory or an fsspec URL")
    raw = os.environ.get(ENV_STORE, "")
    if raw.strip():
        try:
            return open_store(raw)
        except Exception:
            warn_once(ENV_STORE, raw, DEFAULT_STORE)
    return open_store(DEFAULT_STORE)


def _key(key: object) -> bytes | None:
    if key is not None:
        if isinstance(key, str):
            key = key.encode("utf-8")
        if not isinstance(key, bytes | bytearray) or not key:
            raise ValueError("key: not a non-empty str or bytes")
        return bytes(key)
    found = find_key()
    if isinstance(found, KeyProblem):
        warn_once(ENV_KEY_FILE, found.path, "plain receipts (the file cannot be read)")
        return None
    return found
