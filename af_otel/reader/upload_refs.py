"""The content util-genai's upload hook put elsewhere, checked against what the receipt proves.

A span the upload hook completed carries refs instead of (or beside) its content:
``gen_ai.input.messages_ref``, ``gen_ai.system_instructions_ref``, ``gen_ai.tool.definitions_ref``.
Given the base the uploads live under (``--upload-base``), the reader reads each ref's file and
reads the three parts through the same GenAI adapter the writer used, then compares them with the
call's view, which the receipt verifies. A ref whose file is not there (the hook stamps its refs
even when its queue was full and the upload was dropped), or whose content is not the request on
record, or is not the hook's JSON, puts `upload-ref-unresolved` on the view, naming the ref. The view's own content and its
verdict stay what the record proves: an upload is a copy, never evidence of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from af_otel import names
from af_otel.model import Request
from af_otel.reader.gaps import Gap, gap, order_gaps
from af_otel.reader.records import SpanRecord
from af_otel.reader.sources.uploads import UnreadableUpload, check_base, read_upload
from af_otel.reader.view import ServedView
from af_otel.semconv import adapt

__all__ = ["REFS", "checked"]

# Each ref, the content attribute it stands for, and the request field it holds.
REFS: Final = (
    ("gen_ai.input.messages_ref", "gen_ai.input.messages", "messages"),
    ("gen_ai.system_instructions_ref", "gen_ai.system_instructions", "system"),
    ("gen_ai.tool.definitions_ref", "gen_ai.tool.definitions", "tools"),
)


def checked(
    views: Sequence[ServedView], records: Iterable[SpanRecord], base: str
) -> tuple[ServedView, ...]:
    """``views`` with `upload-ref-unresolved` on each call whose upload refs, read under
    ``base``, are missing or are not its request on record."""
    spans = {(r.trace_id, r.span_id): r for r in records if _refs(r.attributes)}
    if not spans:
        return tuple(views)
    check_base(base)
    out = []
    for view in views:
        span = spans.get((view.trace_id, view.span_id))
        found = _problems(view, span, base) if span is not None else []
        out.append(replace(view, gaps=order_gaps((*view.gaps, *found))) if found else view)
    return tuple(out)


def _refs(attributes: Mapping[str, Any]) -> dict[str, str]:
    return {key: value for key, *_ in REFS if isinstance(value := attributes.get(key), str)}


def _problems(view: ServedView, span: SpanRecord, base: str) -> list[Gap]:
    refs = _refs(span.attributes)
    content: dict[str, Any] = {}
    missing = []
    for key, attribute, _ in REFS:
        if key not in refs:
            continue
        try:
            value = read_upload(base, refs[key])
        except UnreadableUpload as exc:
            missing.append(f"{key}: {exc}")
            continue
        if value is None:
            missing.append(f"{key} {refs[key]} (no such file under {base})")
        else:
            content[attribute] = json.dumps(value)
    if missing:
        return [gap(names.GAP_UPLOAD_REF, "not uploaded or unreadable: " + "; ".join(missing))]
    differs = _differs(view, span, content)
    if not differs:
        return []
    named = ", ".join(key for key, _, field in REFS if field in differs and key in refs)
    return [gap(names.GAP_UPLOAD_REF, f"not the request on record: {named}")]


def _differs(view: ServedView, span: SpanRecord, content: Mapping[str, str]) -> list[str]:
    """The request fields whose uploaded copy differs from the view (fields the view does not
    hold are not compared: the record cannot say what they were)."""
    bare = {k: v for k, v in span.attributes.items() if k not in {a for _, a, _ in REFS}}
    adapted = adapt({**bare, **content}, span.name)
    if adapted.request is None:
        return [field for _, attribute, field in REFS if attribute in content]
    try:
        uploaded = Request.from_dict(adapted.request)
    except Exception:  # a shape the adapter let through: not this call's request
        return [field for _, attribute, field in REFS if attribute in content]
    held = view.request
    out = []
    for _, attribute, field in REFS:
        if attribute not in content or getattr(view, field) is None:
            continue
        if getattr(uploaded, field) != getattr(held, field):
            out.append(field)
    return out
