"""The content util-genai's upload hook put elsewhere: the call's content where the record holds
none, checked against what the record holds where it holds some.

A span the upload hook completed carries refs instead of (or beside) its content:
``gen_ai.input.messages_ref``, ``gen_ai.system_instructions_ref``, ``gen_ai.tool.definitions_ref``
and ``gen_ai.output.messages_ref``. Given the base the uploads live under (``--upload-base``), the
reader reads each ref's file and reads the request's parts through the same GenAI adapter the
writer used (`read_call`, on the span's own attributes with the uploaded parts in place of its
content), as the completion hook read them when it minted the receipt:

- where the view lacks parts of the request (content capture off and ``content=none``, or a
  payload withheld), the uploaded request fills them, and `verify` holds them to the receipt
  like any rebuild: a copy that is the request verifies, a copy that is not is damage. This only
  for a call whose receipt was minted from the instrumentation's record (the objects the upload
  hook wrote), never one minted from the wire, whose body the instrumentation's copy may
  legitimately differ from; and messages only where the epoch they grew from is on record too;
- where the view holds a part, the uploaded one must equal it.

A ref whose file is not there (the hook stamps its refs even when its queue was full and the
upload was dropped), that is not the hook's JSON, or whose part is not the request on record,
puts `upload-ref-unresolved` on the view, naming the ref, and fills nothing: a gap, never damage.
The output the hook uploaded is shown as the call's (`ServedView.output`); no receipt covers it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from af_otel import names
from af_otel.model import Request
from af_otel.model.gap_rules import request_gaps, sealed_messages
from af_otel.reader.fold import freeze
from af_otel.reader.gaps import Gap, gap, order_gaps
from af_otel.reader.records import SpanRecord
from af_otel.reader.sources.uploads import UnreadableUpload, check_base, read_upload
from af_otel.reader.turns import unrecorded_call_gaps
from af_otel.reader.view import ServedView
from af_otel.reader.view_gaps import not_on_record, on_record_gap
from af_otel.receipts import Receipt
from af_otel.semconv import Limits, read_call, record_of

__all__ = ["OUTPUT_REF", "REFS", "checked"]

# Each ref of the request, the content attribute it stands for, and the request field it holds.
REFS: Final = (
    ("gen_ai.input.messages_ref", "gen_ai.input.messages", "messages"),
    ("gen_ai.system_instructions_ref", "gen_ai.system_instructions", "system"),
    ("gen_ai.tool.definitions_ref", "gen_ai.tool.definitions", "tools"),
)
# The ref of the call's output, and the content attribute it stands for.
OUTPUT_REF: Final = ("gen_ai.output.messages_ref", "gen_ai.output.messages")
_KEYS: Final = (*(key for key, *_ in REFS), OUTPUT_REF[0])
_CONTENT: Final = frozenset({*(attribute for _, attribute, _ in REFS), OUTPUT_REF[1]})
_PARTS: Final = ("system", "messages", "tools")


def checked(
    views: Sequence[ServedView], records: Iterable[SpanRecord], base: str
) -> tuple[ServedView, ...]:
    """``views`` with each call's uploads read under ``base``: parts its record lacks filled in,
    its output shown, and `upload-ref-unresolved` where an upload is missing or is not its
    request on record. Raises `SourceError` naming ``base`` when it names nothing readable."""
    spans = {(r.trace_id, r.span_id): r for r in records if _refs(r.attributes)}
    if not spans:
        return tuple(views)
    check_base(base)
    out: list[ServedView] = []
    filled: set[int] = set()
    for view in views:
        span = spans.get((view.trace_id, view.span_id))
        found = _resolved(view, span, base) if span is not None else view
        if found.from_uploads:
            filled.add(id(found.context))
        out.append(_placed(view, found))
    return _recounted(out, filled) if filled else tuple(out)


def _placed(old: ServedView, new: ServedView) -> ServedView:
    """``new`` in ``old``'s place in its run's index (`verify` reaches parents there)."""
    if new is not old and old.context.views.get(old.epoch) is old:
        old.context.views[old.epoch] = new
    return new


def _refs(attributes: Mapping[str, Any]) -> dict[str, str]:
    return {key: value for key in _KEYS if isinstance(value := attributes.get(key), str)}


def _read(refs: Mapping[str, str], base: str) -> tuple[dict[str, list[Any]], list[str]]:
    """Each ref's uploaded list, and what could not be read (a data problem of this call)."""
    found: dict[str, list[Any]] = {}
    missing: list[str] = []
    for key, ref in refs.items():
        try:
            value = read_upload(base, ref)
        except UnreadableUpload as exc:
            missing.append(f"{key}: {exc}")
            continue
        if value is None:
            missing.append(f"{key} {ref} (no such file under {base})")
        else:
            found[key] = value
    return found, missing


def _resolved(view: ServedView, span: SpanRecord, base: str) -> ServedView:
    refs = _refs(span.attributes)
    out_ref = {k: v for k, v in refs.items() if k == OUTPUT_REF[0]}
    view = _with_output(view, span, out_ref, base)
    parts, missing = _read({k: v for k, v in refs.items() if k not in out_ref}, base)
    if missing:
        return _with_gap(view, "not uploaded or unreadable: " + "; ".join(missing))
    content = {attribute: json.dumps(parts[key]) for key, attribute, _ in REFS if key in parts}
    if not content:
        return view
    uploaded = _uploaded_request(span, content)
    differs = _differs(view, uploaded, content)
    if differs:
        named = ", ".join(key for key, _, field in REFS if field in differs and key in parts)
        return _with_gap(view, f"not the request on record: {named}")
    return _filled(view, uploaded) if uploaded is not None and _fillable(view) else view


def _with_output(
    view: ServedView, span: SpanRecord, ref: Mapping[str, str], base: str
) -> ServedView:
    """``view`` with the output the hook uploaded; the gap when it is missing, unreadable or
    not the output the span holds. No receipt covers an output: the verdict does not hang on it."""
    if not ref:
        return view
    found, missing = _read(ref, base)
    if missing:
        return _with_gap(view, "output not uploaded or unreadable: " + "; ".join(missing))
    output = found[OUTPUT_REF[0]]
    view = replace(view, output=freeze(output))
    if _output_differs(span, output):
        return _with_gap(view, f"not the output on record: {OUTPUT_REF[0]}")
    return view


def _with_gap(view: ServedView, detail: str) -> ServedView:
    """``view`` with `upload-ref-unresolved` saying ``detail`` (after what it said already)."""
    before = view.gap(names.GAP_UPLOAD_REF)
    if before is not None:
        detail = f"{before.detail}; {detail}"
    others = (g for g in view.gaps if g.kind != names.GAP_UPLOAD_REF)
    return replace(view, gaps=order_gaps((*others, gap(names.GAP_UPLOAD_REF, detail))))


def _output_differs(span: SpanRecord, output: list[Any]) -> bool:
    """Whether the span itself holds an output that is not the uploaded one."""
    held = span.attributes.get(OUTPUT_REF[1])
    if not isinstance(held, str):
        return False
    try:
        return bool(json.loads(held) != output)
    except json.JSONDecodeError:
        return True


def _uploaded_request(span: SpanRecord, content: Mapping[str, str]) -> Request | None:
    """The request the span's attributes and the uploaded parts read as, the way the completion
    hook read it when it minted (no span limit cut the parts it was handed)."""
    bare = {
        k: v for k, v in span.attributes.items() if k not in _CONTENT and not k.endswith("_ref")
    }
    recorded = record_of({**bare, **content}, span.name)
    return read_call(recorded, scope=span.scope, limits=Limits(), remember=False).request


def _differs(view: ServedView, uploaded: Request | None, content: Mapping[str, str]) -> list[str]:
    """The request parts whose uploaded copy differs from the view (parts the view does not
    hold are not compared: the record cannot say what they were)."""
    if uploaded is None:  # not a request the adapter reads: not this call's
        return [field for _, attribute, field in REFS if attribute in content]
    return [
        field
        for _, attribute, field in REFS
        if attribute in content
        and getattr(view, field) is not None
        and getattr(uploaded, field) != getattr(view, field)
    ]


def _fillable(view: ServedView) -> bool:
    """Whether the uploads may stand in for what the view's record lacks: its receipt was minted
    from the instrumentation's record (the upload hook's own objects), or there is none."""
    return view.source != names.SOURCE_WIRE or not view.minted


def _basis_known(view: ServedView) -> bool:
    """Whether the messages of the epoch this one's receipt counts ``messages.kept`` against
    are on record (a claim of none needs none)."""
    receipt = view.receipt
    if not (isinstance(receipt, Receipt) and receipt.minted and receipt.messages_kept):
        return True
    if view.basis == 0:
        return view.base is None or view.context.base_messages is not None
    parent = view.basis_view
    return parent is not None and parent.messages is not None


def _rule_gaps(view: ServedView) -> list[Gap]:
    """The request rules' gaps of the view's values (as the view builder found them)."""
    sealed = view.messages is not None and sealed_messages(view.messages)
    return [
        gap(kind, detail)
        for kind, detail in request_gaps(
            view.params,
            view.tools,
            provider=view.provider,
            model=view.model,
            sealed=sealed,
            minted=view.minted,
            unrecorded=view.unrecorded,
        )
    ]


def _filled(view: ServedView, uploaded: Request) -> ServedView:
    """``view`` with the request keys its record lacks taken from ``uploaded``, and the gaps
    those values decide found again."""
    missing = not_on_record(view.gaps)
    take = tuple(k for k in missing if k != "messages" or _basis_known(view))
    if not take:
        return view
    new = replace(
        view,
        **{key: getattr(uploaded, key) for key in take},
        from_uploads=tuple(key for key in _PARTS if key in take),
    )
    before = set(_rule_gaps(view))
    kept = [g for g in view.gaps if g.kind != names.GAP_NO_CONVERSATION and g not in before]
    still = on_record_gap([k for k in missing if k not in take])
    found = [*kept, *_rule_gaps(new), *([still] if still is not None else [])]
    return replace(new, gaps=order_gaps(found))


def _recounted(views: list[ServedView], runs: set[int]) -> tuple[ServedView, ...]:
    """The views, with `unrecorded-call` found again on the runs whose histories were filled
    in: a model turn no call gave shows only once the messages are on record."""
    by_run: dict[int, list[int]] = {}
    for index, view in enumerate(views):
        if id(view.context) in runs:
            by_run.setdefault(id(view.context), []).append(index)
    out = list(views)
    for indexes in by_run.values():
        found = unrecorded_call_gaps([views[i] for i in indexes])
        for at, extra in found.items():
            view = out[indexes[at]]
            out[indexes[at]] = _placed(view, replace(view, gaps=order_gaps((*view.gaps, extra))))
    return tuple(out)
