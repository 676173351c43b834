"""`referenced_blobs`: the store addresses a real recording names on its spans (run bases, commit
payloads), which the CLI checks a store against; every blob its writer stored is one of them or
is reached from them through stored message references; an address that is not one is left out."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from af_otel import names
from af_otel.processor import run
from af_otel.reader.blobs import referenced_blobs
from af_otel.reader.records import freeze_attributes
from af_otel.reader.sources import read_spans
from af_otel.store import LocalStore, Store
from af_otel.store.items import CHUNK_REF, ITEM_REF, is_item_ref
from tests.reader.recordings import agent, file_recorder, user


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
