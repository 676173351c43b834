"""The ``af-otel serve`` application in process, over Starlette's test client: every route, its
pages drawn by the report's own epoch renderer, the per-trace cache, and each failure as a page
with its status (never a traceback, never the key)."""

from __future__ import annotations

import html
import socket
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from starlette.testclient import TestClient

from af_otel.present import render_report
from af_otel.reader.sources import (
    Ask,
    JaegerSource,
    OneTrace,
    SourceFormat,
    SpanStream,
    TempoSource,
    read_spans,
)
from af_otel.web import Evidence
from af_otel.web.app import create_app, epoch_path, span_path
from tests.reader.sources.helpers import serve

from .recorded import PROMPT, RUN, Recorded, record, tempo_v2_body


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "a" and found.get("href"):
            self.hrefs.append(found["href"] or "")
        if found.get("id"):
            self.ids.append(found["id"] or "")


def links(page: str) -> Links:
    parsed = Links()
    parsed.feed(page)
    return parsed


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return record(tmp_path_factory.mktemp("web"))


@pytest.fixture
def client(recorded: Recorded) -> Iterator[TestClient]:
    evidence = Evidence(file=recorded.traces, store=str(recorded.store))
    with TestClient(create_app(evidence), raise_server_exceptions=False) as made:
        yield made


def assert_no_traceback(page: str) -> None:
    assert "Traceback" not in page
    assert 'File "' not in page


# -- pages ---------------------------------------------------------------------------------


def test_each_span_page_shows_its_epoch_as_the_report_does(
    client: TestClient, recorded: Recorded
) -> None:
    """Every LLM-call span of the file answers 200 with its verdict, receipt digest, gap
    sentences and the same change lines the report prints for that epoch."""
    report = render_report(recorded.views, recorded.verdicts)
    for view, verdict in zip(recorded.views, recorded.verdicts, strict=True):
        response = client.get(span_path(view.trace_id, view.span_id))
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/html")
        page = response.text
        assert f'data-verdict="{verdict.status.value}"' in page
        assert f'data-epoch="{view.epoch}"' in page
        for gap in view.gaps:
            assert html.escape(gap.why) in page
        if view.minted:
            assert f"<code data-digest>{view.receipt.digest}</code>" in page  # type: ignore[union-attr]
            assert f"<code data-digest>{view.receipt.digest}</code>" in report  # type: ignore[union-attr]
        ids = links(page).ids
        assert len(ids) == len(set(ids))
    second = client.get(span_path(*_ids(recorded, RUN, 2))).text
    assert "4 message(s) added to epoch 1's 2." in second
    assert "4 message(s) added to epoch 1's 2." in report


def _ids(recorded: Recorded, run_id: str, epoch: int) -> tuple[str, str]:
    view = recorded.view(run_id, epoch)
    return view.trace_id, view.span_id


def test_markup_in_a_prompt_is_text(client: TestClient, recorded: Recorded) -> None:
    """The base's prompt full of markup arrives escaped."""
    page = client.get(epoch_path(RUN, 1)).text
    assert html.escape(PROMPT) in page
    assert "<script" not in page
    assert '<b id="injected"' not in page


def test_epoch_pages_link_to_each_other(client: TestClient, recorded: Recorded) -> None:
    """An epoch page lists its run's epochs; every link on it that leads to this server is
    answered with a page."""
    response = client.get(epoch_path(RUN, 2))
    assert response.status_code == 200
    page = response.text
    assert "Every epoch of this run" in page
    local = [h for h in links(page).hrefs if h.startswith("/")]
    assert {epoch_path(RUN, n, recorded.view(RUN, n).trace_id) for n in (1, 2, 3)} <= set(local)
    for href in local:
        assert client.get(href).status_code == 200, href
    assert (
        f'href="{html.escape(epoch_path(RUN, 1, recorded.view(RUN, 1).trace_id))}">shown there'
        in page
    )


def test_a_call_without_content_shows_its_gap(client: TestClient, recorded: Recorded) -> None:
    """The uncaptured call is reconstructed with the no-receipt gap and its cause."""
    page = client.get(epoch_path("blind", 1)).text
    assert 'data-verdict="reconstructed"' in page
    assert 'data-gap="no-receipt-on-chart"' in page


def test_the_home_page_says_what_is_read(client: TestClient, recorded: Recorded) -> None:
    page = client.get("/").text
    assert str(recorded.traces) in page
    assert "/traces/&lt;trace id&gt;/spans/&lt;span id&gt;" in page


# -- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        (span_path("0" * 31 + "1", "0" * 15 + "1"), 404, "no LLM call of trace"),
        (span_path("not-a-trace", "0" * 15 + "1"), 400, "is not a trace id"),
        (span_path("0" * 31 + "1", "xyz"), 400, "is not a span id"),
        (span_path("1" * 33, "0" * 15 + "1"), 400, "is not a trace id"),
        (epoch_path("no such run", 1), 404, "no LLM call of run"),
        (epoch_path(RUN, 99), 404, "has no epoch 99"),
        ("/runs/x/epochs/one", 404, "No page at"),
        ("/elsewhere", 404, "No page at"),
    ],
)
def test_unknown_ids_are_pages_with_their_status(
    client: TestClient, path: str, status: int, says: str
) -> None:
    response = client.get(path)
    assert response.status_code == status
    assert html.escape(says) in response.text
    assert_no_traceback(response.text)


def test_a_span_that_is_no_llm_call_is_404(client: TestClient, recorded: Recorded) -> None:
    """The agent-turn span around the run is in the trace but is no LLM call."""
    trace_id = recorded.view(RUN, 1).trace_id
    (parent,) = [s for s in recorded.spans if s.trace_id == trace_id and s.name == "agent turn"]
    response = client.get(span_path(trace_id, parent.span_id))
    assert response.status_code == 404
    assert "is not an LLM call af_otel can show" in response.text


def test_only_get_is_answered(client: TestClient) -> None:
    response = client.post("/")
    assert response.status_code == 405
    assert_no_traceback(response.text)


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_an_unusable_store_is_a_500_page_naming_it(
    recorded: Recorded, tmp_path: Path, kind: str
) -> None:
    """A --store that does not exist, or is a file, answers 500 and names the option."""
    store = tmp_path / "nowhere"
    if kind == "file":
        store.write_text("not a store")
    client = TestClient(create_app(Evidence(file=recorded.traces, store=str(store))))
    response = client.get(epoch_path(RUN, 1))
    assert response.status_code == 500
    assert f"--store {store}" in response.text
    assert "The store cannot be read" in response.text


def test_a_missing_trace_file_is_a_502_page(tmp_path: Path) -> None:
    client = TestClient(create_app(Evidence(file=tmp_path / "gone.jsonl", store=None)))
    response = client.get(epoch_path(RUN, 1))
    assert response.status_code == 502
    assert "gone.jsonl" in response.text


def test_anything_else_is_a_500_page_without_a_traceback(recorded: Recorded) -> None:
    """A source that breaks in a way nobody planned for still gets a page, not a stack."""

    class Broken:
        label = "a broken source"

        def read(self, ask: object, *, lenient: bool = False) -> object:
            raise RuntimeError("secret internals")

    client = TestClient(
        create_app(Evidence(source=Broken(), store=str(recorded.store))),  # type: ignore[arg-type]
        raise_server_exceptions=False,
    )
    response = client.get(span_path(*_ids(recorded, RUN, 1)))
    assert response.status_code == 500
    assert "secret internals" not in response.text
    assert "Something went wrong" in response.text
    assert_no_traceback(response.text)


# -- keys ----------------------------------------------------------------------------------


def test_keyed_receipts_verify_with_the_key_and_never_show_it(tmp_path: Path) -> None:
    """Without the key a keyed epoch is shown unchecked; with it, verified; the key appears in no
    page and no error."""
    key = b"k3y-that-must-not-leak-0123456789"
    keyed = record(tmp_path, key=key)
    path = epoch_path(RUN, 2)
    without = TestClient(create_app(Evidence(file=keyed.traces, store=str(keyed.store))))
    page = without.get(path).text
    assert "not checked" in page
    assert 'data-verdict="verified"' not in page
    evidence = Evidence(file=keyed.traces, store=str(keyed.store), key=key)
    client = TestClient(create_app(evidence))
    pages = [client.get(p).text for p in (path, "/", epoch_path(RUN, 9), "/nowhere")]
    assert 'data-verdict="verified"' in pages[0]
    assert key.decode() not in repr(evidence)
    for text in pages:
        assert key.decode() not in text


# -- a live backend ------------------------------------------------------------------------


def _tempo_routes(recorded: Recorded) -> dict[str, tuple[int, bytes]]:
    return {
        f"/api/v2/traces/{t}": (200, tempo_v2_body(recorded.traces, t)) for t in recorded.trace_ids
    }


def test_a_backend_trace_is_fetched_once_and_kept(recorded: Recorded) -> None:
    """Pages of spans of one trace cost one fetch; a run's epoch page is then answered from the
    kept trace; beyond the bound the oldest trace is fetched again."""
    seen: list[dict[str, str]] = []
    with serve(_tempo_routes(recorded), seen) as url:
        evidence = Evidence(source=TempoSource(url), store=str(recorded.store), traces_kept=1)
        client = TestClient(create_app(evidence))
        for epoch in (1, 2, 3, 1):
            response = client.get(span_path(*_ids(recorded, RUN, epoch)))
            assert response.status_code == 200
            assert 'data-verdict="verified"' in response.text
        assert len(seen) == 1
        assert client.get(epoch_path(RUN, 3)).status_code == 200
        assert len(seen) == 1
        assert client.get(span_path(*_ids(recorded, "blind", 1))).status_code == 200
        assert client.get(span_path(*_ids(recorded, RUN, 1))).status_code == 200
        assert [s[":path"] for s in seen] == [
            f"/api/v2/traces/{recorded.view(RUN, 1).trace_id}",
            f"/api/v2/traces/{recorded.view('blind', 1).trace_id}",
            f"/api/v2/traces/{recorded.view(RUN, 1).trace_id}",
        ]


def test_a_run_page_from_a_backend_needs_its_trace(recorded: Recorded) -> None:
    """Before any span of the run was opened, /runs/... says how to get there (404); with
    ?trace= it fetches that trace and answers."""
    with serve(_tempo_routes(recorded)) as url:
        client = TestClient(
            create_app(Evidence(source=TempoSource(url), store=str(recorded.store)))
        )
        response = client.get(epoch_path(RUN, 2))
        assert response.status_code == 404
        assert "?trace=" in response.text
        with_trace = client.get(epoch_path(RUN, 2, recorded.view(RUN, 2).trace_id))
        assert with_trace.status_code == 200
        assert 'data-epoch="2"' in with_trace.text


class _Toy:
    """A backend in one class: the trace file's spans of the trace asked for, as if fetched."""

    label = "a toy backend"

    def __init__(self, traces: Path) -> None:
        self.traces = traces
        self.asked: list[Ask] = []

    def read(self, ask: Ask, *, lenient: bool = False) -> SpanStream:
        self.asked.append(ask)
        assert isinstance(ask, OneTrace)
        whole = read_spans(self.traces, lenient=lenient)
        stream = SpanStream(f"toy:{ask.trace_id}", SourceFormat.OTLP_JSON_LINES, lenient=lenient)
        return stream.feed(r for r in whole if r.trace_id == ask.trace_id)


def test_any_source_is_served_through_the_protocol(recorded: Recorded) -> None:
    """A Source written in one class (a label and read) is served as Tempo is: asked for the
    trace of the span clicked, once, and named on the pages by its own label."""
    toy = _Toy(recorded.traces)
    client = TestClient(create_app(Evidence(source=toy, store=str(recorded.store))))
    trace_id, span_id = _ids(recorded, RUN, 2)
    page = client.get(span_path(trace_id, span_id))
    assert page.status_code == 200
    assert 'data-verdict="verified"' in page.text
    assert client.get(epoch_path(RUN, 2)).status_code == 200
    assert toy.asked == [OneTrace(trace_id)]
    assert "a toy backend" in client.get("/").text


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("routes", "status", "says"),
    [
        ({}, 404, "has no trace"),
        ("500", 502, "HTTP 500"),
        ("not json", 502, "is not JSON"),
        ("unreachable", 502, "request failed"),
    ],
)
def test_backend_failures_are_pages_with_their_status(
    recorded: Recorded, routes: object, status: int, says: str
) -> None:
    """A trace the backend lacks is 404; a backend that errs, answers garbage or cannot be
    reached is 502, naming the URL it tried."""
    trace_id, span_id = _ids(recorded, RUN, 1)
    path = f"/api/v3/traces/{trace_id}"
    table = {
        "500": {path: (500, b"boom")},
        "not json": {path: (200, b"<html>")},
    }.get(str(routes), {})
    with serve(table) as url:
        base = f"http://127.0.0.1:{_closed_port()}" if routes == "unreachable" else url
        client = TestClient(
            create_app(Evidence(source=JaegerSource(base), store=str(recorded.store)))
        )
        response = client.get(span_path(trace_id, span_id))
    assert response.status_code == status
    assert says in response.text
    assert_no_traceback(response.text)
    if status == 502:
        assert urlsplit(base).netloc in response.text


def test_paths_are_built_for_any_run_id() -> None:
    assert epoch_path("a b/c", 2, "ff") == f"/runs/{quote('a b/c', safe='')}/epochs/2?trace=ff"


def test_ids_shortened_by_a_ui_are_padded(client: TestClient, recorded: Recorded) -> None:
    """A trace id without its leading zeros (as Jaeger writes 128-bit ids whose high half starts
    with zeros) reaches the same page."""
    view = recorded.view(RUN, 1)
    short = view.trace_id.lstrip("0") or "0"
    response = client.get(span_path(short.upper(), view.span_id))
    assert response.status_code == 200
    assert 'data-epoch="1"' in response.text


def test_a_missing_default_store_is_named(
    recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --store, the store $AF_OTEL_STORE names is checked and named as af-otel verify
    names it, and so is the default store when the variable is unset."""
    monkeypatch.setenv("AF_OTEL_STORE", str(tmp_path / "unset-store"))
    client = TestClient(create_app(Evidence(file=recorded.traces, store=None)))
    response = client.get(epoch_path(RUN, 1))
    assert response.status_code == 500
    text = html.unescape(response.text)
    assert f"$AF_OTEL_STORE {tmp_path / 'unset-store'}: no store directory" in text
    assert "name the store with --store" in text
    monkeypatch.delenv("AF_OTEL_STORE")
    monkeypatch.chdir(tmp_path)
    response = client.get(epoch_path(RUN, 1))
    assert response.status_code == 500
    assert "the default store ./.af_otel/store (no --store given)" in html.unescape(response.text)


def test_a_store_url_with_nothing_under_it_is_refused(recorded: Recorded) -> None:
    """The rule is the store's own: an fsspec URL with nothing stored under it is refused too."""
    client = TestClient(create_app(Evidence(file=recorded.traces, store="memory://af-empty")))
    response = client.get(epoch_path(RUN, 1))
    assert response.status_code == 500
    assert "--store memory://af-empty: no store at memory://af-empty" in response.text
