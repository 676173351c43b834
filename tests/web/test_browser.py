"""``af-otel serve`` as a person meets it: a real Uvicorn process on a free loopback port, opened
by headless Chromium at the address a trace UI links to. The page after load shows the verdict,
the receipt, the gaps and the messages; markup in a prompt stays text; the screenshot is not
blank."""

from __future__ import annotations

from pathlib import Path

import pytest

from af_otel.web.app import epoch_path, span_path
from tests.web.browser import dom, parsed, pixels, screenshot
from tests.web.recorded import RUN, Recorded, record
from tests.web.server import running_serve


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return record(tmp_path_factory.mktemp("browser"))


@pytest.fixture(scope="module")
def server(recorded: Recorded, tmp_path_factory: pytest.TempPathFactory) -> object:
    folder = tmp_path_factory.mktemp("serve")
    with running_serve([str(recorded.traces), "--store", str(recorded.store)], folder) as base:
        yield base


def test_a_span_link_opens_its_evidence_in_chromium(
    server: str, recorded: Recorded, tmp_path: Path
) -> None:
    """Grafana's link for epoch 2's span: the DOM holds the verified badge, the digest, each
    gap of the epoch, the messages it added, and the prompt as text."""
    view = recorded.view(RUN, 2)
    text = dom(tmp_path, server + span_path(view.trace_id, view.span_id))
    page = parsed(text)
    assert f"<title>Run {RUN} · epoch 2</title>" in text
    assert page.values("data-verdict")[0] == "verified"
    assert view.receipt.digest in text  # type: ignore[union-attr]
    assert set(page.values("data-gap")) == set(view.gap_kinds)
    assert page.values("data-epoch") == ["2"]
    assert text.count('class="msg"') == 4
    assert "<script" not in text
    assert len(page.values("id")) == len(set(page.values("id")))


def test_a_call_without_receipt_shows_why(server: str, tmp_path: Path) -> None:
    """Jaeger's af.run.id link for the uncaptured call: reconstructed, with the gap and its
    cause."""
    text = dom(tmp_path, server + epoch_path("blind", 1))
    page = parsed(text)
    assert page.values("data-verdict")[0] == "reconstructed"
    assert "no-receipt-on-chart" in page.values("data-gap")
    assert "no-receipt-committed" in page.values("data-cause")


def test_an_unknown_span_is_a_page_in_chromium(server: str, tmp_path: Path) -> None:
    text = dom(tmp_path, server + span_path("0" * 31 + "1", "0" * 15 + "1"))
    assert "Nothing to show" in text
    assert "data-notice" in text


def test_the_screenshot_is_not_blank(server: str, recorded: Recorded, tmp_path: Path) -> None:
    """The painted page holds text and the badge colours, not one flat background."""
    view = recorded.view(RUN, 2)
    shot = screenshot(tmp_path, server + span_path(view.trace_id, view.span_id), size="1200,1600")
    assert len(pixels(shot.read_bytes())) > 20
