"""Tempo: both trace-by-id bodies read, a partial trace is noted, and TempoSource fetches live."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from af_otel.errors import SourceError, TraceNotFoundError
from af_otel.reader.sources import NoteKind, SourceFormat, SourceNote, TempoSource, read_spans

from .helpers import FIXTURES, by_id, sdk_records, serve, shapes

RUN_A = f"{shapes.TRACE_A:032x}"
V2: dict[str, Any] = orjson.loads((FIXTURES / "tempo-v2.json").read_bytes())


def test_ids_are_base64_and_enums_are_names_in_the_fixture() -> None:
    """The fixture has Tempo's jsonpb encodings, so the equality tests exercise them."""
    span = V2["trace"]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span["traceId"].endswith("==")
    assert span["kind"].startswith("SPAN_KIND_")


def test_a_partial_trace_is_noted_and_still_read() -> None:
    """status PARTIAL keeps the spans that arrived and says so on the stream."""
    doc = copy.deepcopy(V2)
    doc["status"] = "PARTIAL"
    doc["message"] = "1 of 3 blocks failed"
    stream = read_spans(doc)
    assert len(list(stream)) == 5
    assert stream.notes == [
        SourceNote(
            NoteKind.PARTIAL, "<document>: Tempo returned a partial trace (1 of 3 blocks failed)"
        )
    ]


def test_an_empty_trace_is_no_spans() -> None:
    """A v2 body without a trace (jsonpb leaves an empty message out) is zero spans."""
    assert list(read_spans({"trace": {}})) == []
    assert list(read_spans({"trace": None, "metrics": {}})) == []


class TestTempoSource:
    @pytest.mark.parametrize(
        ("api", "path", "fixture", "fmt"),
        [
            ("v2", "/api/v2/traces/", "tempo-v2.json", SourceFormat.TEMPO_V2),
            ("v1", "/api/traces/", "tempo-v1.json", SourceFormat.TEMPO_V1),
        ],
    )
    def test_fetches_a_trace_by_id(
        self, api: str, path: str, fixture: str, fmt: SourceFormat
    ) -> None:
        """The trace's spans come back from both APIs; auth headers are sent as given."""
        expected = {k: r for k, r in by_id(sdk_records()).items() if r.trace_id == RUN_A}
        seen: list[dict[str, str]] = []
        routes = {path + RUN_A: (200, (FIXTURES / fixture).read_bytes())}
        with serve(routes, seen) as url:
            source = TempoSource(url + "/", api=api, headers={"X-Scope-OrgID": "team-a"})  # type: ignore[arg-type]
            stream = source.trace(RUN_A)
            records = by_id(stream)
        assert records == expected
        assert stream.format is fmt
        assert seen[0][":path"] == path + RUN_A
        assert seen[0]["x-scope-orgid"] == "team-a"
        assert seen[0]["accept"] == "application/json"

    def test_a_short_trace_id_is_padded(self) -> None:
        """A 16-digit id (a 64-bit trace id) is asked for as 32 digits."""
        assert TempoSource("http://t:3200").trace_url("4BF92F3577B34DA6") == (
            "http://t:3200/api/v2/traces/00000000000000004bf92f3577b34da6"
        )

    def test_a_missing_trace_names_the_url(self) -> None:
        """A 404 is a TraceNotFoundError (a SourceError) naming the URL that was asked."""
        with serve({}) as url, pytest.raises(TraceNotFoundError) as caught:
            TempoSource(url).trace(RUN_A)
        assert str(caught.value) == f"{url}/api/v2/traces/{RUN_A}: trace not found (HTTP 404)"

    def test_a_body_that_is_not_json_names_the_url(self) -> None:
        """Protobuf or HTML where JSON was asked for is a SourceError, not a parser exception."""
        routes = {f"/api/v2/traces/{RUN_A}": (200, b"<html>login</html>")}
        with serve(routes) as url, pytest.raises(SourceError, match="the response is not JSON"):
            TempoSource(url).trace(RUN_A)
