"""`referenced_blobs`: the store addresses a real recording names on its spans (run bases, commit
payloads), which the CLI checks a store against; every blob its writer stored is one of them or
is reached from them through stored message references; an address that is not one is left out.
And the reader's fetches: a blob that is absent is a gap, one that is damaged (its bytes, or not
what its reference promised) makes every call that depends on it damaged, never a gap."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from af_otel import names
from af_otel.errors import StoreError
from af_otel.processor import run
from af_otel.reader.blobs import referenced_blobs
from af_otel.reader.records import SpanRecord, freeze_attributes
from af_otel.reader.sources import read_spans
from af_otel.reader.verify import verify
from af_otel.reader.view import served_views
from af_otel.store import LocalStore, Store
from af_otel.store.items import CHUNK_REF, ITEM_REF, is_item_ref
from tests.reader.recordings import (
    agent,
    assistant,
    file_recorder,
    one_character_changed,
    recorder,
    user,
)


def test_the_referenced_blobs_are_the_stored_ones(tmp_path: Path) -> None:
    traces, store = tmp_path / "t.jsonl", tmp_path / "store"
    with file_recorder(traces, LocalStore(store)) as rec:
        agent(rec, "blobs", 3, base={"messages": [user("earlier " * 40)]})
        with run("blobs-2"):
            rec.chat([user("x" * 20_000)])
    stored = {f"sha256:{p.parent.name}{p.name}" for p in (store / "sha256").glob("*/*")}
    spans = list(read_spans(traces))
    found = referenced_blobs(spans)
    assert len(found) == len(set(found))
    assert set(found) <= stored
    assert _reached(LocalStore(store), found) == stored
    assert set(found) < stored  # the base's messages are stored one by one, behind the base
    assert len(found) >= 2
    edited = [
        dataclasses.replace(
            s, attributes=freeze_attributes({**s.attributes, names.RUN_BASE: "sha256:../../etc"})
        )
        for s in spans
    ]
    assert set(referenced_blobs(edited)) < stored


def _reached(store: Store, addresses: list[str]) -> set[str]:
    """``addresses`` and every blob their stored JSON names by a message or chunk reference."""
    seen: set[str] = set()
    todo = list(addresses)
    while todo:
        address = todo.pop()
        if address not in seen:
            seen.add(address)
            todo.extend(_references(store.get_json(address)))
    return seen


def _references(value: Any) -> list[str]:
    if is_item_ref(value):
        return [value.get(ITEM_REF, value.get(CHUNK_REF))]
    if isinstance(value, dict):
        return [ref for item in value.values() for ref in _references(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in _references(item)]
    return []


# -- damage is never a gap ------------------------------------------------------------------------


def _blob_path(root: Path, address: str) -> Path:
    digits = address.removeprefix("sha256:")
    return root / "sha256" / digits[:2] / digits[2:]


def _overwrite(root: Path, address: str, data: bytes) -> None:
    path = _blob_path(root, address)
    path.chmod(0o644)
    path.write_bytes(data)


def _kinds(store: Store, spans: Sequence[SpanRecord]) -> dict[str, tuple[str, set[int]]]:
    """Every blob the spans reach: address -> (kind, the epochs whose spans name it, directly or
    through a stored list; 0 for the base and what it holds). A message stored once may be named
    by several payloads."""
    found: dict[str, tuple[str, set[int]]] = {}

    def note(address: str, kind: str, epoch: int) -> None:
        found.setdefault(address, (kind, set()))[1].add(epoch)

    def walk(value: Any, epoch: int) -> None:
        for item in value if isinstance(value, list) else []:
            if is_item_ref(item) and ITEM_REF in item:
                note(item[ITEM_REF], "message", epoch)
            elif is_item_ref(item):
                note(item[CHUNK_REF], "chunk", epoch)
                walk(store.get_json(item[CHUNK_REF]), epoch)

    for span in spans:
        if names.EPOCH not in span.attributes:  # the run's close record names no blob
            continue
        epoch = int(span.attributes[names.EPOCH])  # type: ignore[arg-type]
        base = span.attributes.get(names.RUN_BASE)
        if isinstance(base, str) and base not in found:
            note(base, "base", 0)
            walk(store.get_json(base).get("messages"), 0)  # type: ignore[union-attr]
        for event in span.events:
            ref = event.attributes.get(names.COMMIT_REF)
            if isinstance(ref, str):
                note(ref, "payload", epoch)
                walk(store.get_json(ref), epoch)
    return found


def _after(epochs: set[int]) -> set[int]:
    return {e for epoch in epochs for e in AFTER[epoch]}


BASE = {"messages": [m for i in range(10) for m in (user(f"q{i}"), assistant(f"a{i}"))]}
# The recorded tree: 1 -> 2 -> {3, 4}, 3 -> 5 (a fan-out at the third turn).
AFTER = {0: {1, 2, 3, 4, 5}, 1: {1, 2, 3, 4, 5}, 2: {2, 3, 4, 5}, 3: {3, 5}, 4: {4}, 5: {5}}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[SpanRecord, ...]]:
    """A run with a stored base (a chunk and message blobs behind it), every commit payload in
    the store, and a fan-out; each call verified as recorded."""
    root = tmp_path_factory.mktemp("damage") / "store"
    with recorder(LocalStore(root), content="store") as rec:
        agent(rec, "run-1", 4, base=BASE, fan_out_at=3)
        spans = rec.records()
    assert {verify(v).status.value for v in served_views(spans, store=LocalStore(root))} == {
        "verified"
    }
    return root, spans


def _verdicts(spans: Sequence[SpanRecord], root: Path) -> dict[int, Any]:
    views = served_views(spans, store=LocalStore(root))
    return {v.epoch: (v, verify(v)) for v in views}


def _edits(root: Path, address: str) -> dict[str, bytes]:
    """Three ways a stored blob is damaged: one character changed, cut short, another blob of the
    store put at its address."""
    data = _blob_path(root, address).read_bytes()
    other = next(
        p for p in (root / "sha256").glob("*/*") if f"sha256:{p.parent.name}{p.name}" != address
    )
    return {
        "one-character": one_character_changed(data),
        "truncated": data[: len(data) // 2],
        "another-blob": other.read_bytes(),
    }


@pytest.mark.parametrize("edit", ["one-character", "truncated", "another-blob"])
def test_every_damaged_blob_makes_the_calls_that_depend_on_it_damaged(
    recorded: tuple[Path, tuple[SpanRecord, ...]], tmp_path: Path, edit: str
) -> None:
    """Each blob of each kind (base, chunk, message, payload), damaged one way, makes exactly the
    epochs whose view rests on it damaged, naming the blob and the field it feeds; it is never a
    gap, and the other epochs keep their verdicts."""
    root, spans = recorded
    kinds = _kinds(LocalStore(root), spans)
    assert {kind for kind, _ in kinds.values()} == {"base", "chunk", "message", "payload"}
    for address, (kind, epochs) in kinds.items():
        copy = tmp_path / address[7:19]
        shutil.copytree(root, copy)
        _overwrite(copy, address, _edits(copy, address)[edit])
        found = _verdicts(spans, copy)
        damaged = {e for e, (_, verdict) in found.items() if verdict.status == "damaged"}
        assert damaged == _after(epochs), (kind, address)
        for at in damaged:
            view, verdict = found[at]
            assert [d.address for d in view.damaged] == [address]
            assert view.damaged[0].kind == kind
            assert address in verdict.reason
            assert verdict.field == view.damaged[0].field
            assert verdict.mismatches[0].blob == address
            assert not {"no-fold-base", "no-run-log"} & set(view.gap_kinds), view.gap_kinds
        for at in found.keys() - damaged:
            assert found[at][1].status == "verified"
        shutil.rmtree(copy)


def test_the_field_a_damaged_blob_feeds_is_named(
    recorded: tuple[Path, tuple[SpanRecord, ...]], tmp_path: Path
) -> None:
    """A base damaged as a whole names `base`; a payload, its commit's key; a chunk or message
    behind the base, `messages`."""
    root, spans = recorded
    store = LocalStore(root)
    kinds = _kinds(store, spans)
    first = {
        e.attributes[names.COMMIT_KEY]: e.attributes[names.COMMIT_REF] for e in spans[0].events
    }
    expect = {
        next(a for a, (k, _) in kinds.items() if k == "base"): "base",
        next(a for a, (k, _) in kinds.items() if k == "chunk"): "messages",
        next(a for a, (k, _) in kinds.items() if k == "message"): "messages",
        **{str(ref): str(key) for key, ref in first.items()},
    }
    for address, field in expect.items():
        shutil.copytree(root, tmp_path / "copy")
        _overwrite(tmp_path / "copy", address, b"")
        view, verdict = _verdicts(spans, tmp_path / "copy")[1]
        assert (verdict.status, verdict.field) == ("damaged", field), address
        assert view.damaged[0].field == field
        shutil.rmtree(tmp_path / "copy")


def _pointed(spans: Sequence[SpanRecord], old: str, new: str) -> tuple[SpanRecord, ...]:
    """The spans with every reference to ``old`` (base or commit payload) pointed at ``new``."""

    def moved(attributes: Any) -> dict[str, Any]:
        return {k: (new if v == old else v) for k, v in attributes.items()}

    return tuple(
        dataclasses.replace(
            s,
            attributes=freeze_attributes(moved(s.attributes)),
            events=tuple(
                dataclasses.replace(e, attributes=freeze_attributes(moved(e.attributes)))
                for e in s.events
            ),
        )
        for s in spans
    )


@pytest.mark.parametrize(
    ("kind", "key", "stored"),
    [
        ("base", None, b"not json at all"),
        ("base", None, b"[1,2,3]"),
        ("base", None, b'{"messages":"hello"}'),
        ("base", None, b'{"messages":[{"af.ref":"sha256:nothex"}]}'),
        ("base", None, b'{"messages":{"role":"user"}}'),
        ("base", None, b'{"messages":[{"content":"no role"}]}'),
        ("payload", "messages", b'{"a":1}'),
        ("payload", "messages", b"not json"),
        ("payload", "params", b'["a list"]'),
        ("payload", "tools", b'"a string"'),
    ],
)
def test_a_blob_that_hashes_right_but_is_the_wrong_shape_is_damage(
    recorded: tuple[Path, tuple[SpanRecord, ...]],
    tmp_path: Path,
    kind: str,
    key: str | None,
    stored: bytes,
) -> None:
    """A correctly addressed blob that is not what its reference promises (not JSON, not an
    object, a key of the wrong shape, a reference that is none, a message without a role), with
    a span pointed at it, makes the calls that depend on it damaged, naming it."""
    root, spans = recorded
    shutil.copytree(root, tmp_path / "store")
    store = LocalStore(tmp_path / "store")
    planted = store.put(stored)
    if kind == "base":
        old = str(spans[0].attributes[names.RUN_BASE])
    else:
        old = next(
            str(e.attributes[names.COMMIT_REF])
            for e in spans[0].events
            if e.attributes[names.COMMIT_KEY] == key
        )
    found = _verdicts(_pointed(spans, old, planted), tmp_path / "store")
    view, verdict = found[1]
    assert verdict.status == "damaged", verdict
    assert planted in verdict.reason
    assert view.damaged[0].address == planted
    assert not {"no-fold-base", "no-run-log"} & set(view.gap_kinds)
    assert {v.status.value for _, v in found.values()} == {"damaged"}


@pytest.mark.parametrize("planted", ["message", "chunk"])
def test_a_message_or_chunk_of_the_wrong_shape_is_damage(
    recorded: tuple[Path, tuple[SpanRecord, ...]], tmp_path: Path, planted: str
) -> None:
    """A base whose message reference names a blob that is not a message, or whose chunk
    reference names a blob that is not a list of message references, is damage of that blob."""
    root, spans = recorded
    shutil.copytree(root, tmp_path / "store")
    store = LocalStore(tmp_path / "store")
    bad = store.put_json({"not": "a message"} if planted == "message" else [user("inline")])
    ref = ITEM_REF if planted == "message" else CHUNK_REF
    base = store.put_json({"messages": [user("first"), {ref: bad}]})
    old = str(spans[0].attributes[names.RUN_BASE])
    view, verdict = _verdicts(_pointed(spans, old, base), tmp_path / "store")[1]
    assert verdict.status == "damaged"
    assert (view.damaged[0].address, view.damaged[0].kind) == (bad, planted)
    assert verdict.field == "messages"


def test_a_later_whole_value_write_clears_what_a_damaged_payload_tainted(
    tmp_path: Path,
) -> None:
    """A damaged payload of one key taints the epochs after it only until an intact `set` of that
    key: the model set again at epoch 3 frees epochs 3 and 4 of epoch 1's damaged model."""
    root = tmp_path / "store"
    with recorder(LocalStore(root), content="store") as rec, run("r"):
        history = [user("q")]
        for turn in range(4):
            rec.chat(history, model="gpt-4o-mini" if turn < 2 else "gpt-4o")
            history = [*history, assistant(f"a{turn}"), user(f"q{turn}")]
        spans = rec.records()
    model = next(
        str(e.attributes[names.COMMIT_REF])
        for e in spans[0].events
        if e.attributes[names.COMMIT_KEY] == "model"
    )
    _overwrite(root, model, b'"gpt-5"')
    found = _verdicts(spans, root)
    assert [found[e][1].status.value for e in (1, 2, 3, 4)] == [
        "damaged",
        "damaged",
        "verified",
        "verified",
    ]
    assert found[2][1].field == "model"


def test_an_absent_blob_stays_a_named_gap(
    recorded: tuple[Path, tuple[SpanRecord, ...]], tmp_path: Path
) -> None:
    """A base or payload the store does not hold is a gap (no-fold-base, no-run-log), never damage:
    the calls are reconstructed."""
    root, spans = recorded
    kinds = _kinds(LocalStore(root), spans)
    for address, (kind, epochs) in kinds.items():
        if kind not in ("base", "payload"):
            continue
        shutil.copytree(root, tmp_path / "copy")
        _blob_path(tmp_path / "copy", address).unlink()
        found = _verdicts(spans, tmp_path / "copy")
        gap = "no-fold-base" if kind == "base" else "no-run-log"
        for at in _after(epochs):
            view, verdict = found[at]
            assert view.damaged == ()
            assert gap in view.gap_kinds
            assert verdict.status == "reconstructed", verdict
        shutil.rmtree(tmp_path / "copy")


def test_a_store_that_cannot_read_a_blob_raises_naming_it(
    recorded: tuple[Path, tuple[SpanRecord, ...]], tmp_path: Path
) -> None:
    """A blob path that is not a regular file is neither absent nor damaged: the store's error is
    raised, naming the blob."""
    root, spans = recorded
    shutil.copytree(root, tmp_path / "store")
    address = str(spans[0].attributes[names.RUN_BASE])
    path = _blob_path(tmp_path / "store", address)
    path.unlink()
    path.mkdir()
    with pytest.raises(StoreError, match=address):
        served_views(spans, store=LocalStore(tmp_path / "store"))
