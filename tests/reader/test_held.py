"""A call that continues a response the server holds shows the history the run's record proves:
the earlier calls it links response by response, oldest first, and where that record ends; it is
never verified, and the command line, the report and the served page print it."""

from __future__ import annotations

import io
import json
import tempfile
from collections.abc import Sequence
from typing import Any

from af_otel import names
from af_otel.present import render_epoch_page, render_report
from af_otel.present.terminal import print_view, view_json
from af_otel.reader.records import SpanRecord
from af_otel.reader.verify import VerdictStatus, verify
from af_otel.reader.view import HeldCall, ServedView, served_views
from af_otel.store import LocalStore

from .recordings import as_written, user, with_attributes
from .synthetic import synthetic_run

HELD = names.GAP_HELD_HISTORY


def result(call_id: str) -> dict[str, Any]:
    part = {"type": "tool_call_response", "id": call_id, "response": "sunny"}
    return {"role": "tool", "parts": [part]}


def responses_run(continues: Sequence[str | None]) -> list[ServedView]:
    """One call per entry, each answered ``resp_<epoch>``; an entry names the response the call
    continues (the writer's ``af.held_history``) or None for a call that continues nothing."""
    requests = [
        {"messages": [user("Weather in Lima?")] if held is None else [result(f"c{n}")]}
        for n, held in enumerate(continues, start=1)
    ]
    with tempfile.TemporaryDirectory() as directory:
        store = LocalStore(directory)
        spans = synthetic_run("run-h", requests, list(range(len(requests))), store=store)
        marked: list[SpanRecord] = []
        for span, held in zip(spans, continues, strict=True):
            epoch = span.attributes[names.EPOCH]
            changes: dict[str, Any] = {"gen_ai__response__id": f"resp_{epoch}"}
            if held is not None:
                changes |= {"af__gaps": (HELD,), "af__held_history": held}
            marked.append(with_attributes(span, **changes))
        return list(served_views(as_written(marked), store=store))


def test_a_continued_call_links_every_earlier_call_oldest_first() -> None:
    """Epoch 3 continues epoch 2's answer, which continued epoch 1's: both are held, in order,
    each with its request's size and facts as served there; the run holds it from its start."""
    views = responses_run([None, "resp_1", "resp_2"])
    third = views[2]
    assert [(h.epoch, h.response_id) for h in third.held] == [(1, "resp_1"), (2, "resp_2")]
    first, second = third.held
    assert first == HeldCall("resp_1", 1, 1, views[0].gap_kinds, minted=True)
    assert second.messages == 1
    assert HELD in second.gaps  # epoch 2's own request was held history too
    detail = third.gap(HELD)
    assert detail is not None
    assert "epochs 1, 2, in that order" in detail.detail, detail.detail
    assert "from its start" in detail.detail, detail.detail
    assert views[0].held == ()
    assert verify(third).status is VerdictStatus.RECONSTRUCTED
    assert third.gap(names.GAP_UNRECORDED_CALL) is None


def test_a_response_no_call_answered_ends_the_record_and_names_the_hole() -> None:
    """Epoch 1 continues a response no call of the run got: that is where the record ends, and
    the call that continues it directly carries unrecorded-call; the one after does not."""
    views = responses_run(["resp_gone", "resp_1"])
    assert views[0].held == (HeldCall("resp_gone"),)
    hole = views[0].gap(names.GAP_UNRECORDED_CALL)
    assert hole is not None
    assert "resp_gone" in hole.detail, hole.detail
    assert [(h.epoch, h.response_id) for h in views[1].held] == [(None, "resp_gone"), (1, "resp_1")]
    assert views[1].gap(names.GAP_UNRECORDED_CALL) is None
    detail = views[1].gap(HELD)
    assert detail is not None
    assert "before those, resp_gone is not in this run's record" in detail.detail, detail.detail


def test_a_telltale_links_nothing() -> None:
    """A call whose continued response is not recorded, only a tell-tale, holds no chain."""
    views = responses_run([None, "a tool result without its tool call"])
    assert views[1].held == ()
    detail = views[1].gap(HELD)
    assert detail is not None
    assert detail.detail.startswith("history not on record"), detail.detail
    assert views[1].gap(names.GAP_UNRECORDED_CALL) is None


def test_a_response_answered_in_a_loop_ends() -> None:
    """A corrupt record where a call continues its own answer shows it held once, then stops."""
    views = responses_run(["resp_1"])
    assert [h.epoch for h in views[0].held][-1] == 1
    assert len(views[0].held) <= 2


def test_served_prints_the_held_section_before_the_own_items() -> None:
    """`af-otel served` names each held request and answer, then this request's own items."""
    views = responses_run(["resp_gone", "resp_1"])
    out = io.StringIO()
    print_view(views[1], verify(views[1]), False, out)
    text = out.getvalue()
    assert "held by the server" in text, text
    assert "    resp_gone: not in this run's record\n" in text, text
    line = (
        "    epoch 1's request (1 message, as served there) and its answer resp_1 "
        "(answer not receipted); its gaps: "
    )
    assert line in text, text
    assert text.index("resp_gone:") < text.index("epoch 1's request")
    assert text.index("epoch 1's request") < text.index("messages (1), this request's own items")
    held = view_json(views[1], None)["held"]
    assert json.loads(json.dumps(held))[1] == {
        "response_id": "resp_1",
        "epoch": 1,
        "messages": 1,
        "gaps": list(views[0].gap_kinds),
        "minted": True,
    }


def test_a_call_that_holds_nothing_prints_no_held_section() -> None:
    views = responses_run([None])
    out = io.StringIO()
    print_view(views[0], verify(views[0]), False, out)
    assert "held by the server" not in out.getvalue()
    assert "own items" not in out.getvalue()


def test_the_report_lists_the_held_calls_linked_to_their_epochs() -> None:
    """The report (and the served page, drawn by the same code) lists the held calls in order,
    each linked to its epoch, escaped, before this request's own items."""
    views = responses_run([None, "resp_1", "resp_<2>"])
    verdicts = [verify(v) for v in views]
    page = render_report(views, verdicts)
    assert page.count('<ol class="held">') == 2
    second = page[page.index('data-epoch="2"') :]
    assert '<li data-held="1"><a href="#' in second, second[:2000]
    assert "resp_&lt;2&gt;: not in this run&#x27;s record" in page
    assert "<script>" not in page


def test_the_served_page_links_each_held_call_to_its_own_page() -> None:
    """`af-otel serve` draws one epoch a page: each held call links to its epoch's page."""
    views = responses_run([None, "resp_1", "resp_2"])
    page = render_epoch_page(
        views[2], verify(views[2]), href=lambda view: f"/runs/run-h/epochs/{view.epoch}"
    )
    assert '<a href="/runs/run-h/epochs/1">epoch 1&#x27;s request' in page, page
    assert '<a href="/runs/run-h/epochs/2">epoch 2&#x27;s request' in page, page
    assert page.index("epochs/1") < page.index("epochs/2")
