"""``af-otel serve --phoenix``, live: an agent's spans, enriched by af_otel, go over OTLP/HTTP to
a real Phoenix server; a real ``af-otel serve`` process fetches each trace from Phoenix's span API
when headless Chromium opens the link a trace UI would give, and the page shows the verdict, the
gaps and the messages."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SynchronousMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel.errors import SourceError
from af_otel.processor import ReceiptSpanProcessor, run
from af_otel.reader.sources import PhoenixSource, read_spans
from af_otel.reader.verify import Verdict, verify
from af_otel.reader.view import ServedView, served_views
from af_otel.store import LocalStore
from af_otel.web.app import epoch_path, span_path
from tests.backends.phoenix import running_phoenix
from tests.reader.recordings import Recorder, agent, user
from tests.web.browser import dom, parsed, pixels, screenshot
from tests.web.server import running_serve

pytestmark = pytest.mark.slow

PROJECT = "af-serve"
RUN = "phoenix-served"


@dataclass(frozen=True, slots=True)
class Live:
    serve: str
    views: tuple[ServedView, ...]
    verdicts: tuple[Verdict, ...]

    def view(self, run_id: str, epoch: int) -> ServedView:
        return next(v for v in self.views if v.run_id == run_id and v.epoch == epoch)


def _record(phoenix: str, store: LocalStore) -> tuple[ServedView, ...]:
    """Three epochs inside one agent trace, and a call without content in its own trace, sent to
    Phoenix (and kept in memory for the expectations)."""
    memory = InMemorySpanExporter()
    fan_out = SynchronousMultiSpanProcessor()
    fan_out.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces", timeout=30))
    )
    fan_out.add_span_processor(SimpleSpanProcessor(memory))
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": "serve-live", "openinference.project.name": PROJECT}
        )
    )
    provider.add_span_processor(ReceiptSpanProcessor(fan_out, store=store))
    recorder = Recorder(store, provider=provider)
    try:
        with recorder.tracer.start_as_current_span("agent turn"):
            agent(recorder, RUN, 3, base={"messages": [user("earlier <b>turn</b>")]})
        with run("blind-phoenix"):
            recorder.blind_chat()
    finally:
        recorder.close()
    return served_views(tuple(read_spans(memory)), store=store)


def _wait_for(phoenix: str, views: tuple[ServedView, ...]) -> None:
    """Phoenix stores what it receives in the background: wait until each trace is readable."""
    source = PhoenixSource(phoenix, PROJECT)
    wanted = {v.trace_id: sum(1 for w in views if w.trace_id == v.trace_id) for v in views}
    deadline = time.monotonic() + 90
    for trace_id, count in wanted.items():
        while True:
            try:
                found = [r for r in source.trace(trace_id) if r.span_id]
                llm = [r for r in found if any(v.span_id == r.span_id for v in views)]
                if len(llm) >= count:
                    break
            except SourceError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"Phoenix never returned trace {trace_id}")
            time.sleep(0.5)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    folder = tmp_path_factory.mktemp("serve-phoenix")
    store_path = folder / "store"
    store = LocalStore(store_path)
    with running_phoenix(folder) as phoenix:
        views = _record(phoenix, store)
        _wait_for(phoenix, views)
        arguments = ["--phoenix", phoenix, "--project", PROJECT, "--store", str(store_path)]
        with running_serve(arguments, folder) as base:
            yield Live(base, views, tuple(verify(v) for v in views))


def test_a_span_link_opens_its_evidence_from_phoenix(live: Live, tmp_path: Path) -> None:
    """Epoch 2's span, fetched from Phoenix on the click: verified, its digest, its gaps, the
    messages it added, and the earlier turn's markup as text."""
    view = live.view(RUN, 2)
    text = dom(tmp_path, live.serve + span_path(view.trace_id, view.span_id))
    page = parsed(text)
    assert page.values("data-verdict")[0] == "verified"
    assert view.receipt.digest in text  # type: ignore[union-attr]
    assert set(page.values("data-gap")) == set(view.gap_kinds)
    assert text.count('class="msg"') == 4
    assert "Read from http://127.0.0.1:" in text
    assert "<b>turn</b>" not in text


def test_every_epoch_of_the_run_links_from_the_page(live: Live, tmp_path: Path) -> None:
    """The run's epochs as Jaeger would link them, each with the verdict verify gives in
    process."""
    for view, verdict in zip(live.views, live.verdicts, strict=True):
        if view.run_id != RUN:
            continue
        text = dom(tmp_path, live.serve + epoch_path(RUN, view.epoch, view.trace_id))
        assert parsed(text).values("data-verdict")[0] == verdict.status.value == "verified"


def test_a_call_without_content_shows_why(live: Live, tmp_path: Path) -> None:
    view = live.view("blind-phoenix", 1)
    page = parsed(dom(tmp_path, live.serve + span_path(view.trace_id, view.span_id)))
    assert page.values("data-verdict")[0] == "reconstructed"
    assert "no-receipt-on-chart" in page.values("data-gap")


def test_an_unknown_trace_is_a_page(live: Live, tmp_path: Path) -> None:
    text = dom(tmp_path, live.serve + span_path("ab" * 16, "cd" * 8))
    assert "Nothing to show" in text
    assert "has no trace" in text


def test_the_phoenix_page_paints(live: Live, tmp_path: Path) -> None:
    view = live.view(RUN, 3)
    shot = screenshot(tmp_path, live.serve + span_path(view.trace_id, view.span_id), "phoenix.png")
    assert len(pixels(shot.read_bytes())) > 20
