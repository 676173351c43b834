"""The gap catalogue accounts for every field, speaks plainly, and each kind is what a damaged
recording actually gets, covering every field the damage moved."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from af_otel import names
from af_otel.model.gap_kinds import SERVED_GAPS
from af_otel.processor import run
from af_otel.reader.gaps import UNGAPPED_FIELDS, Gap, covers, gap, order_gaps
from af_otel.reader.records import SpanRecord
from af_otel.reader.verify import VerdictStatus, verify
from af_otel.reader.view import ServedView, served_views
from af_otel.receipts import Receipt
from af_otel.store import LocalStore, Store

from .recordings import (
    as_written,
    commit_events,
    edit_events,
    event_with,
    record_agent,
    recorder,
    replace_span,
    span_of,
    user,
    with_attributes,
)

SDK_SCOPE = "opentelemetry.instrumentation.openai_v2"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "reader.md"


def receipt_fields() -> list[str]:
    out = []
    for f in dataclasses.fields(Receipt):
        head, _, rest = f.name.partition("_")
        out.append(f"{head}.{rest}" if head in ("system", "messages", "tools") else f.name)
    return out


def view_fields() -> list[str]:
    return [f.name for f in dataclasses.fields(ServedView)]


def test_the_catalogue_holds_every_kind() -> None:
    """Exactly the kinds of the catalogue in docs/reader.md, each with fields and a sentence."""
    contract = {
        value
        for key, value in vars(names).items()
        if key.startswith("GAP_") and key != "GAP_NO_RECEIPT_ON_CHART"
    }
    assert set(SERVED_GAPS) == contract
    for kind, spec in SERVED_GAPS.items():
        assert spec.kind == kind
        assert spec.fields
        assert spec.view_fields
        assert spec.relation in ("excuse", "caveat")
        assert len(spec.why) > 60


@pytest.mark.parametrize("field", receipt_fields())
def test_every_receipt_field_is_named_by_a_gap_or_needs_none(field: str) -> None:
    """A receipt field no gap names must be listed, with its reason, as needing none."""
    named = any(covers(spec.fields, field) for spec in SERVED_GAPS.values())
    ungapped = f"receipt.{field}" in UNGAPPED_FIELDS
    assert named != ungapped, f"{field}: named={named} ungapped={ungapped}"


@pytest.mark.parametrize("field", view_fields())
def test_every_view_field_is_named_by_a_gap_or_needs_none(field: str) -> None:
    """A view field no gap names must be listed, with its reason, as needing none."""
    named = any(covers(spec.view_fields, field) for spec in SERVED_GAPS.values())
    ungapped = f"view.{field}" in UNGAPPED_FIELDS
    assert named != ungapped, f"{field}: named={named} ungapped={ungapped}"


def test_every_name_in_the_catalogue_is_a_real_field() -> None:
    """Gaps and the ungapped list name only fields that exist (no stale names)."""
    receipt, view = receipt_fields(), view_fields()
    for spec in SERVED_GAPS.values():
        for name in spec.fields:
            assert any(covers([name], f) for f in receipt), name
        for name in spec.view_fields:
            assert name in view, name
    for key, reason in UNGAPPED_FIELDS.items():
        shape, _, name = key.partition(".")
        assert name in (receipt if shape == "receipt" else view), key
        assert reason.endswith(".")


CODE_SHAPED = [
    (r"\b\w+\.\w+\b", "a dotted name"),
    (r"\b[a-z]+_[a-z_]+\b", "a snake_case name"),
    (r"\b[a-z]+[A-Z]\w*\b", "a camelCase name"),
    (r"\b[A-Z][a-z]+[A-Z]\w*\b", "a PascalCase name"),
    (r"[`()\[\]{}]", "code punctuation"),
    (r"\b\d+\.\d+", "a version number"),
    (
        r"\b(fold\w*|commit\w*|mint\w*|rewrit\w*|seed\w*|derived from|read off|af-otel|af_otel)\b",
        "a mechanism word",
    ),
]


@pytest.mark.parametrize("kind", list(SERVED_GAPS))
def test_sentences_say_what_to_conclude_without_naming_code(kind: str) -> None:
    """A printed sentence speaks of fields and what to do, never of the code that found it."""
    why = SERVED_GAPS[kind].why
    for pattern, what in CODE_SHAPED:
        found = re.search(pattern, why, flags=re.IGNORECASE if "mechanism" in what else 0)
        assert found is None, f"{kind}: {what}: {found.group(0) if found else ''}"
    assert why[0].isupper()
    assert why.endswith(".")


def test_gaps_come_most_suspicious_first_one_per_kind() -> None:
    """Whatever order gaps are found in, a view lists them in catalogue order, once per kind."""
    found = [
        gap(names.GAP_PROVIDER_DEFAULTS),
        gap(names.GAP_NO_RUN_LOG, "first"),
        gap(names.GAP_NO_RUN_LOG, "second"),
        gap(names.GAP_NO_FOLD_BASE),
    ]
    ordered = order_gaps(found)
    assert [g.kind for g in ordered] == [
        names.GAP_NO_FOLD_BASE,
        names.GAP_NO_RUN_LOG,
        names.GAP_PROVIDER_DEFAULTS,
    ]
    assert ordered[1].detail == "first"
    assert list(SERVED_GAPS)[:2] == [names.GAP_NO_FOLD_BASE, names.GAP_NO_RUN_LOG]


def test_only_the_no_receipt_gap_carries_a_cause_and_kinds_are_closed() -> None:
    """The cause belongs to no-receipt-on-chart alone; an unknown kind is refused."""
    with pytest.raises(ValueError):
        gap(names.GAP_NO_RUN_LOG, cause="no-receipt-committed")
    with pytest.raises(ValueError):
        gap(names.GAP_NO_RECEIPT)
    with pytest.raises(ValueError):
        gap("made-up")
    assert isinstance(gap(names.GAP_NO_RECEIPT, cause="receipt-shape-rejected"), Gap)


def test_the_docs_restate_the_catalogue_kind_for_kind() -> None:
    """docs/reader.md prints every kind with its relation, its fields and its sentence verbatim."""
    text = DOCS.read_text(encoding="utf-8")
    for kind, spec in SERVED_GAPS.items():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{kind}` |")), None)
        assert row is not None, kind
        assert spec.relation in row
        for name in spec.fields:
            assert f"`{name}`" in row, (kind, name)
        assert spec.why in text, kind
    for key in UNGAPPED_FIELDS:
        assert f"`{key}`" in text, key


# -- damage: each kind, on a real recording ------------------------------------------------------

Spans = tuple[SpanRecord, ...]


def edit_commits(spans: Spans, epoch: int, key: str, change: Callable[[Any], Any]) -> Spans:
    span = span_of(spans, epoch)

    def edit(event: Any) -> Any:
        if event.attributes.get(names.COMMIT_KEY) != key:
            return event
        text = json.dumps(change(json.loads(event.attributes[names.COMMIT_VALUE])))
        return event_with(event, af__commit__value=text, af__commit__bytes=len(text.encode()))

    return replace_span(spans, span, edit_events(span, edit))


def drop_base(spans: Spans, store: Store, tmp: Path) -> tuple[Spans, Store]:
    return spans, LocalStore(tmp / "elsewhere")


def drop_parent(spans: Spans, store: Store, tmp: Path) -> tuple[Spans, Store]:
    return replace_span(spans, span_of(spans, 2), None), store


def cut_the_end(spans: Spans, store: Store, tmp: Path) -> tuple[Spans, Store]:
    """The run's last call (epoch 4) lost; its close record still names it."""
    return replace_span(spans, span_of(spans, 4), None), store


def withhold_content(spans: Spans, store: Store, tmp: Path) -> tuple[Spans, Store]:
    span = span_of(spans, 3)
    bare = edit_events(span, lambda e: event_with(e, af__commit__value=None, af__commit__ref=None))
    return replace_span(spans, span, bare), store


def drop_an_event(spans: Spans, store: Store, tmp: Path) -> tuple[Spans, Store]:
    span = span_of(spans, 3)
    lost = commit_events(span)[0]
    cut = dataclasses.replace(
        edit_events(span, lambda e: None if e is lost else e), dropped_events_count=1
    )
    return replace_span(spans, span, cut), store


def cut_the_receipt(spans: Spans, store: Store, tmp: Path) -> tuple[Spans, Store]:
    """The span carries no receipt at all (an af-2 receipt cut short is damage instead)."""
    span = span_of(spans, 3)
    bare = {
        key: None
        for key in span.attributes
        if key.startswith("af.receipt.") and key != names.RECEIPT_UNRECORDED
    }
    return replace_span(spans, span, with_attributes(span, **_keys(bare))), store


def _keys(changes: dict[str, Any]) -> dict[str, Any]:
    return {key.replace(".", "__"): value for key, value in changes.items()}


def forget_the_wire(spans: Spans, store: Store, tmp: Path) -> tuple[Spans, Store]:
    """A writer that set no gap kinds at all (as one before af.gaps existed)."""
    span = span_of(spans, 3)
    return as_written(replace_span(spans, span, with_attributes(span, af__gaps=None))), store


def seal_reasoning(spans: Spans, store: Store, tmp: Path) -> tuple[Spans, Store]:
    def seal(messages: list[Any]) -> list[Any]:
        messages[-2] = {"role": "assistant", "parts": [{"type": "reasoning", "content": ""}]}
        return messages

    return edit_commits(spans, 3, "messages", seal), store


def lose_the_forced_schema(spans: Spans, store: Store, tmp: Path) -> tuple[Spans, Store]:
    return edit_commits(
        spans, 1, "tools", lambda tools: [{"type": "function", "name": "other"}]
    ), store


def drop_a_dial(spans: Spans, store: Store, tmp: Path) -> tuple[Spans, Store]:
    return edit_commits(
        spans, 1, "params", lambda params: {k: v for k, v in params.items() if k != "temperature"}
    ), store


def unrecord_the_tools(spans: Spans, store: Store, tmp: Path) -> tuple[Spans, Store]:
    """The writer's instrumentation did not record tool definitions (as openai-v2 does not)."""
    span = span_of(spans, 3)
    named = with_attributes(span, af__receipt__unrecorded=("tools", "tool_choice"))
    return as_written(replace_span(spans, span, named)), store


def forced_tool_recording(store: Store) -> Spans:
    weather = {"type": "function", "function": {"name": "get_weather"}}
    with recorder(store) as rec, run("forced"):
        params = {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
        for turn in range(1, 4):
            rec.openinference_chat(
                [{"role": "user", "content": f"q{turn}"}] * turn, [weather], params
            )
        return rec.records()


def continue_held_history(spans: Spans, store: Store, tmp: Path) -> tuple[Spans, Store]:
    """The call continued a response the server holds (the Responses API's
    previous_response_id), as the writer recorded it."""
    span = span_of(spans, 3)
    kinds = (*span.attributes.get(names.GAPS, ()), names.GAP_HELD_HISTORY)
    held = with_attributes(span, af__gaps=kinds, af__held_history="resp_gone")
    return as_written(replace_span(spans, span, held)), store


def retry_another_body(spans: Spans, store: Store, tmp: Path) -> tuple[Spans, Store]:
    """The client sent the call twice with different bodies, as the writer's wire tap saw."""
    span = span_of(spans, 3)
    kinds = (*span.attributes.get(names.GAPS, ()), names.GAP_WIRE_ATTEMPTS_DIFFER)
    retried = with_attributes(span, af__gaps=kinds, af__wire__attempts=2)
    return as_written(replace_span(spans, span, retried)), store


def drop_the_body(spans: Spans, store: Store, tmp: Path) -> tuple[Spans, Store]:
    """The writer's wire tap dropped the call's body by its bounds before the call ended."""
    span = span_of(spans, 3)
    kinds = (*span.attributes.get(names.GAPS, ()), names.GAP_WIRE_BODY_EVICTED)
    return as_written(replace_span(spans, span, with_attributes(span, af__gaps=kinds))), store


def write_a_model_turn(spans: Spans, store: Store, tmp: Path) -> tuple[Spans, Store]:
    """A model turn no recorded call gave (a call without a span, or the application's own)
    lands in the history between epoch 2's answer and epoch 3's question."""

    def insert(appended: list[Any]) -> list[Any]:
        turn = [user("go on"), {"role": "assistant", "parts": [{"type": "text", "content": "ok"}]}]
        return [*appended[:-1], *turn, appended[-1]]

    return edit_commits(spans, 3, "messages", insert), store


DAMAGES = {
    names.GAP_NO_FOLD_BASE: drop_base,
    names.GAP_NO_RUN_LOG: drop_parent,
    names.GAP_NO_CONVERSATION: withhold_content,
    names.GAP_SPAN_LIMITS: drop_an_event,
    names.GAP_NO_RECEIPT: cut_the_receipt,
    names.GAP_CACHE_TRANSFORM: forget_the_wire,
    names.GAP_THINKING_REPLAY: seal_reasoning,
    names.GAP_FORCED_TOOL_SCHEMA: lose_the_forced_schema,
    names.GAP_PROVIDER_DEFAULTS: drop_a_dial,
    names.GAP_UNRECORDED: unrecord_the_tools,
    names.GAP_HELD_HISTORY: continue_held_history,
    names.GAP_UNRECORDED_CALL: write_a_model_turn,
    names.GAP_RUN_CUT_AT_END: cut_the_end,
    names.GAP_WIRE_ATTEMPTS_DIFFER: retry_another_body,
    names.GAP_WIRE_BODY_EVICTED: drop_the_body,
}


def moved_fields(before: ServedView, after: ServedView) -> set[str]:
    skip = {"gaps", "context", "origin"}
    return {
        f.name
        for f in dataclasses.fields(ServedView)
        if f.name not in skip and _fact(before, f.name) != _fact(after, f.name)
    }


def _fact(view: ServedView, name: str) -> Any:
    """A view field, the receipt without what af-2 binds of the span's own account (gaps,
    unrecorded fields, held history: their own view fields) and the digest over them."""
    value = getattr(view, name)
    if name == "receipt" and isinstance(value, Receipt):
        return dataclasses.replace(value, gaps=(), unrecorded=(), held=None, digest=None)
    return value


# Kinds the views get only from a read given more than spans and store: an upload base
# (tests/reader/test_upload_refs.py damages the uploads and finds the kind there).
WITH_UPLOADS = {names.GAP_UPLOAD_REF}


def test_every_kind_has_a_damage() -> None:
    assert set(DAMAGES) | WITH_UPLOADS == set(SERVED_GAPS)
    assert not set(DAMAGES) & WITH_UPLOADS


@pytest.mark.parametrize("kind", list(DAMAGES))
def test_damage_raises_its_gap_which_covers_everything_that_moved(
    kind: str, tmp_path: Path
) -> None:
    """Damage a real recording one way: the view at the damaged epoch gets the kind, the kind
    covers every view field that moved, and an excuse explains every receipt mismatch."""
    store = LocalStore(tmp_path / "store")
    if kind == names.GAP_FORCED_TOOL_SCHEMA:
        spans = forced_tool_recording(store)
    else:
        base = {"messages": [user("from before")], "system": "base prompt"}
        spans = record_agent(store, turns=4, base=base, scope=SDK_SCOPE)
    clean = {v.epoch: v for v in served_views(spans, store=store)}
    # Every SDK instrumentation leaves some setting unrecorded, and some dial unset.
    assert kind not in clean[3].gap_kinds or kind in (
        names.GAP_PROVIDER_DEFAULTS,
        names.GAP_UNRECORDED,
    )
    damaged_spans, damaged_store = DAMAGES[kind](spans, store, tmp_path)
    after = {v.epoch: v for v in served_views(damaged_spans, store=damaged_store)}[3]
    found = after.gap(kind)
    assert found is not None, after.gap_kinds
    moved = moved_fields(clean[3], after)
    assert all(covers(found.view_fields, name) for name in moved), (kind, moved)
    if found.excuses:
        assert moved, "an excusing damage must move something"
        verdict = verify(after)
        assert verdict.status is not VerdictStatus.DAMAGED, verdict
        assert all(m.excused_by for m in verdict.mismatches)
