"""The Source seam: a trace file, Tempo, Jaeger and Phoenix each answer an ask through `read`,
with the same records as their own methods, name themselves, and refuse what they cannot answer
before reading anything."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlencode

import pytest

from af_otel.errors import ReaderError, SourceError
from af_otel.reader.sources import (
    AllSpans,
    Ask,
    FileSource,
    InWindow,
    JaegerSource,
    OneTrace,
    PhoenixSource,
    Source,
    TempoSource,
    Window,
    read_spans,
)
from af_otel.reader.sources.tempo import DEFAULT_QUERY
from af_otel.store import LocalStore
from tests.reader.recordings import agent, file_recorder

from . import replay
from .helpers import by_id, serve

WINDOW = Window(1_000_000_000, 2_000_000_000)
# Nothing listens here: a source that refused an ask never reached for the network.
NOWHERE = "http://127.0.0.1:9"


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    path = tmp_path / "traces.jsonl"
    with file_recorder(path, LocalStore(tmp_path / "store")) as rec:
        agent(rec, "source-run", 2)
    return path


def test_a_trace_file_reads_whole_as_read_spans_does(traces: Path) -> None:
    """FileSource answers AllSpans with the records read_spans gives, from the same place."""
    source: Source = FileSource(str(traces))
    stream = source.read(AllSpans())
    assert by_id(stream) == by_id(read_spans(traces))
    assert stream.source == str(traces)
    assert source.label == f"the trace file {traces}"


@pytest.mark.parametrize("ask", [OneTrace("ab"), InWindow(WINDOW)])
def test_a_trace_file_refuses_a_trace_or_a_window(traces: Path, ask: Ask) -> None:
    """A file is read whole: asked for one trace or a window it says so, naming itself."""
    with pytest.raises(ReaderError, match=r"the trace file .* reads every span it holds, not "):
        FileSource(str(traces)).read(ask)


@pytest.mark.parametrize(
    ("source", "ask", "label"),
    [
        (TempoSource(NOWHERE), AllSpans(), "Tempo at http://127.0.0.1:9"),
        (JaegerSource(NOWHERE), AllSpans(), "Jaeger at http://127.0.0.1:9"),
        (
            PhoenixSource(NOWHERE, project="p"),
            AllSpans(),
            "Phoenix at http://127.0.0.1:9 (project p)",
        ),
        (PhoenixSource(NOWHERE), InWindow(WINDOW, search="x"), "Phoenix at http://127.0.0.1:9"),
    ],
)
def test_a_backend_refuses_what_it_cannot_answer_before_fetching(
    source: Source, ask: Ask, label: str
) -> None:
    """A backend asked for every span (or Phoenix for a search it has not) raises ReaderError
    naming itself and the ask, without a request (nothing listens at its URL)."""
    assert source.label.startswith(label)
    with pytest.raises(ReaderError) as raised:
        source.read(ask)
    assert str(raised.value).startswith(label)
    assert str(ask) in str(raised.value)


def test_tempo_answers_a_trace_and_a_window_as_its_own_methods(traces: Path) -> None:
    """OneTrace is `trace`; InWindow is `window` with its search as TraceQL (default af_otel's)
    and its limit."""
    docs = replay.by_trace(replay.export_lines(traces))
    routes = {"/api/search": (200, json.dumps(replay.tempo_search(docs)).encode())}
    for trace_id, doc in docs.items():
        routes[f"/api/v2/traces/{trace_id}"] = (200, json.dumps(replay.tempo_v2(doc)).encode())
    seen: list[dict[str, str]] = []
    first = next(iter(docs))
    with serve(routes, seen) as url:
        source = TempoSource(url)
        assert by_id(source.read(OneTrace(first))) == by_id(source.trace(first))
        assert by_id(source.read(InWindow(WINDOW))) == by_id(read_spans(traces))
        source.read(InWindow(WINDOW, search='{ span.x = "y" }', limit=7))
    searches = [s[":path"] for s in seen if s[":path"].startswith("/api/search")]
    assert "q=" + _quoted(DEFAULT_QUERY) in searches[0]
    assert "q=" + _quoted('{ span.x = "y" }') in searches[1]
    assert "limit=7" in searches[1]


def test_jaeger_searches_the_service_an_ask_names_and_needs_one(traces: Path) -> None:
    """Jaeger's window search is by service: the ask's search; without one it is refused."""
    body = json.dumps(replay.jaeger_v3(replay.merged(replay.export_lines(traces)))).encode()
    seen: list[dict[str, str]] = []
    with serve({"/api/v3/traces": (200, body)}, seen) as url:
        source = JaegerSource(url)
        records = by_id(source.read(InWindow(WINDOW, search="svc", limit=3)))
        with pytest.raises(SourceError, match="needs a service name"):
            source.read(InWindow(WINDOW))
    assert records == by_id(read_spans(traces))
    assert "query.service_name=svc" in seen[0][":path"]
    assert "query.num_traces=3" in seen[0][":path"]


def _quoted(text: str) -> str:
    return urlencode({"q": text}).removeprefix("q=")
