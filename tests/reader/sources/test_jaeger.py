"""Jaeger: the UI JSON's translations are undone, and JaegerSource fetches a trace from a live server."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings

from af_otel import names
from af_otel.errors import SourceError, TraceNotFoundError, UnknownFormatError
from af_otel.reader.records import SpanKind, SpanRecord, StatusCode
from af_otel.reader.sources import JaegerSource, NoteKind, SourceFormat, read_spans

from .helpers import FIXTURES, as_jaeger_v1_sees_it, by_id, sdk_records, serve, shapes
from .strategies import attribute_maps, sdk_span

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RUN_A = f"{shapes.TRACE_A:032x}"
RUN_B = f"{shapes.TRACE_B:032x}"
V1: dict[str, Any] = orjson.loads((FIXTURES / "jaeger-v1.json").read_bytes())


@given(attributes=attribute_maps)
@example(attributes={"event": ""})  # an attribute in the field that carries the event's name
@example(attributes={names.GAPS: [], names.RECEIPT_MESSAGES_ADDED: [""]})  # "[]", '[""]'
@example(attributes={names.GAPS: ["[]", ""], "af.note": "", "af.list": []})
@SETTINGS
def test_attributes_round_trip_through_the_ui_json(attributes: dict[str, Any]) -> None:
    """Scalars, binary and the af_otel arrays come back as they were; other arrays and maps as JSON text."""
    span = sdk_span(attributes)
    (expected,) = read_spans([span])
    (record,) = read_spans(shapes.jaeger_v1([[span]]))
    assert record == as_jaeger_v1_sees_it(expected)
    for key in attributes.keys() & {names.GAPS, names.RECEIPT_MESSAGES_ADDED}:
        assert isinstance(record.attributes[key], tuple)


@pytest.mark.parametrize(
    ("text", "read"),
    [("", ""), ("no-run-log", "no-run-log"), ("[]", ()), ('[""]', ("",)), ('["a",1]', ("a", 1))],
)
def test_a_string_on_an_af_array_key_is_read_as_its_json_text_says(text: str, read: Any) -> None:
    """The UI JSON spells an array as the JSON text of it, so a string tag on an af_otel array
    key is an array where its text is one (a string the processor never writes there could not
    be told apart) and stays text otherwise."""
    span = sdk_span({names.GAPS: text})
    (record,) = read_spans(shapes.jaeger_v1([[span]]))
    assert record.attributes[names.GAPS] == read


def _span(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(V1)
    span = doc["data"][0]["spans"][0]
    for key, value in changes.items():
        if value is None:
            del span[key]
        else:
            span[key] = value
    return doc


def _one(doc: dict[str, Any]) -> SpanRecord:
    records = list(read_spans(doc))
    return records[0]


def _tags(*tags: tuple[str, str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "type": t, "value": v} for k, t, v in tags]


def test_sixteen_digit_trace_ids_are_left_padded() -> None:
    """A trace id whose high half is zero prints as 16 digits and reads back as the 32-digit id."""
    assert V1["data"][1]["spans"][0]["traceID"] == RUN_B[16:]
    records = [r for r in read_spans(V1) if r.trace_id == RUN_B]
    assert len(records) == 4
    assert all(r.parent_span_id is None or len(r.parent_span_id) == 16 for r in records)


def test_field_tags_become_fields_and_leave_the_attributes() -> None:
    """span.kind, otel.status_code, the translator's error tag, scope (name and version) and
    description are fields, not attributes."""
    tags = _tags(
        ("otel.scope.name", "string", "lib"),
        ("otel.scope.version", "string", "1.0"),
        ("k", "string", "v"),
        ("span.kind", "string", "producer"),
        ("otel.status_code", "string", "ERROR"),
        ("error", "bool", True),
        ("otel.status_description", "string", "boom"),
        ("w3c.tracestate", "string", "a=b"),
    )
    record = _one(_span(tags=tags))
    assert (record.kind, record.status_code, record.scope, record.scope_version) == (
        SpanKind.PRODUCER,
        StatusCode.ERROR,
        "lib",
        "1.0",
    )
    assert dict(record.attributes) == {"k": "v"}


def test_a_native_error_tag_is_an_error_status_and_stays() -> None:
    """From a Jaeger client (no otel.status_code), error=true is the status and remains an attribute."""
    record = _one(_span(tags=_tags(("error", "bool", True))))
    assert record.status_code is StatusCode.ERROR
    assert record.attributes["error"] is True
    assert record.kind is SpanKind.UNSPECIFIED


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        (("n", "int64", "9223372036854775807"), 2**63 - 1),
        (("n", "int64", 12), 12),
        (("n", "float64", 3), 3.0),
        (("n", "bool", "true"), True),  # the embedded-process variant writes every value as text
        (("n", "binary", "AAAwOQ=="), "AAAwOQ=="),
        ((names.GAPS, "string", '["no-run-log","span-limits"]'), ("no-run-log", "span-limits")),
        ((names.GAPS, "string", "not json"), "not json"),
        ((names.GAPS, "string", '{"a":1}'), '{"a":1}'),
        (("gen_ai.response.finish_reasons", "string", '["stop"]'), '["stop"]'),
    ],
)
def test_tag_values(tag: tuple[str, str, Any], expected: object) -> None:
    """Typed tags decode by type; only af_otel's array keys turn JSON array text back into tuples."""
    assert _one(_span(tags=_tags(tag))).attributes[tag[0]] == expected


@pytest.mark.parametrize("value", [10**400, "a lot", True], ids=["past-range", "text", "bool"])
def test_a_float_tag_that_is_no_double_is_a_problem_naming_it(value: object) -> None:
    """A float64 tag past a double's range, or not a number, is a SourceError naming the tag
    (decoded by the same rule as OTLP's doubles), never an OverflowError."""
    with pytest.raises(SourceError, match="'n'"):
        _one(_span(tags=_tags(("n", "float64", value))))


def test_logs_become_events_named_by_their_event_field() -> None:
    """A log's `event` field is the event's name; its other fields are attributes; µs become ns."""
    logs = [
        {
            "timestamp": 5,
            "fields": _tags(("event", "string", "af.commit"), ("af.commit.seq", "int64", 9)),
        },
        {"timestamp": 6, "fields": _tags(("message", "string", "no name"))},
    ]
    record = _one(_span(logs=logs))
    assert [(e.name, e.time_ns, dict(e.attributes)) for e in record.events] == [
        ("af.commit", 5000, {"af.commit.seq": 9}),
        ("", 6000, {"message": "no name"}),
    ]


def test_processes_are_resources() -> None:
    """processID picks the process; serviceName is service.name; an inline process works too."""
    records = by_id(read_spans(V1))
    tool = next(r for r in records.values() if r.name.startswith("execute_tool"))
    assert dict(tool.resource) == {"service.name": "tool-runner", "host.cores": 8}
    inline = _span(processID=None, process={"serviceName": "inline", "tags": []})
    assert _one(inline).service_name == "inline"
    nameless = _span(processID=None, process={"serviceName": "OTLPResourceNoServiceName"})
    assert _one(nameless).service_name is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"spanID": None}, "missing spanID"),
        ({"traceID": "xyz"}, "traceID 'xyz' is not up to 32 hex digits"),
        ({"processID": "p9"}, "processID 'p9' is not in the trace's processes"),
        ({"tags": [{"key": "k", "type": "complex", "value": 1}]}, "unknown type 'complex'"),
    ],
)
def test_malformed_spans_name_the_span(changes: dict[str, Any], message: str) -> None:
    """A bad span names its index and path; lenient reading skips only that span."""
    doc = _span(**changes)
    with pytest.raises(SourceError) as caught:
        list(read_spans(doc))
    assert str(caught.value).startswith("<document>: span 0 (data[0].spans[0]): ")
    assert message in str(caught.value)
    stream = read_spans(doc, lenient=True)
    assert len(list(stream)) == len(list(read_spans(V1))) - 1
    assert stream.skipped_spans == 1


def test_errors_and_warnings_become_notes() -> None:
    """Jaeger's own errors and warnings are kept as notes on the stream, not dropped."""
    doc = copy.deepcopy(V1)
    doc["errors"] = [{"code": 500, "msg": "storage timeout"}]
    doc["data"][0]["warnings"] = ["trace truncated"]
    doc["data"][0]["spans"][2]["warnings"] = ["clock skew adjusted"]
    stream = read_spans(doc)
    list(stream)
    assert [(n.kind, str(n)) for n in stream.notes] == [
        (
            NoteKind.ERROR,
            "<document>: Jaeger reported an error: {'code': 500, 'msg': 'storage timeout'}",
        ),
        (NoteKind.TRUNCATED, "<document>: Jaeger warning on data[0]: trace truncated"),
        (NoteKind.WARNING, "<document>: Jaeger warning on data[0].spans[2]: clock skew adjusted"),
    ]


class TestJaegerSource:
    def _routes(self) -> dict[str, tuple[int, bytes]]:
        only_a = dict(V1, data=[t for t in V1["data"] if t["traceID"] == RUN_A])
        return {
            f"/api/v3/traces/{RUN_A}": (200, (FIXTURES / "jaeger-v3.json").read_bytes()),
            f"/api/traces/{RUN_A}": (200, orjson.dumps(only_a)),
            f"/api/traces/{RUN_B}": (500, b"storage unavailable"),
        }

    @pytest.mark.parametrize("api", ["v3", "v1"])
    def test_fetches_a_trace_by_id(self, api: str) -> None:
        """Both APIs return the trace's spans, with the URL as their origin."""
        expected = {k: r for k, r in by_id(sdk_records()).items() if r.trace_id == RUN_A}
        if api == "v1":
            expected = {k: as_jaeger_v1_sees_it(r) for k, r in expected.items()}
        with serve(self._routes()) as url:
            source = JaegerSource(url, api=api)  # type: ignore[arg-type]
            stream = source.trace(RUN_A.upper())
            records = by_id(stream)
        assert records == expected
        assert stream.format is (SourceFormat.JAEGER_V3 if api == "v3" else SourceFormat.JAEGER_V1)
        assert {r.origin for r in records.values()} == {source.trace_url(RUN_A)}

    def test_a_missing_trace_names_the_url(self) -> None:
        """A 404 is a TraceNotFoundError (a SourceError) naming the URL that was asked."""
        with serve(self._routes()) as url, pytest.raises(TraceNotFoundError) as caught:
            JaegerSource(url).trace(RUN_B)
        assert str(caught.value) == f"{url}/api/v3/traces/{RUN_B}: trace not found (HTTP 404)"

    def test_a_server_error_names_the_url_and_status(self) -> None:
        """A 5xx is a SourceError with the status and the start of the body."""
        with (
            serve(self._routes()) as url,
            pytest.raises(SourceError, match="HTTP 500: storage") as caught,
        ):
            JaegerSource(url, api="v1").trace(RUN_B)
        assert not isinstance(caught.value, TraceNotFoundError)  # a failed backend, not a lost id

    def test_a_body_of_the_wrong_shape_is_an_unknown_format(self) -> None:
        """A 200 whose body is not the endpoint's shape raises UnknownFormatError naming the URL."""
        routes = {f"/api/v3/traces/{RUN_A}": (200, b'{"data": []}')}
        with serve(routes) as url, pytest.raises(UnknownFormatError, match=f"^{url}/api/v3"):
            JaegerSource(url).trace(RUN_A)

    def test_an_unreachable_server_names_the_url(self) -> None:
        """A refused connection is a SourceError naming the URL (port 9 on loopback: nothing listens)."""
        with pytest.raises(
            SourceError, match=r"^http://127\.0\.0\.1:9/api/v3/traces/.*request failed"
        ):
            JaegerSource("http://127.0.0.1:9", timeout=2).trace(RUN_A)

    def test_a_malformed_trace_id_never_reaches_the_url(self) -> None:
        """An id that is not hex is refused before any request is built."""
        with pytest.raises(SourceError, match="is not a trace id"):
            JaegerSource("http://127.0.0.1:9").trace("../../admin")
