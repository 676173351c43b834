"""The one gap table: each kind once, its rank its place, and every side listing kinds in it."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from af_otel.model import gap_kinds
from af_otel.model.gap_kinds import GAP_ORDER, GAP_RANK, SERVED_GAPS, in_order

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_each_row_is_one_kind_and_its_rank_is_its_place() -> None:
    """No kind has two rows (a second would silently replace the first), and rank = place."""
    rows = gap_kinds._ROWS
    assert len({row.kind for row in rows}) == len(rows) == len(SERVED_GAPS)
    assert [row.rank for row in rows] == list(range(len(rows)))
    assert tuple(row.kind for row in rows) == GAP_ORDER
    assert all(GAP_RANK[row.kind] == row.rank for row in rows)


@given(st.lists(st.sampled_from([*GAP_ORDER, "made-up"]), max_size=20))
def test_in_order_lists_known_kinds_once_by_rank(kinds: list[str]) -> None:
    """in_order keeps the table's kinds among those given, once each, most suspicious first."""
    ordered = in_order(kinds)
    assert ordered == sorted(set(kinds) - {"made-up"}, key=GAP_RANK.__getitem__)


def test_the_docs_table_lists_the_kinds_in_rank_order() -> None:
    """docs/reader.md's catalogue table has one row per kind, in the table's order."""
    text = (DOCS / "reader.md").read_text(encoding="utf-8")
    listed = [
        line.split("`")[1]
        for line in text.splitlines()
        if line.startswith("| `") and line.split("`")[1] in SERVED_GAPS
    ]
    assert listed == list(GAP_ORDER)
