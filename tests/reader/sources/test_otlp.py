"""OTLP JSON decoding: every value encoding the formats use gives the same record as the SDK span."""

from __future__ import annotations

import base64
import copy
import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans

from af_otel.errors import SourceError
from af_otel.reader.records import SpanKind, SpanRecord, StatusCode
from af_otel.reader.sources import read_spans

from .strategies import attribute_maps, sdk_span

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _one(doc: dict[str, Any]) -> SpanRecord:
    (record,) = read_spans(doc)
    return record


@given(attributes=attribute_maps)
@SETTINGS
def test_attributes_round_trip_through_the_real_json_encoder(attributes: dict[str, Any]) -> None:
    """Whatever the SDK holds, its OTLP JSON export reads back to the record the SDK span gives."""
    span = sdk_span(attributes)
    text = json.dumps(encode_spans([span]).to_dict())
    (expected,) = read_spans([span])
    assert _one(orjson.loads(text)) == expected


def _span_doc() -> dict[str, Any]:
    span = sdk_span({"af.epoch": 3, "af.gaps": ["no-run-log"]})
    doc: dict[str, Any] = encode_spans([span]).to_dict()
    body = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    body["parentSpanId"] = "00f067aa0ba902b7"
    body["status"] = {"code": 2, "message": "boom"}
    return doc


BASE = _span_doc()
BASE_RECORD = _one(BASE)


def _id_forms(hex_id: str) -> st.SearchStrategy[str]:
    raw = bytes.fromhex(hex_id)
    return st.sampled_from(
        [
            hex_id,
            hex_id.upper(),
            base64.b64encode(raw).decode(),
            base64.urlsafe_b64encode(raw).decode().rstrip("="),
        ]
    )


def _int_forms(value: int) -> st.SearchStrategy[object]:
    return st.sampled_from([value, str(value)])


def _enum_forms(value: int, names: tuple[str, str]) -> st.SearchStrategy[object]:
    prefix, name = names
    return st.sampled_from([value, str(value), f"{prefix}{name}", name, name.lower()])


@st.composite
def _encodings(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    body = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for key in ("traceId", "spanId", "parentSpanId"):
        body[key] = draw(_id_forms(body[key]))
    for key in ("startTimeUnixNano", "endTimeUnixNano"):
        body[key] = draw(_int_forms(int(body[key])))
    body["kind"] = draw(_enum_forms(body["kind"], ("SPAN_KIND_", SpanKind(body["kind"]).name)))
    body["status"]["code"] = draw(_enum_forms(2, ("STATUS_CODE_", "ERROR")))
    for attribute in body["attributes"]:
        if "intValue" in attribute["value"]:
            attribute["value"]["intValue"] = draw(_int_forms(int(attribute["value"]["intValue"])))
    if draw(st.booleans()):  # Tempo 1.x naming
        rs = doc["resourceSpans"][0]
        (block,) = rs.pop("scopeSpans")
        rs["instrumentationLibrarySpans"] = [
            {"instrumentationLibrary": block["scope"], "spans": block["spans"]}
        ]
    return doc


@given(doc=_encodings())
@SETTINGS
def test_every_id_int_and_enum_encoding_reads_the_same(doc: dict[str, Any]) -> None:
    """Hex of either case or base64 ids, ints as numbers or strings, enums as numbers or names."""
    assert _one(doc) == BASE_RECORD
    assert _one(doc).parent_span_id == "00f067aa0ba902b7"
    assert _one(doc).status_code is StatusCode.ERROR


def _with_value(value: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"] = [
        {"key": "v", "value": value}
    ]
    return doc


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"stringValue": ""}, ""),
        ({"boolValue": False}, False),
        ({"intValue": "-9223372036854775808"}, -(2**63)),
        ({"intValue": 7}, 7),
        ({"doubleValue": 2}, 2.0),
        ({"doubleValue": "Infinity"}, math.inf),
        ({"doubleValue": "-Infinity"}, -math.inf),
        ({"bytesValue": "AAH-_w"}, "AAH+/w=="),  # URL-safe, unpadded: normalized
        ({"arrayValue": {}}, ()),
        ({"arrayValue": {"values": [{"stringValue": "a"}, {}]}}, ("a", None)),
        (
            {"arrayValue": {"values": [{"arrayValue": {"values": [{"intValue": "1"}]}}]}},
            ("[1]",),
        ),
        (
            {
                "kvlistValue": {
                    "values": [
                        {"key": "z", "value": {"doubleValue": "NaN"}},
                        {"key": "a", "value": {"bytesValue": "AQ=="}},
                        {"key": "m", "value": {"kvlistValue": {}}},
                    ]
                }
            },
            '{"a":"AQ==","m":{},"z":"NaN"}',
        ),
    ],
)
def test_each_any_value_kind_decodes(value: dict[str, Any], expected: object) -> None:
    """Every AnyValue kind: maps and nested arrays become sorted JSON text, bytes base64 text."""
    assert _one(_with_value(value)).attributes["v"] == expected


def test_nan_doubles_decode_as_nan() -> None:
    """proto3 JSON's "NaN" string is the float NaN."""
    value = _one(_with_value({"doubleValue": "NaN"})).attributes["v"]
    assert isinstance(value, float)
    assert math.isnan(value)


def test_an_empty_value_is_left_out() -> None:
    """An AnyValue with no field set is no attribute at all, never a made-up empty value."""
    assert "v" not in _one(_with_value({})).attributes


def test_an_all_zero_parent_is_no_parent() -> None:
    """A parent id of zeros (hex or base64) or empty means a root span."""
    for parent in ("0000000000000000", "AAAAAAAAAAA=", ""):
        doc = copy.deepcopy(BASE)
        doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["parentSpanId"] = parent
        assert _one(doc).parent_span_id is None


def test_a_double_past_its_range_is_a_named_error() -> None:
    """An integer too large for a double (a hand-edited or hostile file) fails with the
    attribute's name, not an OverflowError."""
    with pytest.raises(SourceError, match=r"'v' is a number beyond a double's range"):
        _one(_with_value({"doubleValue": 10**400}))
