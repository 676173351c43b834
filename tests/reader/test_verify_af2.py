"""af-2 on spans made by the real processor: a clean run verifies; stripping or editing any attribute
the digest binds (gaps, unrecorded fields, scope name and version, lane, source, scheme, parent
digest, key id) makes the epoch damaged, never reconstructed; a removed epoch is a named hole, and
an epoch re-parented or re-numbered over it is damaged."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from af_otel import names
from af_otel.canonical import key_id
from af_otel.keys import KeyRing
from af_otel.reader.records import SpanRecord
from af_otel.reader.verify import VerdictStatus, verify
from af_otel.reader.view import served_views
from af_otel.receipts import Receipt, digest_preimage
from af_otel.receipts import mint as mint_module
from af_otel.store import LocalStore, Store

from .recordings import Recorder, agent, replace_span, span_of, with_attributes

Spans = tuple[SpanRecord, ...]
# An SDK instrumentation's scope: the field ledger says it leaves settings unrecorded, so the
# spans carry a non-empty af.receipt.unrecorded and the unrecorded-field gap.
SCOPE, VERSION = "opentelemetry.instrumentation.openai_v2", "2.1b0"
RING = KeyRing.of(["key-before", "key-now"])


def recording(store: Store, *, key: str | None = None, turns: int = 4) -> Spans:
    """A tool-using agent of ``turns`` calls through ReceiptSpanProcessor, its tracer naming an
    instrumentation scope with a version."""
    options = {"key": key} if key else {}
    rec = Recorder(store, scope=SCOPE, **options)
    rec.tracer = rec.provider.get_tracer(SCOPE, VERSION)
    try:
        agent(rec, "run-af2", turns)
        return rec.records()
    finally:
        rec.close()


@cache
def _shared(tmp: str, keyed: bool) -> tuple[Spans, LocalStore]:
    store = LocalStore(tmp)
    return recording(store, key="key-now" if keyed else None), store


def statuses(spans: Spans, store: Store, key: Any = None) -> dict[int, VerdictStatus]:
    return {v.epoch: verify(v, key=key).status for v in served_views(spans, store=store)}


def edit(spans: Spans, epoch: int, **changes: Any) -> Spans:
    span = span_of(spans, epoch)
    return replace_span(spans, span, with_attributes(span, **changes))


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> tuple[Spans, LocalStore]:
    return _shared(str(tmp_path_factory.mktemp("plain")), False)


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Spans, LocalStore]:
    return _shared(str(tmp_path_factory.mktemp("keyed")), True)


def test_the_processor_mints_af2_binding_its_context(plain: tuple[Spans, LocalStore]) -> None:
    """Every call is af-2 with 64-digit hashes, the span's scope and version, the source, and
    from the second call on its parent's digest; the run reads as it did under af-1."""
    spans, store = plain
    digests: dict[int, str] = {}
    for epoch in range(1, 5):
        attributes = span_of(spans, epoch).attributes
        assert attributes[names.RECEIPT_SCHEME] == names.SCHEME_2
        assert len(str(attributes[names.RECEIPT_DIGEST])) == 64
        assert attributes[names.RECEIPT_SCOPE_NAME] == SCOPE
        assert attributes[names.RECEIPT_SCOPE_VERSION] == VERSION
        assert attributes[names.RECEIPT_SOURCE] == names.SOURCE_INSTRUMENTATION
        assert attributes[names.RECEIPT_UNRECORDED]  # the SDK scope leaves settings unrecorded
        parent = attributes[names.EPOCH_PARENT]
        assert attributes.get(names.RECEIPT_PARENT_DIGEST) == digests.get(parent)  # type: ignore[call-overload]
        digests[epoch] = str(attributes[names.RECEIPT_DIGEST])
    assert set(statuses(spans, store).values()) == {VerdictStatus.RECONSTRUCTED}


def _without(spans: Spans, epoch: int, name: str) -> Spans:
    return edit(spans, epoch, **{name.replace(".", "__"): None})


def _gaps_without_unrecorded(spans: Spans, epoch: int) -> Spans:
    """What made af-1's reconstructed calls read verified: the unrecorded fields and their gap
    kind stripped from the span."""
    span = span_of(spans, epoch)
    kinds = tuple(k for k in span.attributes[names.GAPS] if k != names.GAP_UNRECORDED)  # type: ignore[union-attr]
    return edit(spans, epoch, af__receipt__unrecorded=None, af__gaps=kinds)


TAMPERS: dict[str, Callable[[Spans], Spans]] = {
    "gaps stripped": lambda s: _without(s, 2, names.GAPS),
    "a gap kind removed": lambda s: edit(
        s, 2, af__gaps=tuple(span_of(s, 2).attributes[names.GAPS])[1:]
    ),  # type: ignore[arg-type]
    "a gap kind added": lambda s: edit(
        s,
        2,
        af__gaps=(*span_of(s, 2).attributes[names.GAPS], names.GAP_SPAN_LIMITS),  # type: ignore[misc]
    ),
    "unrecorded stripped": lambda s: _without(s, 2, names.RECEIPT_UNRECORDED),
    "unrecorded and its gap stripped": lambda s: _gaps_without_unrecorded(s, 2),
    "unrecorded edited": lambda s: edit(s, 2, af__receipt__unrecorded=("tools",)),
    "scope name stripped": lambda s: _without(s, 2, names.RECEIPT_SCOPE_NAME),
    "scope name edited": lambda s: edit(s, 2, af__receipt__scope__name="af_otel"),
    "span's scope changed": lambda s: replace_span(
        s, span_of(s, 2), dataclasses.replace(span_of(s, 2), scope="af_otel")
    ),
    "span's scope version changed": lambda s: replace_span(
        s, span_of(s, 2), dataclasses.replace(span_of(s, 2), scope_version="9.9")
    ),
    "scope version stripped": lambda s: _without(s, 2, names.RECEIPT_SCOPE_VERSION),
    "scope version edited": lambda s: edit(s, 2, af__receipt__scope__version="9.9"),
    "lane edited": lambda s: edit(s, 2, af__epoch__lane="0" * 16),
    "source stripped": lambda s: _without(s, 2, names.RECEIPT_SOURCE),
    "source edited": lambda s: edit(s, 2, af__receipt__source=names.SOURCE_WIRE),
    "scheme stripped": lambda s: _without(s, 2, names.RECEIPT_SCHEME),
    "scheme edited to af-1": lambda s: edit(s, 2, af__receipt__scheme=names.SCHEME_PLAIN),
    "scheme edited to keyed": lambda s: edit(s, 2, af__receipt__scheme=names.SCHEME_2_HMAC),
    "parent digest stripped": lambda s: _without(s, 2, names.RECEIPT_PARENT_DIGEST),
    "parent digest edited": lambda s: edit(s, 2, af__receipt__parent_digest="ab" * 32),
    "base added": lambda s: edit(s, 2, af__run__base="sha256:" + "cd" * 32),
    "held history added": lambda s: edit(s, 2, af__held_history="resp_1"),
}


@pytest.mark.parametrize("tamper", list(TAMPERS))
def test_a_stripped_or_edited_bound_attribute_is_damage(
    plain: tuple[Spans, LocalStore], tamper: str
) -> None:
    """Each tamper makes epoch 2 damaged (not reconstructed, not verified); epoch 1 is as it was."""
    spans, store = plain
    after = statuses(TAMPERS[tamper](spans), store)
    assert after[2] is VerdictStatus.DAMAGED, tamper
    assert after[1] is VerdictStatus.RECONSTRUCTED


_BOUND = (
    names.RECEIPT_UNRECORDED,
    names.RECEIPT_SOURCE,
    names.RECEIPT_SCOPE_NAME,
    names.RECEIPT_SCOPE_VERSION,
    names.RECEIPT_PARENT_DIGEST,
    names.EPOCH_LANE,
    names.HELD_HISTORY,
    names.RUN_BASE,
)


@given(
    epoch=st.integers(1, 4),
    name=st.sampled_from(_BOUND),
    value=st.one_of(st.text(max_size=20), st.lists(st.text(max_size=8), max_size=2)),
)
@settings(max_examples=40, deadline=None)
def test_any_other_value_of_a_bound_attribute_is_damage(
    epoch: int, name: str, value: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Whatever a bound attribute of any epoch is set to, unless it is the value it had (or one
    that reads the same), that epoch is damaged."""
    spans, store = _shared(str(tmp_path_factory.getbasetemp() / "plain"), False)
    edited = edit(spans, epoch, **{name.replace(".", "__"): value})
    before = Receipt.from_attributes(span_of(spans, epoch).attributes)
    after = Receipt.from_attributes(span_of(edited, epoch).attributes)
    assert isinstance(before, Receipt)
    if isinstance(after, Receipt) and digest_preimage(after) == digest_preimage(before):
        return  # a value that binds as the one written ("" as an absent one)
    assert statuses(edited, store)[epoch] is VerdictStatus.DAMAGED


def test_a_removed_epoch_is_a_hole_and_a_repair_over_it_is_damage(
    plain: tuple[Spans, LocalStore],
) -> None:
    """Without epoch 2, epoch 3 cannot be verified (its parent is a named hole); pointing epoch 3
    at epoch 1 instead, or giving epoch 3 the number 2, breaks its digest."""
    spans, store = plain
    removed = replace_span(spans, span_of(spans, 2), None)
    after = statuses(removed, store)
    assert after[3] is not VerdictStatus.VERIFIED
    assert after[3] is not VerdictStatus.DAMAGED  # a hole, not an edit
    reparented = edit(removed, 3, af__epoch__parent=1)
    assert statuses(reparented, store)[3] is VerdictStatus.DAMAGED
    renumbered = edit(removed, 3, af__epoch=2)
    assert VerdictStatus.DAMAGED in statuses(renumbered, store).values()


def test_swapped_epochs_are_damage(plain: tuple[Spans, LocalStore]) -> None:
    """Epochs 2 and 3 exchanging their numbers (and parents) break both digests."""
    spans, store = plain
    two, three = span_of(spans, 2), span_of(spans, 3)
    swapped = replace_span(
        replace_span(spans, two, with_attributes(two, af__epoch=3, af__epoch__parent=2)),
        three,
        with_attributes(three, af__epoch=2, af__epoch__parent=1),
    )
    assert VerdictStatus.DAMAGED in statuses(swapped, store).values()


def test_a_parent_replaced_by_another_valid_receipt_is_damage(
    plain: tuple[Spans, LocalStore], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Epoch 2's span replaced by epoch 2 of another recording of the same run (a consistent
    receipt of its own) verifies no better, and epoch 3, which bound the original's digest, is
    damaged at its parent digest."""
    spans, store = plain
    other = recording(LocalStore(tmp_path_factory.mktemp("other")), turns=4)
    foreign = dataclasses.replace(
        span_of(other, 2),
        attributes={
            **span_of(other, 2).attributes,
            names.EPOCH_LANE: span_of(spans, 2).attributes[names.EPOCH_LANE],
        },
    )
    views = {
        v.epoch: v
        for v in served_views(replace_span(spans, span_of(spans, 2), foreign), store=store)
    }
    verdict = verify(views[3])
    assert verdict.status is VerdictStatus.DAMAGED
    assert verdict.field == "parent_digest"


def test_keyed_receipts_name_their_key(keyed: tuple[Spans, LocalStore]) -> None:
    """A keyed run verifies from a ring holding its key; its key id stripped, or edited to the
    ring's other key, is damage."""
    spans, store = keyed
    assert span_of(spans, 1).attributes[names.RECEIPT_KEY_ID] == key_id("key-now")
    assert set(statuses(spans, store, key=RING).values()) == {VerdictStatus.RECONSTRUCTED}
    stripped = _without(spans, 2, names.RECEIPT_KEY_ID)
    assert statuses(stripped, store, key=RING)[2] is VerdictStatus.DAMAGED
    moved = edit(spans, 2, af__receipt__key_id=key_id("key-before"))
    assert statuses(moved, store, key=RING)[2] is VerdictStatus.DAMAGED


def test_af1_spans_of_the_processor_still_verify(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A processor minting af-1 (as every writer before af-2 did) writes spans the reader
    verifies as before: af-1 does not bind the unrecorded fields, which is what af-2 is for."""
    monkeypatch.setattr(mint_module, "DEFAULT_FAMILY", names.SCHEME_PLAIN)
    store = LocalStore(tmp_path_factory.mktemp("af1"))
    spans = recording(store, turns=3)
    assert span_of(spans, 1).attributes[names.RECEIPT_SCHEME] == names.SCHEME_PLAIN
    assert names.RECEIPT_SOURCE not in span_of(spans, 1).attributes
    assert set(statuses(spans, store).values()) == {VerdictStatus.RECONSTRUCTED}
    stripped = _gaps_without_unrecorded(spans, 2)
    assert statuses(stripped, store)[2] is VerdictStatus.VERIFIED
