"""docs/instrumentations.md's "Agent stacks" table is the field ledger's `STACKS` entries: one row
each, naming the scope, the convention, exactly the fields it records and the ones it lacks."""

from __future__ import annotations

from pathlib import Path

from af_otel.model import fields
from af_otel.semconv import ledger

DOCS = Path(__file__).resolve().parents[2] / "docs" / "instrumentations.md"


def row(entry: ledger.Entry) -> str:
    """The table row of ``entry``: the recorded fields in the ledger's own order."""
    recorded = ", ".join(f"`{name}`" for name in fields.FIELDS if name in entry.recorded)
    marked = ", ".join(f"`{name}` (if absent)" for name, _ in entry.marked)
    lacks = ", ".join(f"`{name}`" for name, _ in entry.lacks) or "—"
    cells = [
        f"`{entry.label}`",
        ", ".join(f"`{s}`" for s in entry.scopes),
        ", ".join(f"`{c}`" for c in entry.conventions),
        recorded + (f"; {marked}" if marked else ""),
        lacks,
        entry.versions,
    ]
    return "| " + " | ".join(cells) + " |"


def test_the_stacks_table_is_the_ledger() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for entry in ledger.STACKS:
        assert row(entry) in text, row(entry)


def test_every_stack_entry_is_found_by_its_scope() -> None:
    for entry in ledger.STACKS:
        for scope in entry.scopes:
            assert ledger.entry_for(scope, entry.conventions[0]) is entry
