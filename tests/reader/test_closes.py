"""How a run ends on the record: a run whose close record names only calls on record is closed, one
whose last calls were deleted from the exported file is cut at the end (named on its last call on
record), one with no close record is open (verdicts unchanged), and a close record whose digest
lies makes that call damaged."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from af_otel import names
from af_otel.cli import main
from af_otel.reader.closes import run_end
from af_otel.reader.sources import read_spans
from af_otel.reader.verify import verify
from af_otel.reader.view import ServedView, served_views
from af_otel.store import LocalStore
from tests.reader.recordings import agent, file_recorder, user


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, Path]:
    """OTLP JSON lines of a 4-turn run made with af_otel.run, and a call outside any run block."""
    traces, store = tmp_path / "traces.jsonl", tmp_path / "store"
    with file_recorder(traces, LocalStore(store)) as rec:
        agent(rec, "closed-run", 4)
        rec.chat([user("no run block")])
    return traces, store


def _spans(document: dict[str, Any]) -> Iterator[tuple[list[dict[str, Any]], dict[str, Any]]]:
    for resource in document.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in list(scope.get("spans", [])):
                yield scope["spans"], span


def _attribute(span: dict[str, Any], key: str) -> Any:
    found = next((a["value"] for a in span.get("attributes", []) if a["key"] == key), None)
    return None if found is None else next(iter(found.values()))


def _edit(traces: Path, edit: Callable[[list[dict[str, Any]], dict[str, Any]], None]) -> None:
    lines = [json.loads(line) for line in traces.read_text(encoding="utf-8").splitlines()]
    for document in lines:
        for siblings, span in _spans(document):
            edit(siblings, span)
    traces.write_text("\n".join(json.dumps(d) for d in lines) + "\n", encoding="utf-8")


def _views(traces: Path, store: Path) -> dict[tuple[str | None, int], ServedView]:
    views = served_views(read_spans(traces), store=LocalStore(store))
    return {(v.run_id, v.epoch): v for v in views}


def _verify(traces: Path, store: Path) -> tuple[int, str]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["verify", str(traces), "--store", str(store)])
    return code, printed.getvalue()


def test_a_run_whose_close_record_names_calls_on_record_is_closed(
    recorded: tuple[Path, Path],
) -> None:
    """Every view of the run says closed, naming the lane's last epoch; the close record is no
    call; the verdicts are verified, and verify prints the run as closed."""
    traces, store = recorded
    views = _views(traces, store)
    ours = [v for (run, _), v in views.items() if run == "closed-run"]
    assert [v.epoch for v in ours] == [1, 2, 3, 4]
    assert {v.run_end.state for v in ours if v.run_end is not None} == {"closed"}
    assert ours[0].run_end is ours[3].run_end
    assert ours[3].closed_with == (ours[3].receipt.digest if ours[3].receipt else None)
    assert {verify(v).status.value for v in ours} == {"verified"}
    code, out = _verify(traces, store)
    assert code == 0
    assert "run closed-run: closed — its last call(s) on record: epoch 4 of lane" in out


def test_a_run_with_no_close_record_is_open_and_keeps_its_verdicts(
    recorded: tuple[Path, Path],
) -> None:
    """A call outside any run block (its trace's run) has no close record: open, not complete,
    and no gap on it; so is the run whose close record was deleted, verdicts unchanged."""
    traces, store = recorded
    before = {key: verify(v).status for key, v in _views(traces, store).items()}
    loose = next(v for (run, _), v in _views(traces, store).items() if run != "closed-run")
    assert loose.run_end is not None
    assert loose.run_end.state == "open"
    assert names.GAP_RUN_CUT_AT_END not in loose.gap_kinds

    def drop_close(siblings: list[dict[str, Any]], span: dict[str, Any]) -> None:
        if span["name"] == names.RUN_CLOSE:
            siblings.remove(span)

    _edit(traces, drop_close)
    views = _views(traces, store)
    assert {v.run_end.state for v in views.values() if v.run_end is not None} == {"open"}
    assert {key: verify(v).status for key, v in views.items()} == before
    code, out = _verify(traces, store)
    assert code == 0
    assert "run closed-run: open — no close record (af.run.close)" in out


@pytest.mark.parametrize("cut", [1, 2])
def test_a_run_cut_at_the_end_is_named(recorded: tuple[Path, Path], cut: int) -> None:
    """With the last ``cut`` calls deleted from the exported file, the run reads cut: its last
    call on record carries run-cut-at-end naming the missing epoch, and is never verified; the
    calls before it still are."""
    traces, store = recorded
    last = 4 - cut

    def drop_the_end(siblings: list[dict[str, Any]], span: dict[str, Any]) -> None:
        epoch = _attribute(span, names.EPOCH)
        if _attribute(span, names.RUN_ID) == "closed-run" and epoch and int(epoch) > last:
            siblings.remove(span)

    _edit(traces, drop_the_end)
    views = _views(traces, store)
    ours = {epoch: v for (run, epoch), v in views.items() if run == "closed-run"}
    assert sorted(ours) == list(range(1, last + 1))
    end = ours[last].run_end
    assert end is not None
    assert end.state == "cut"
    assert [epoch for _, epoch in end.missing] == [4]
    found = ours[last].gap(names.GAP_RUN_CUT_AT_END)
    assert found is not None
    assert "epoch 4" in found.detail
    assert f"epoch {last}" in found.detail
    assert verify(ours[last]).status == "reconstructed"
    assert all(verify(ours[e]).status == "verified" for e in range(1, last))
    code, out = _verify(traces, store)
    assert code == 0
    assert "run closed-run: cut — cut at the end" in out


def test_a_close_record_that_lies_about_the_digest_is_damage(recorded: tuple[Path, Path]) -> None:
    """A close record whose digest for the lane's last call is not the one on that call's span
    makes that call damaged at field digest; verify exits 1."""
    traces, store = recorded

    def lie(siblings: list[dict[str, Any]], span: dict[str, Any]) -> None:
        for item in span.get("attributes", []):
            if span["name"] == names.RUN_CLOSE and item["key"] == names.RUN_CLOSE_DIGESTS:
                item["value"]["arrayValue"]["values"][0]["stringValue"] = "0" * 16

    _edit(traces, lie)
    views = _views(traces, store)
    verdict = verify(views[("closed-run", 4)])
    assert (verdict.status.value, verdict.field) == ("damaged", "digest")
    assert "0" * 16 in verdict.reason
    assert verify(views[("closed-run", 3)]).status == "verified"
    code, out = _verify(traces, store)
    assert code == 1
    assert "closed-run epoch 4: damaged" in out


def test_a_lane_no_close_record_names_leaves_the_run_open() -> None:
    """Closed needs every lane on record named; a close record that does not parse names none."""
    assert run_end("r", [("a", 1), ("b", 1)], [{("a", 1): "d"}]).state == "open"
    assert run_end("r", [("a", 1)], [None]).state == "open"
    assert run_end("r", [("a", 1)], [{("a", 1): "d"}]).state == "closed"
    cut = run_end("r", [("a", 1)], [{("a", 1): "d", ("b", 2): "e"}])
    assert (cut.state, cut.missing, cut.marked) == ("cut", (("b", 2),), (("a", 1),))
