"""Evidence integrity: each deliberate tamper of a real exported trace is reported as damaged at the
right epoch, field and message, or as the exact gap that excuses it, every time, while every
untouched epoch before it and the other run still verify."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from af_otel.reader.sources import read_spans
from af_otel.reader.verify import Verdict, verify
from af_otel.reader.view import ServedView, served_views
from af_otel.store import LocalStore

from .generator import EPOCHS, RUN_A, RUN_B, Case, cases, dump, load, record

CASES = cases()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return record(tmp_path_factory.mktemp("recorded"))


def _verdicts(trace: Path, store: Path) -> dict[tuple[str | None, int], tuple[ServedView, Verdict]]:
    return {
        (view.run_id, view.epoch): (view, verify(view))
        for view in served_views(read_spans(str(trace)), store=LocalStore(store))
    }


def test_untampered_trace_verifies(recorded: tuple[Path, Path]) -> None:
    """The control: every epoch of both recorded runs verifies."""
    found = _verdicts(*recorded)
    assert sorted(found) == [(run, e) for run in (RUN_A, RUN_B) for e in range(1, EPOCHS + 1)]
    assert {str(v.status) for _, v in found.values()} == {"verified"}


def test_corpus_covers_every_tamper() -> None:
    """The corpus holds each kind of tamper the issue lists."""
    kinds = {
        case.name.rsplit("-e", 1)[0] if case.name[-1].isdigit() else case.name for case in CASES
    }
    for kind in (
        "edit-message",
        "reorder-commits",
        "drop-event",
        "swap-receipts",
        "replace-base",
        "truncate-2048",
        "replay-from-other-run",
    ):
        assert any(k.startswith(kind) for k in kinds), kind


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_tamper_is_reported(case: Case, recorded: tuple[Path, Path], tmp_path: Path) -> None:
    """The tampered epoch gets the expected verdict, field, message index or gap; earlier epochs and
    the other run still verify."""
    trace, store = recorded
    shutil.copytree(store, tmp_path / "store")
    lines = load(trace)
    case.apply(lines, tmp_path / "store")
    found = _verdicts(dump(lines, tmp_path / "trace.jsonl"), tmp_path / "store")
    view, verdict = found[(case.run, case.epoch)]
    assert str(verdict.status) == case.verdict, verdict
    if case.verdict == "damaged":
        assert case.field is not None
        assert verdict.field is not None
        assert verdict.field.startswith(case.field), verdict
        assert verdict.index == case.index, verdict
    else:
        assert case.gap in view.gap_kinds, view.gap_kinds
        assert verdict.mismatches == () or all(m.excused_by for m in verdict.mismatches)
    for (run, epoch), (_, other) in found.items():
        if run == case.run and epoch < case.epoch:
            assert str(other.status) == "verified", (epoch, other)
        if run != case.run:
            assert str(other.status) == "verified", (run, epoch, other)
