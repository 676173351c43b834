"""Phoenix live: spans enriched by af_otel go to a real Phoenix over OTLP/HTTP and come back
through ``PhoenixSource`` verifying exactly as the spans that never left the process."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SynchronousMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel.cli import main
from af_otel.errors import SourceError, TraceNotFoundError
from af_otel.processor import ReceiptSpanProcessor, run
from af_otel.reader.records import SpanRecord
from af_otel.reader.sources import PhoenixSource, SourceFormat, Window, read_spans
from af_otel.reader.verify import verify
from af_otel.reader.view import served_views
from af_otel.store import LocalStore
from tests.reader.recordings import Recorder, agent, user

from .phoenix import phoenix_url

__all__ = ["phoenix_url"]  # the session fixture, used by name below

pytestmark = pytest.mark.slow


class Sent:
    """One project's recording: what af_otel kept in memory, and the store."""

    def __init__(self, project: str, local: tuple[SpanRecord, ...], store: LocalStore) -> None:
        self.project = project
        self.local = local
        self.store = store


def _send(base_url: str, project: str, store: LocalStore) -> tuple[SpanRecord, ...]:
    """Record an agent and a call without content through the real OTLP/HTTP exporter to
    Phoenix (and an in-memory copy); return the in-memory records."""
    memory = InMemorySpanExporter()
    fan_out = SynchronousMultiSpanProcessor()
    fan_out.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{base_url}/v1/traces", timeout=30))
    )
    fan_out.add_span_processor(SimpleSpanProcessor(memory))
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": "phoenix-live", "openinference.project.name": project}
        )
    )
    provider.add_span_processor(ReceiptSpanProcessor(fan_out, store=store))
    recorder = Recorder(store, provider=provider)
    try:
        agent(recorder, "phoenix-run", 4, base={"messages": [user("earlier <b>turn</b>")]})
        with run("blind-run"):
            recorder.blind_chat(model="gpt-4o")
    finally:
        recorder.close()
    return tuple(read_spans(memory))


def _read_until(source: PhoenixSource, window: Window, count: int) -> tuple[SpanRecord, ...]:
    # Phoenix writes what it receives in the background: the project and its spans show up
    # shortly after the export returns.
    deadline = time.monotonic() + 60
    while True:
        try:
            records = tuple(source.window(window))
        except SourceError:
            if time.monotonic() > deadline:
                raise
            records = ()
        if len(records) >= count or time.monotonic() > deadline:
            return records
        time.sleep(0.5)


@pytest.fixture(scope="module")
def sent(phoenix_url: str, tmp_path_factory: pytest.TempPathFactory) -> Sent:
    store = LocalStore(tmp_path_factory.mktemp("phoenix-store"))
    local = _send(phoenix_url, "af-live", store)
    return Sent("af-live", local, store)


def _verdicts(records: tuple[SpanRecord, ...], store: LocalStore) -> dict[tuple[str, int], str]:
    return {
        (view.run_id or "", view.epoch): verify(view).status.value
        for view in served_views(records, store=store)
    }


def test_read_back_from_phoenix_verifies_epoch_for_epoch(phoenix_url: str, sent: Sent) -> None:
    """Every epoch read from Phoenix gets the verdict the in-process spans get; receipts verify."""
    window = Window.since("1h")
    remote = _read_until(PhoenixSource(phoenix_url, sent.project), window, len(sent.local))
    assert len(remote) == len(sent.local)
    expected = _verdicts(sent.local, sent.store)
    assert _verdicts(remote, sent.store) == expected
    assert [s for (run_id, _), s in sorted(expected.items()) if run_id == "phoenix-run"] == [
        "verified"
    ] * 4
    # What Phoenix keeps of each span: ids, names, attributes and events exactly; it adds its
    # own OpenInference reading of GenAI attributes next to them.
    local = {(r.trace_id, r.span_id): r for r in sent.local}
    for record in remote:
        mine = local[(record.trace_id, record.span_id)]
        assert record.parent_span_id == mine.parent_span_id
        assert record.name == mine.name
        assert {k: record.attributes.get(k) for k in mine.attributes} == dict(mine.attributes)
        added = set(record.attributes) - set(mine.attributes)
        assert all(k.startswith(("llm.", "openinference.")) for k in added), added
        assert [(e.name, dict(e.attributes)) for e in record.events] == [
            (e.name, dict(e.attributes)) for e in mine.events
        ]


def test_pages_and_one_trace(phoenix_url: str, sent: Sent) -> None:
    """Small pages follow Phoenix's cursor to the end; one trace is fetched by its id."""
    window = Window.since("1h")
    paged = _read_until(PhoenixSource(phoenix_url, sent.project, page_size=2), window, 5)
    assert sorted(r.span_id for r in paged) == sorted(r.span_id for r in sent.local)
    chosen = sent.local[1]
    stream = PhoenixSource(phoenix_url, sent.project).trace(chosen.trace_id.upper())
    records = list(stream)
    assert stream.format is SourceFormat.PHOENIX
    assert [r.span_id for r in records] == [
        r.span_id for r in sent.local if r.trace_id == chosen.trace_id
    ]


def test_an_unknown_project_or_trace_is_named(phoenix_url: str, sent: Sent) -> None:
    """A wrong project name and an id Phoenix does not hold raise SourceErrors naming them."""
    with pytest.raises(SourceError, match=r"no project 'nope'.*\(HTTP 404\)"):
        PhoenixSource(phoenix_url, "nope").window(Window.since("1h"))
    with pytest.raises(TraceNotFoundError, match=r"trace not found \(no spans in 'af-live'\)"):
        PhoenixSource(phoenix_url, sent.project).trace("1" * 32)


def test_the_cli_verifies_a_phoenix_window(
    phoenix_url: str, sent: Sent, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """af-otel verify --phoenix URL --project P --since 1h verifies what af_otel recorded."""
    _read_until(PhoenixSource(phoenix_url, sent.project), Window.since("1h"), len(sent.local))
    argv = ["verify", "--phoenix", phoenix_url, "--project", sent.project, "--since", "1h"]
    code = main([*argv, "--store", str(sent.store.root)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "phoenix-run epoch 4: verified" in out
    assert "4 verified" in out
