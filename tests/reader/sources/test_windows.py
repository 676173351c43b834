"""Time windows: Tempo's TraceQL search and Jaeger's FindTraces, replayed by a local server in the
shapes those servers answer with, read trace by trace with bounded concurrency; the CLI's options."""

from __future__ import annotations

import dataclasses
import io
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from af_otel.cli import main
from af_otel.cli.loading import _fetching
from af_otel.errors import SourceError, TraceNotFoundError
from af_otel.processor import run
from af_otel.reader.sources import (
    JaegerSource,
    NoteKind,
    PhoenixSource,
    SourceFormat,
    SpanStream,
    TempoSource,
    Window,
    read_spans,
)
from af_otel.reader.sources.tempo import DEFAULT_QUERY
from af_otel.reader.sources.window import fetch_each, parse_duration, parse_instant
from af_otel.store import LocalStore
from tests.reader.recordings import agent, file_recorder

from . import replay
from .helpers import FIXTURES, by_id, sdk_records, serve

SERVICE = "reader-tests"


class Recording:
    def __init__(self, traces: Path, store: Path) -> None:
        self.traces = traces
        self.store = store
        self.docs = replay.export_lines(traces)
        self.by_trace = replay.by_trace(self.docs)
        self.records = by_id(read_spans(traces))


@pytest.fixture
def recording(tmp_path: Path) -> Recording:
    """A 3-turn agent (each call its own trace) and a call without content, as af_otel writes them."""
    traces, store = tmp_path / "traces.jsonl", tmp_path / "store"
    with file_recorder(traces, LocalStore(store)) as rec:
        agent(rec, "window-run", 3)
        with run("blind-run"):
            rec.blind_chat()
    return Recording(traces, store)


def _tempo_routes(recording: Recording, **overrides: tuple[int, bytes]) -> dict[str, Any]:
    routes: dict[str, tuple[int, bytes]] = {
        "/api/search": (200, json.dumps(replay.tempo_search(recording.by_trace)).encode()),
    }
    for trace_id, doc in recording.by_trace.items():
        routes[f"/api/v2/traces/{trace_id}"] = (200, json.dumps(replay.tempo_v2(doc)).encode())
    return routes | overrides


def _query(seen: list[dict[str, str]], path: str) -> dict[str, list[str]]:
    hit = next(s[":path"] for s in seen if urlsplit(s[":path"]).path == path)
    return parse_qs(urlsplit(hit).query)


class TestTempo:
    def test_a_window_searches_then_fetches_each_trace(self, recording: Recording) -> None:
        """The search lists the traces; each one is fetched and read; the query is af_otel's."""
        seen: list[dict[str, str]] = []
        window = Window.since("1h")
        with serve(_tempo_routes(recording), seen) as url:
            stream = TempoSource(url).window(window)
            records = by_id(stream)
        assert records == recording.records
        assert stream.format is SourceFormat.TEMPO_SEARCH
        assert stream.traces_expected == stream.traces_read == len(recording.by_trace) == 4
        query = _query(seen, "/api/search")
        assert query["q"] == [DEFAULT_QUERY]
        assert query["start"] == [str(window.start_ns // 10**9)]
        assert query["end"] == [str(-(-window.end_ns // 10**9))]
        assert query["limit"] == ["1000"]
        assert not stream.notes

    def test_the_cli_verifies_every_call_of_the_window(
        self, recording: Recording, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """af-otel verify --tempo URL --since 1h verifies each receipt found in the window."""
        with serve(_tempo_routes(recording)) as url:
            code = main(
                ["verify", "--tempo", url, "--since", "1h", "--store", str(recording.store)]
            )
        out = capsys.readouterr().out
        assert code == 0, out
        assert "window-run epoch 3: verified" in out
        assert "3 verified" in out

    def test_the_cli_shows_one_progress_line_for_a_window(
        self, recording: Recording, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """On a terminal a window read counts traces fetched, and no second counter of spans
        read overwrites that line."""

        class Terminal(io.StringIO):
            def isatty(self) -> bool:
                return True

        terminal = Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        with serve(_tempo_routes(recording)) as url:
            code = main(
                ["verify", "--tempo", url, "--since", "1h", "--store", str(recording.store)]
            )
        assert code == 0
        shown = terminal.getvalue()
        assert "\rfetching traces " in shown
        assert "reading spans" not in shown
        from_file = Terminal()
        monkeypatch.setattr(sys, "stderr", from_file)
        assert main(["verify", str(recording.traces), "--store", str(recording.store)]) == 0
        assert "\rreading spans " in from_file.getvalue()  # a file read keeps its own counter

    def test_a_partial_trace_and_a_search_at_its_limit_are_noted(
        self, recording: Recording
    ) -> None:
        """Tempo's PARTIAL status and a search returning `limit` traces become notes of their kind."""
        first = next(iter(recording.by_trace))
        partial = replay.tempo_v2(
            recording.by_trace[first], status="PARTIAL", message="trace exceeds max size"
        )
        routes = _tempo_routes(
            recording, **{f"/api/v2/traces/{first}": (200, json.dumps(partial).encode())}
        )
        with serve(routes) as url:
            stream = TempoSource(url).window(Window.since("1h"), limit=4)
            assert len(list(stream)) == len(recording.records)
        kinds = [note.kind for note in stream.notes]
        assert kinds == [NoteKind.TRUNCATED, NoteKind.PARTIAL]
        assert "the search limit" in str(stream.notes[0])
        assert "trace exceeds max size" in str(stream.notes[1])

    def test_a_trace_that_fails_names_its_url(self, recording: Recording) -> None:
        """Strict reading raises at the trace that failed; lenient skips it and counts it."""
        broken = list(recording.by_trace)[2]
        routes = _tempo_routes(
            recording, **{f"/api/v2/traces/{broken}": (500, b"querier unavailable")}
        )
        with serve(routes) as url:
            with pytest.raises(SourceError, match=rf"{broken}: HTTP 500: querier unavailable"):
                list(TempoSource(url).window(Window.since("1h")))
            stream = TempoSource(url).window(Window.since("1h"), lenient=True)
            records = list(stream)
        lost = sum(1 for trace_id, _ in recording.records if trace_id == broken)
        assert lost >= 1
        assert len(records) == len(recording.records) - lost
        assert stream.skipped_lines == 1
        assert broken in stream.problems[0]

    def test_the_committed_search_body_pads_short_ids(self) -> None:
        """Tempo prints trace ids without leading zeros; they are padded before the fetch."""
        seen: list[dict[str, str]] = []
        routes = {
            "/api/search": (200, (FIXTURES / "tempo-search.json").read_bytes()),
            f"/api/v2/traces/{sdk_records()[0].trace_id}": (
                200,
                (FIXTURES / "tempo-v2.json").read_bytes(),
            ),
        }
        with serve(routes, seen) as url:
            stream = TempoSource(url).window(Window.since("1h"), lenient=True)
            records = list(stream)
        fetched = [urlsplit(s[":path"]).path for s in seen[1:]]
        assert sorted(fetched) == sorted(
            f"/api/v2/traces/{t}"
            for t in ("7a3f1c2e9b4d5a6f8e1d2c3b4a596877", "00000000000000004bf92f3577b34da6")
        )
        assert {r.trace_id for r in records} == {"7a3f1c2e9b4d5a6f8e1d2c3b4a596877"}
        assert stream.skipped_lines == 1  # run B is not served: a 404 the lenient read counts


class TestJaeger:
    def test_a_window_finds_the_services_traces(self, recording: Recording) -> None:
        """FindTraces by service and start time answers every trace in one body."""
        seen: list[dict[str, str]] = []
        body = json.dumps(replay.jaeger_v3(replay.merged(recording.docs))).encode()
        window = Window.since("2h")
        with serve({"/api/v3/traces": (200, body)}, seen) as url:
            stream = JaegerSource(url).window(window, SERVICE)
            records = by_id(stream)
        assert records == recording.records
        assert stream.format is SourceFormat.JAEGER_SEARCH
        assert stream.traces_read == 4
        query = _query(seen, "/api/v3/traces")
        assert query["query.service_name"] == [SERVICE]
        assert query["query.start_time_min"] == [window.start_iso]
        assert query["query.start_time_max"] == [window.end_iso]
        assert query["query.num_traces"] == ["1000"]

    def test_a_streamed_answer_reads_the_same(self, recording: Recording) -> None:
        """The older gRPC-gateway answer, one {"result": ...} per line, reads the same spans."""
        lines = [json.dumps(replay.jaeger_v3(doc)) for doc in recording.by_trace.values()]
        with serve({"/api/v3/traces": (200, "\n".join(lines).encode() + b"\n")}) as url:
            records = by_id(JaegerSource(url).window(Window.since("1h"), SERVICE))
        assert records == recording.records

    def test_nothing_found_is_zero_spans_and_the_limit_is_noted(self, recording: Recording) -> None:
        """Jaeger's 404 "No traces found" is an empty window; `limit` traces is a truncation."""
        empty = b'{"error":{"httpCode":404,"message":"No traces found"}}\n'
        with serve({"/api/v3/traces": (404, empty)}) as url:
            stream = JaegerSource(url).window(Window.since("1h"), SERVICE)
            assert list(stream) == []
            assert stream.notes == []
        body = json.dumps(replay.jaeger_v3(replay.merged(recording.docs))).encode()
        with serve({"/api/v3/traces": (200, body)}) as url:
            stream = JaegerSource(url).window(Window.since("1h"), SERVICE, limit=4)
            list(stream)
        assert [note.kind for note in stream.notes] == [NoteKind.TRUNCATED]

    def test_the_cli_verifies_a_service_window(
        self, recording: Recording, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """af-otel verify --jaeger URL --service S --start T verifies the service's calls."""
        body = json.dumps(replay.jaeger_v3(replay.merged(recording.docs))).encode()
        with serve({"/api/v3/traces": (200, body)}) as url:
            code = main(
                ["verify", "--jaeger", url, "--service", SERVICE, "--start", "2020-01-01T00:00Z",
                 "--store", str(recording.store)]
            )  # fmt: skip
        out = capsys.readouterr().out
        assert code == 0, out
        assert "3 verified" in out


def test_concurrency_is_bounded(recording: Recording) -> None:
    """At most `workers` trace fetches are in flight, and ids are taken only as room frees up."""
    in_flight = [0]
    with serve(_tempo_routes(recording), delay=0.05, in_flight=in_flight) as url:
        assert len(list(TempoSource(url).window(Window.since("1h"), workers=2))) == len(
            recording.records
        )
    assert 1 <= in_flight[0] <= 2

    taken: list[int] = []
    record = sdk_records()[0]

    def ids() -> Iterator[str]:
        for number in range(1000):
            taken.append(number)
            yield f"{number:032x}"

    def fetch(trace_id: str) -> SpanStream:
        stream = SpanStream(trace_id, SourceFormat.OTLP_JSON, lenient=False)
        return stream.feed(iter([record]))

    into = SpanStream("window", SourceFormat.TEMPO_SEARCH, lenient=False)
    records = fetch_each(ids(), fetch, into, workers=3)
    next(records)
    assert len(taken) == 3  # the first result waited for no more than the pool holds
    records.close()
    assert len(taken) == 3


def test_progress_counts_traces_on_a_terminal() -> None:
    """The window's progress line shows traces done of traces found, on a terminal only."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = SpanStream("window", SourceFormat.TEMPO_SEARCH, lenient=False)
    stream.traces_expected = 7
    stream.traces_read = 3
    stream.feed(iter(sdk_records()[:1]))
    shown = Terminal()
    assert list(_fetching(stream, shown)) == list(sdk_records()[:1])
    assert "fetching traces 3/7" in shown.getvalue()
    quiet = io.StringIO()
    stream.feed(iter(sdk_records()[:1]))
    list(_fetching(stream, quiet))
    assert quiet.getvalue() == ""
    pages = SpanStream("project", SourceFormat.PHOENIX, lenient=False)
    pages.feed(iter(sdk_records()[:2]))
    shown = Terminal()
    list(_fetching(pages, shown))
    assert "fetching spans 1" in shown.getvalue()  # no trace count: Phoenix pages spans


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--since", "1h"], "--since reads a window from a backend"),
        (["--start", "2026-01-01"], "--start reads a window from a backend"),
        (["--tempo", "http://t"], "--tempo needs --trace ID or a window"),
        (["--phoenix", "http://p"], "--phoenix needs --trace ID or a window"),
        (["--jaeger", "http://j", "--since", "1h"], "a --jaeger window needs --service NAME"),
        (["--tempo", "http://t", "--trace", "ab", "--since", "1h"], "--trace fetches one trace"),
        (["--tempo", "http://t", "--since", "1h", "--start", "0"], "--since and --start/--end"),
        (["--tempo", "http://t", "--end", "0"], "--end needs --start"),
        (["--tempo", "http://t", "--since", "soon"], "--since: 'soon' is not a duration"),
        (["--tempo", "http://t", "--start", "yesterday"], "--start/--end: 'yesterday' is neither"),
        (["--tempo", "http://t", "--start", "20", "--end", "10"], "the window ends"),
        (
            ["--tempo", "http://t", "--since", "1h", "--project", "p"],
            "--project goes with --phoenix",
        ),
        (
            ["--tempo", "http://t", "--since", "1h", "--service", "s"],
            "--service goes with --jaeger",
        ),
        (["--jaeger", "http://j", "--since", "1h", "--query", "{}"], "--query goes with --tempo"),
        (["--phoenix", "http://p", "--since", "1h", "--limit", "5"], "--limit goes with a --tempo"),
        (["--tempo", "http://t", "--since", "1h", "--limit", "0"], "--limit must be at least 1"),
        (["--trace", "ab"], "--trace needs --tempo, --jaeger, --phoenix or --clickhouse"),
        (
            ["x.jsonl", "--tempo", "http://t", "--trace", "ab"],
            "give a FILE or --tempo URL, not both",
        ),
    ],
)
def test_source_options_that_do_not_go_together_are_named(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each wrong combination is an argparse error (exit 2) naming the option."""
    with pytest.raises(SystemExit) as caught:
        main(["verify", *argv])
    assert caught.value.code == 2
    assert message in capsys.readouterr().err


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@given(st.lists(st.tuples(st.integers(1, 10_000), st.sampled_from(sorted(_UNITS))), min_size=1))
def test_durations_add_up(parts: list[tuple[int, str]]) -> None:
    """A duration is the sum of its parts, in nanoseconds."""
    text = "".join(f"{n}{unit}" for n, unit in parts)
    assert parse_duration(text) == sum(n * _UNITS[unit] for n, unit in parts) * 10**9


@given(
    st.datetimes(min_value=datetime(1970, 1, 1), timezones=st.just(UTC)),
    st.integers(0, 999),
)
def test_instants_round_trip_through_iso_and_unix_seconds(moment: datetime, nanos: int) -> None:
    """An ISO 8601 time and its Unix seconds name the same nanosecond; a window prints it back."""
    ns = parse_instant(moment.isoformat()) + nanos
    assert ns == parse_instant(f"{ns // 10**9}.{ns % 10**9:09d}")
    window = Window(ns, ns + 1)
    assert parse_instant(window.start_iso) == ns
    assert parse_instant(window.start_iso.removesuffix("Z")) == ns  # no zone: UTC


def _phoenix_page(spans: list[dict[str, Any]], cursor: str | None) -> bytes:
    # Phoenix's OtlpSpansResponseBody: spans under proto names, unset members null, no resource.
    return json.dumps(
        {"data": replay.proto_names(spans, nulls=True), "next_cursor": cursor}
    ).encode()


class TestPhoenixPages:
    def _spans(self, recording: Recording) -> list[dict[str, Any]]:
        return [
            span
            for doc in recording.docs
            for rs in doc["resourceSpans"]
            for ss in rs["scopeSpans"]
            for span in ss["spans"]
        ]

    def test_pages_follow_the_cursor(self, recording: Recording) -> None:
        """A window reads page after page until next_cursor is null; records lose only the
        resource and scope Phoenix does not keep."""
        spans = self._spans(recording)
        seen: list[dict[str, str]] = []
        path = "/v1/projects/my%20project/spans/otlpv1"
        window = Window.since("1h")
        first = (
            f"{path}?start_time={quote(window.start_iso)}&end_time={quote(window.end_iso)}&limit=2"
        )
        routes = {
            first: (200, _phoenix_page(spans[:2], "U3Bhbjoz")),
            f"{first}&cursor=U3Bhbjoz": (200, _phoenix_page(spans[2:], None)),
        }
        with serve(routes, seen) as url:
            stream = PhoenixSource(url, "my project", page_size=2).window(window)
            records = by_id(stream)
        assert len(seen) == 2
        assert stream.format is SourceFormat.PHOENIX
        expected = {
            key: dataclasses.replace(record, resource={}, scope="")
            for key, record in recording.records.items()
        }
        assert records == expected

    def test_a_saved_page_is_recognized(self, recording: Recording) -> None:
        """A page saved to a file reads as Phoenix's shape, not as Jaeger's {"data": ...}."""
        stream = read_spans(json.loads(_phoenix_page(self._spans(recording), None)))
        assert stream.format is SourceFormat.PHOENIX
        assert len(list(stream)) == len(recording.records)

    def test_a_repeated_cursor_ends_the_read(self, recording: Recording) -> None:
        """A server that hands back the cursor it was given does not make the reader loop."""
        spans = self._spans(recording)
        looping = _phoenix_page(spans[:1], "again")
        with serve({"/v1/projects/default/spans/otlpv1": (200, looping)}) as url:
            records = list(PhoenixSource(url).window(Window.since("1h")))
        assert len(records) == 2  # the first page, and the one its cursor named, once

    def test_a_missing_project_is_named(self) -> None:
        """Phoenix's 404 for an unknown project names the project and the server; an API key
        travels as a bearer token."""
        seen: list[dict[str, str]] = []
        with (
            serve({}, seen) as url,
            pytest.raises(SourceError, match=r"no project 'nope'") as caught,
        ):
            PhoenixSource(url, "nope", api_key="k").window(Window.since("1h"))
        assert seen[0]["authorization"] == "Bearer k"
        assert not isinstance(caught.value, TraceNotFoundError)  # the backend is misnamed

    def test_a_trace_without_spans_is_not_found(self) -> None:
        """A trace id with no span in the project is a TraceNotFoundError naming the project."""
        empty = b'{"data": [], "next_cursor": null}'
        routes = {"/v1/projects/default/spans/otlpv1": (200, empty)}
        with (
            serve(routes) as url,
            pytest.raises(TraceNotFoundError, match=r"no spans in 'default'"),
        ):
            PhoenixSource(url).trace("ab" * 16)
