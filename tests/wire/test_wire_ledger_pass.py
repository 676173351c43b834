"""A call minted from the wire makes no pass of the field ledger (`ledger.unrecorded`): the body
holds every field and the pass's answer was thrown away. A call that falls back to its record
makes it once, and every call's gaps and ledger are those of the pass made up front. Real SDK
spans, the processor, a real httpx client, the tap (the call of `test_wire_unrecorded`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from af_otel import names
from af_otel.processor import engine as engine_module
from af_otel.semconv import call as call_module
from af_otel.semconv import ledger
from tests.wire.test_wire_unrecorded import _said


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the ledger passes made (the real function runs)."""
    made: list[str] = []
    real = ledger.unrecorded

    def counted(*args: Any, **kwargs: Any) -> tuple[str, ...]:
        made.append("ledger")
        return real(*args, **kwargs)

    monkeypatch.setattr(ledger, "unrecorded", counted)
    return made


def test_a_wire_call_makes_no_ledger_pass(tmp_path: Path, passes: list[str]) -> None:
    """Minted from the body: the ledger is not asked, and no field is named unrecorded."""
    said = _said(tmp_path, wire=True)
    assert said[names.RECEIPT_SOURCE] == names.SOURCE_WIRE
    assert passes == []
    assert not said[names.RECEIPT_UNRECORDED]


@pytest.mark.parametrize("wire", [True, False], ids=["tap-on-unseen", "tap-off"])
def test_a_call_minted_from_its_record_makes_the_pass_once(
    tmp_path: Path, passes: list[str], wire: bool
) -> None:
    """With the tap on but the body unseen, or the tap off: the ledger is asked once."""
    said = _said(tmp_path, wire=wire, sent=not wire)
    assert said[names.RECEIPT_SOURCE] == names.SOURCE_INSTRUMENTATION
    assert passes == ["ledger"]


@pytest.mark.parametrize(
    ("wire", "sent"),
    [(True, True), (True, False), (False, True)],
    ids=["wire", "tap-on-unseen", "tap-off"],
)
def test_the_gaps_are_those_of_the_pass_made_up_front(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: bool, sent: bool
) -> None:
    """Read as now and as before (every record pass made up front, ``held=True``): the same
    source, ledger, gaps, held history and record differences, on a wire call and on a call
    minted from its instrumentation's record."""
    now = _said(tmp_path / "now", wire=wire, sent=sent)

    def up_front(*args: Any, **kwargs: Any) -> Any:
        return call_module.read_call(*args, **(kwargs | {"held": True}))

    monkeypatch.setattr(engine_module, "read_call", up_front)
    before = _said(tmp_path / "before", wire=wire, sent=sent)
    assert now == before
    assert now[names.GAPS]
