"""`referenced_blobs`: the store addresses a real recording refers to are exactly the blobs its
writer stored; an address that is not one is left out."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from af_otel import names
from af_otel.processor import run
from af_otel.reader.blobs import referenced_blobs
from af_otel.reader.records import freeze_attributes
from af_otel.reader.sources import read_spans
from af_otel.store import LocalStore
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
    assert set(found) == stored
    assert len(stored) >= 2
    edited = [
        dataclasses.replace(
            s, attributes=freeze_attributes({**s.attributes, names.RUN_BASE: "sha256:../../etc"})
        )
        for s in spans
    ]
    assert set(referenced_blobs(edited)) < stored
