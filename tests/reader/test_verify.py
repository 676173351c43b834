"""`verify` recomputes every receipt field from the rebuilt view (equal to `mint_receipt`), and
names the first field and message where a record was damaged."""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import names
from af_otel.canonical import key_id
from af_otel.errors import ReaderError
from af_otel.keys import KeyRing
from af_otel.model import Request
from af_otel.present.terminal import print_view
from af_otel.processor import ReceiptSpanExporter, ReceiptSpanProcessor, run
from af_otel.processor import engine as engine_module
from af_otel.reader.verify import Verdict, VerdictStatus, recompute, verify
from af_otel.reader.view import served_views
from af_otel.receipts import Receipt, ReceiptContext, mint_receipt
from af_otel.store import LocalStore, Store

from .recordings import (
    WHOLE_RECORD,
    Recorder,
    commit_events,
    cut_strings,
    edit_events,
    event_with,
    llm_spans,
    record_agent,
    recorder,
    replace_span,
    span_of,
    user,
    with_attributes,
)
from .synthetic import synthetic_run


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return LocalStore(tmp_path / "store")


def statuses(spans: Any, store: Store, **kwargs: Any) -> list[str]:
    return [verify(v, **kwargs).status.value for v in served_views(spans, store=store)]


texts = st.text(alphabet="ab<>&é😀", max_size=6)
messages = st.builds(
    lambda role, text: {"role": role, "parts": [{"type": "text", "content": text}]},
    st.sampled_from(["user", "assistant", "tool"]),
    texts,
)


@st.composite
def request_trees(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[int], dict[str, Any] | None]:
    """Requests on a random tree, each grown from its parent's: new turns mostly, sometimes a
    shortened history, a new system prompt, tools, dials or model."""
    base = None
    if draw(st.booleans()):
        base = {
            "messages": draw(st.lists(messages, max_size=3)),
            "system": "base prompt",
            "model": "m0",
        }
    size = draw(st.integers(1, 8))
    requests: list[dict[str, Any]] = []
    parents: list[int] = []
    for epoch in range(1, size + 1):
        parent = draw(st.integers(0, epoch - 1))
        before = requests[parent - 1] if parent else (base or {"messages": []})
        request = dict(before)
        history = list(before.get("messages", []))
        if history and draw(st.integers(0, 5)) == 0:
            history = history[: draw(st.integers(0, len(history) - 1))]
        request["messages"] = history + draw(st.lists(messages, min_size=0, max_size=3))
        if draw(st.integers(0, 3)) == 0:
            request["system"] = draw(texts) or None
        if draw(st.integers(0, 3)) == 0:
            request["tools"] = [
                {"type": "function", "name": name}
                for name in draw(st.lists(st.sampled_from("xyz"), unique=True))
            ]
        if draw(st.integers(0, 3)) == 0:
            request["params"] = draw(
                st.dictionaries(
                    st.sampled_from(["temperature", "seed", "tool_choice"]), st.integers(0, 3)
                )
            )
        if draw(st.integers(0, 4)) == 0:
            request["model"] = draw(st.sampled_from(["m1", "m2", None]))
        requests.append(request)
        parents.append(parent)
    return requests, parents, base


@given(request_trees(), st.booleans())
@settings(max_examples=60, deadline=None)
def test_recompute_equals_mint_receipt_on_random_trees(tree: Any, keyed: bool) -> None:
    """Every field (digest included) the reader recomputes equals what `mint_receipt` mints for
    the same request, and every epoch verifies, but one whose history shows a model turn no call
    of the tree gave (`unrecorded-call`), which is reconstructed."""
    import tempfile

    requests, parents, base = tree
    key = b"secret" if keyed else None
    with tempfile.TemporaryDirectory() as directory:
        store = LocalStore(directory)
        spans = synthetic_run("run-x", requests, parents, base=base, store=store, key=key)
        views = served_views(spans, store=store)
        minted: dict[int, Receipt | None] = {0: None}
        if base is not None:
            minted[0] = mint_receipt(base, run_id="run-x", epoch=0, key=key)
        for view, request, parent in zip(views, requests, parents, strict=True):
            expected = mint_receipt(
                request,
                run_id="run-x",
                epoch=view.epoch,
                parent=minted[parent] or parent,
                key=key,
                context=ReceiptContext(base=view.base),
            )
            minted[view.epoch] = expected
            assert view.request == Request.from_dict(request)
            got = recompute(view, key=key)
            assert got.to_attributes() == expected.to_attributes()
            hole = view.gap(names.GAP_UNRECORDED_CALL) is not None
            expected_status = VerdictStatus.RECONSTRUCTED if hole else VerdictStatus.VERIFIED
            assert verify(view, key=key).status is expected_status


def test_real_recordings_verify_at_every_epoch(store: Store) -> None:
    """With and without a base, with a parallel fan-out: every epoch is verified."""
    base = {"messages": [user("earlier"), {"role": "assistant", "content": "noted"}]}
    spans = record_agent(store, "with-base", turns=4, base=base, fan_out_at=2)
    spans += record_agent(store, "no-base", turns=4, fan_out_at=3)
    assert set(statuses(spans, store)) == {"verified"}


def test_payloads_in_the_store_verify(store: Store) -> None:
    """``content="store"``: every payload is fetched by address and the run still verifies."""
    with recorder(store, content="store") as rec:
        from .recordings import agent

        agent(rec, "stored", 3)
        spans = rec.records()
    assert all(names.COMMIT_REF in e.attributes for s in spans for e in commit_events(s))
    assert set(statuses(spans, store)) == {"verified"}


def test_keyed_receipts_need_their_key(store: Store) -> None:
    """An HMAC receipt verifies with its key, is damaged under another, and without one raises."""
    with recorder(store, key="k1") as rec:
        from .recordings import agent

        agent(rec, "keyed", 2)
        spans = rec.records()
    assert set(statuses(spans, store, key="k1")) == {"verified"}
    view = served_views(spans, store=store)[0]
    with pytest.raises(ReaderError, match="keyed"):
        verify(view)
    # af-2 names its key: another key is not tried, it is said to be the wrong one
    with pytest.raises(ReaderError, match=f"key id {key_id('k1')}"):
        verify(view, key="other")
    assert set(statuses(spans, store, key=KeyRing.of(["old", "k1"]))) == {"verified"}
    # a receipt that claims to be keyed by the ring's other key does not verify under it
    span = span_of(spans, 1)
    moved = replace_span(spans, span, with_attributes(span, af__receipt__key_id=key_id("old")))
    assert statuses(moved, store, key=KeyRing.of(["old", "k1"]))[0] == "damaged"


def edit_message_text(spans: Any, epoch: int, new_text: str) -> Any:
    """Change the text of the last message appended at ``epoch`` (valid JSON, same shape)."""
    span = span_of(spans, epoch)

    def edit(event: Any) -> Any:
        if event.attributes.get(names.COMMIT_KEY) != "messages":
            return event
        payload = json.loads(event.attributes[names.COMMIT_VALUE])
        payload[-1]["parts"][0]["content"] = new_text
        return event_with(event, af__commit__value=json.dumps(payload))

    return replace_span(spans, span, edit_events(span, edit))


def test_an_edited_event_is_damage_at_its_epoch_and_message(store: Store) -> None:
    """An edited commit payload makes its epoch damaged at the first differing message; earlier
    epochs still verify, later ones are damaged too (they were shown the edited turn)."""
    spans = record_agent(store, turns=4)
    edited = edit_message_text(spans, 3, "a different question")
    verdicts = [verify(v) for v in served_views(edited, store=store)]
    assert [v.status.value for v in verdicts] == ["verified", "verified", "damaged", "damaged"]
    third = verdicts[2]
    # epoch 3 appends: tool call 2, tool answer 2, answer 2, question 3 -> the question is 8th
    assert third.field == "messages.added"
    assert third.message_index == 8
    assert third.looks == "altered"
    assert verdicts[3].message_index == 8


def test_a_dropped_message_looks_cut(store: Store) -> None:
    """A payload that lost its last message (still valid JSON) is damage that looks cut."""
    spans = record_agent(store, turns=3)
    span = span_of(spans, 2)

    def shorten(event: Any) -> Any:
        if event.attributes.get(names.COMMIT_KEY) != "messages":
            return event
        payload = json.loads(event.attributes[names.COMMIT_VALUE])[:-1]
        text = json.dumps(payload)
        return event_with(event, af__commit__value=text, af__commit__bytes=len(text.encode()))

    verdict = verify(
        served_views(replace_span(spans, span, edit_events(span, shorten)), store=store)[1]
    )
    assert verdict.status is VerdictStatus.DAMAGED
    assert verdict.field == "messages.count"
    assert verdict.looks == "cut"
    assert verdict.message_index == 4


@pytest.mark.parametrize(
    ("attribute", "value", "field"),
    [
        (names.RECEIPT_PARAMS, '{"temperature":0.9}', "params"),
        (names.RECEIPT_MODEL, "gpt-5", "model"),
        (names.RECEIPT_DIGEST, "0123456789abcdef" * 4, "digest"),
        (names.RECEIPT_SYSTEM_HASH, "0123456789abcdef" * 4, "system.hash"),
        (names.RECEIPT_BYTES, 1, "bytes"),
        # a moved parent rebuilds from the base, which lacks the system prompt epoch 1 set
        (names.EPOCH_PARENT, 0, "system.pieces"),
    ],
)
def test_an_edited_receipt_attribute_is_damage_naming_its_field(
    store: Store, attribute: str, value: Any, field: str
) -> None:
    """Editing one receipt attribute makes that epoch damaged at that field."""
    spans = record_agent(store, turns=3)
    span = span_of(spans, 2)
    edited = replace_span(
        spans, span, with_attributes(span, **{attribute.replace(".", "__"): value})
    )
    verdicts = {v.epoch: verify(v) for v in served_views(edited, store=store)}
    assert verdicts[2].status is VerdictStatus.DAMAGED
    assert verdicts[2].field == field
    assert verdicts[1].status is VerdictStatus.VERIFIED


def test_a_receipt_moved_to_another_call_fails_its_digest(store: Store) -> None:
    """Copying epoch 2's receipt onto epoch 3's span is damage, not a match."""
    spans = record_agent(store, turns=3)
    two, three = span_of(spans, 2), span_of(spans, 3)
    receipt = {k: v for k, v in two.attributes.items() if k.startswith("af.receipt.")}
    moved = dataclasses.replace(three, attributes={**three.attributes, **receipt})
    verdict = verify(served_views(replace_span(spans, three, moved), store=store)[2])
    assert verdict.status is VerdictStatus.DAMAGED


def test_attributes_cut_at_the_backend_limit_are_never_verified(store: Store) -> None:
    """Payloads over 2,048 bytes inline, cut as Tempo cuts them: the cut epoch and every epoch
    built on it are reconstructed or damaged, never verified; earlier epochs still verify."""
    long_text = "long " * 600
    with recorder(store, inline_limit=100_000) as rec:
        from af_otel.processor import run

        with run("cut"):
            history = [user("hello")]
            rec.chat(history)
            history += [{"role": "assistant", "content": "hi"}, user(long_text)]
            rec.chat(history)
            history += [{"role": "assistant", "content": "ok"}, user("more")]
            rec.chat(history)
        spans = rec.records()
    cut = tuple(cut_strings(s) for s in spans)
    assert cut != spans
    results = statuses(cut, store)
    assert results[0] == "verified"
    assert "verified" not in results[1:]
    second = served_views(cut, store=store)[1]
    assert {"span-limits", "no-run-log"} <= set(second.gap_kinds)


def test_a_writer_that_lost_its_parent_still_verifies() -> None:
    """``kept`` = 0 from a writer that no longer held the parent's receipt is a true (weaker)
    claim: every field recomputes (reconstructed, as af-2's chain link to the parent is then not
    proven); a claim larger than the truth is damage at messages.kept."""
    first = {"messages": [user("a")]}
    second = {"messages": [user("a"), user("b")]}
    spans = synthetic_run("lost", [first, second], [0, 1], forget_parent=[2])
    assert span_of(spans, 2).attributes[names.RECEIPT_MESSAGES_KEPT] == 0
    verdicts = [verify(v) for v in served_views(spans, store=None)]
    # Every field recomputes; af-2 cannot link the chain without the parent's digest.
    assert [v.status.value for v in verdicts] == ["verified", "reconstructed"]
    assert "held only the number of its parent epoch 1" in verdicts[1].reason
    third = {"messages": [user("x"), user("b")]}
    spans = synthetic_run("false", [first, third], [0, 1])
    span = span_of(spans, 2)
    added = span.attributes[names.RECEIPT_MESSAGES_ADDED]
    liar = with_attributes(
        span, af__receipt__messages__kept=1, af__receipt__messages__added=added[1:]
    )
    verdict = verify(served_views(replace_span(spans, span, liar), store=None)[1])
    assert verdict.status is VerdictStatus.DAMAGED
    assert verdict.field == "messages.kept"
    assert verdict.message_index == 0


def test_a_missing_receipt_is_reconstructed(store: Store) -> None:
    """A span whose receipt attributes were stripped is reconstructed, never verified or damaged
    (a call before the run's last: the last one's digest is also in the run's close record)."""
    spans = record_agent(store, turns=3)
    span = span_of(spans, 2)
    bare = dataclasses.replace(
        span,
        attributes={k: v for k, v in span.attributes.items() if not k.startswith("af.receipt.")},
    )
    verdict = verify(served_views(replace_span(spans, span, bare), store=store)[1])
    assert verdict.status is VerdictStatus.RECONSTRUCTED
    assert "no receipt" in verdict.reason


def test_a_verdict_carries_the_facts_of_its_view(store: Store) -> None:
    """Every verdict, damaged, verified or without a receipt, states its call's place, span,
    scope, source, model and gap kinds as its view does; a verdict built by hand leaves them
    unknown."""
    spans = record_agent(store, turns=3)
    span = span_of(spans, 2)
    wire = with_attributes(span, af__receipt__source=names.SOURCE_WIRE)
    bare = span_of(spans, 3)
    bare = dataclasses.replace(
        bare,
        attributes={k: v for k, v in bare.attributes.items() if not k.startswith("af.receipt.")},
    )
    views = served_views(
        replace_span(replace_span(spans, span, wire), span_of(spans, 3), bare), store=store
    )
    for view in views:
        verdict = verify(view)
        facts = (
            verdict.parent,
            verdict.lane,
            verdict.trace_id,
            verdict.span_id,
            verdict.scope,
            verdict.scope_version,
            verdict.source,
            verdict.model,
            verdict.gap_kinds,
        )
        assert facts == (
            view.parent,
            view.lane,
            view.trace_id,
            view.span_id,
            view.recorded_by,
            view.scope_version,
            view.source,
            view.model,
            view.gap_kinds,
        )
        assert verdict.scope
        assert verdict.lane
    assert [v.source for v in views] == ["instrumentation", "wire", "instrumentation"]
    assert names.GAP_NO_RECEIPT in verify(views[2]).gap_kinds
    plain = Verdict(VerdictStatus.VERIFIED, "r", 1, "0" * 16, "by hand")
    assert (plain.parent, plain.lane, plain.source, plain.gap_kinds) == (None, None, None, ())


def test_the_facts_are_added_without_losing_any_field_of_the_verdict(store: Store) -> None:
    """`verify` copies the judged verdict to add its view's facts: every other field survives,
    so a field added to `Verdict` fails here until the copy names it."""
    from af_otel.reader.verify import _with_facts

    view = served_views(record_agent(store, turns=1), store=store)[0]
    facts = {"parent", "lane", "trace_id", "scope", "scope_version", "source", "model", "gap_kinds"}
    judged = {f.name: object() for f in dataclasses.fields(Verdict) if f.name not in facts}
    copied = _with_facts(view, Verdict(**judged))
    assert {name: getattr(copied, name) for name in judged} == judged
    assert {f.name for f in dataclasses.fields(Verdict)} - set(judged) == facts


def test_verifying_out_of_order_and_twice_gives_the_same_verdicts(store: Store) -> None:
    """Verdicts do not depend on the order views are verified in (the memo is only a memo)."""
    spans = record_agent(store, turns=5, fan_out_at=3)
    views = served_views(spans, store=store)
    forward = [verify(v) for v in views]
    again = served_views(spans, store=store)
    backward = [verify(v) for v in reversed(again)][::-1]
    assert forward == backward == [verify(v) for v in views]


# -- a record the SDK's span limits cut, or an instrumentation that records less -------------------


@contextmanager
def limited_recorder(
    store: Store,
    limits: SpanLimits | None = None,
    scope: str = WHOLE_RECORD,
    *,
    exporter_form: bool = False,
) -> Iterator[Recorder]:
    """A recorder whose SDK runs under ``limits``, as a user's would with the OTEL_SPAN_* variables;
    af_otel wraps the export processor, or the exporter (``exporter_form``)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=limits)
    if exporter_form:
        wrapped = ReceiptSpanExporter(exporter, store=store)
        provider.add_span_processor(SimpleSpanProcessor(wrapped))
    else:
        provider.add_span_processor(
            ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=store)
        )
    made = Recorder(store, scope=scope, provider=provider)
    made.exporter = exporter
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def warnings_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "_warned", set())


@pytest.mark.parametrize("exporter_form", [False, True])
def test_an_evicted_attribute_means_no_receipt_and_never_verified(
    store: Store, caplog: pytest.LogCaptureFixture, warnings_again: None, exporter_form: bool
) -> None:
    """One attribute over the SDK's count limit: the call gets no receipt (content-cut) and
    span-limits, its verdict is reconstructed, and the warning names the limit to raise; the
    processor and the exporter form alike."""
    limits = SpanLimits(max_span_attributes=7)
    with (
        limited_recorder(store, limits, exporter_form=exporter_form) as rec,
        run("evicted"),
    ):
        rec.chat([user("hello")])  # eight attributes: the oldest one is evicted
        spans = rec.records()
    (span,) = llm_spans(spans)
    assert span.dropped_attributes_count == 1
    assert span.attributes[names.RECEIPT_STATE] == names.STATE_ABSENT
    assert span.attributes[names.RECEIPT_ABSENT_REASON] == names.REASON_CUT
    assert names.GAP_SPAN_LIMITS in span.attributes[names.GAPS]
    (view,) = served_views(spans, store=store)
    assert names.GAP_SPAN_LIMITS in view.gap_kinds
    assert verify(view).status is VerdictStatus.RECONSTRUCTED
    assert "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT" in caplog.text


def test_a_value_at_the_length_limit_means_no_receipt_and_never_verified(
    store: Store, caplog: pytest.LogCaptureFixture, warnings_again: None
) -> None:
    """A 2,230-character message under a 1,500-character value limit reaches the span cut: no
    receipt (content-cut), reconstructed, and the warning names the length limit; a message
    shorter than the limit in the same run still verifies."""
    weather = {"type": "function", "function": {"name": "get_weather"}}
    with (
        limited_recorder(store, SpanLimits(max_attribute_length=1500)) as rec,
        run("long"),
    ):
        rec.openinference_chat([{"role": "user", "content": "short"}], [weather], {})
        long_text = "x" * 2230
        rec.openinference_chat([{"role": "user", "content": long_text}], [weather], {})
        spans = rec.records()
    short, cut = llm_spans(spans)
    assert short.attributes[names.RECEIPT_STATE] == names.STATE_MINTED
    assert cut.attributes[names.RECEIPT_ABSENT_REASON] == names.REASON_CUT
    first, second = served_views(spans, store=store)
    assert verify(first).status is VerdictStatus.VERIFIED
    assert verify(second).status is VerdictStatus.RECONSTRUCTED
    assert names.GAP_SPAN_LIMITS in second.gap_kinds
    assert "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT" in caplog.text


def test_an_instrumentation_without_tool_definitions_is_never_verified(store: Store) -> None:
    """openai-v2 records no tool definitions: its call is reconstructed with unrecorded-field
    naming tools and the instrumentation, and is shown as not recorded, never as no tools; the
    same call from a writer that records every field verifies."""
    with limited_recorder(store, scope="opentelemetry.instrumentation.openai_v2") as rec:
        with run("v2"):
            rec.chat([user("weather?")], tools=None)
        spans = rec.records()
    (view,) = served_views(spans, store=store)
    assert view.tools == ()
    assert "tools" in view.unrecorded
    assert not view.is_recorded("tools")
    found = view.gap(names.GAP_UNRECORDED)
    assert found is not None
    assert "tools" in found.detail
    assert "opentelemetry.instrumentation.openai_v2" in found.detail
    verdict = verify(view)
    assert verdict.status is VerdictStatus.RECONSTRUCTED
    assert names.GAP_UNRECORDED in verdict.reason
    shown = io.StringIO()
    print_view(view, verdict, False, shown)
    assert "tools: not recorded by opentelemetry.instrumentation.openai_v2" in shown.getvalue()
    assert "tools (0)" not in shown.getvalue()
    with limited_recorder(store) as rec:
        with run("whole"):
            rec.chat([user("weather?")], tools=None)
        spans = rec.records()
    (whole,) = served_views(spans, store=store)
    assert whole.unrecorded == ()
    assert verify(whole).status is VerdictStatus.VERIFIED
