"""Argument checks of the reader's public entry points: a wrong object raises TypeError saying
what to pass instead, before any work starts (the reader's own errors are for bad data).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain
from typing import Final, TypeVar

from af_otel.reader.records import SpanRecord

__all__ = ["first_of", "only", "spans_only"]

T = TypeVar("T")

PASS_SPANS: Final = (
    "pass the spans read_spans gives: read_spans(path), read_spans(document) or "
    "read_spans(in_memory_exporter)"
)


def _hint(item: object) -> str:
    """What to pass instead of ``item``, by what it is."""
    if isinstance(item, str | os.PathLike):
        path = os.fspath(item)
        return f"{PASS_SPANS}, e.g. read_spans({path!r})" if len(path) <= 300 else PASS_SPANS
    if isinstance(item, Mapping):
        return f"{PASS_SPANS}: a parsed JSON document goes through read_spans(document)"
    kind = type(item).__name__
    if kind == "ServedView":
        return "these are served views already: verify them (verify(view) or verify(views))"
    if kind in {"ReadableSpan", "Span"}:
        return f"{PASS_SPANS}: OpenTelemetry SDK spans go through read_spans(spans)"
    return PASS_SPANS


def first_of(items: object, caller: str) -> tuple[object | None, Iterator[object]]:
    """The first item of ``items`` (None if empty) and an iterator over all of them; raises
    TypeError for a path, a document or anything not iterable."""
    if isinstance(items, str | bytes | os.PathLike | Mapping) or not isinstance(items, Iterable):
        raise TypeError(f"{caller}() cannot read a {type(items).__name__}; {_hint(items)}")
    iterator = iter(items)
    first = next(iterator, None)
    return first, (chain((first,), iterator) if first is not None else iterator)


def only(items: Iterator[object], kind: type[T], caller: str, what: str) -> Iterator[T]:
    """``items``, each checked to be a ``kind`` as it comes (lazily, so a stream stays a stream)."""
    for index, item in enumerate(items):
        if not isinstance(item, kind):
            raise TypeError(
                f"{caller}() takes {what}; item {index} is a {type(item).__name__}: {_hint(item)}"
            )
        yield item


def spans_only(spans: object, caller: str) -> Iterator[SpanRecord]:
    """``spans`` as span records, or TypeError saying what to pass."""
    _, items = first_of(spans, caller)
    return only(items, SpanRecord, caller, "span records")
