"""Span records: frozen, validated, read-only, equal across origins."""

from __future__ import annotations

import dataclasses

import pytest

from af_otel.reader.records import EventRecord, SpanKind, SpanRecord, StatusCode

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def _record(**changes: object) -> SpanRecord:
    fields: dict[str, object] = {
        "trace_id": TRACE,
        "span_id": SPAN,
        "parent_span_id": None,
        "name": "chat",
        "kind": 3,
        "start_ns": 10,
        "end_ns": 25,
        "attributes": {"af.epoch": 1},
        "resource": {"service.name": "svc"},
    }
    fields.update(changes)
    return SpanRecord(**fields)  # type: ignore[arg-type]


def test_defaults_and_coercions() -> None:
    """Kind and status become their enums; events become a tuple; service_name derives."""
    record = _record(events=[EventRecord("af.commit", 12)], status_code=2)
    assert record.kind is SpanKind.CLIENT
    assert record.status_code is StatusCode.ERROR
    assert record.events == (EventRecord("af.commit", 12),)
    assert record.service_name == "svc"
    assert _record(resource={}).service_name is None


@pytest.mark.parametrize(
    "changes",
    [
        {"trace_id": TRACE.upper()},
        {"trace_id": TRACE[:16]},
        {"span_id": "xyz"},
        {"parent_span_id": ""},
        {"kind": 6},
        {"status_code": 3},
    ],
)
def test_invalid_fields_are_refused(changes: dict[str, object]) -> None:
    """Ids must be lowercase hex of the right length; kind and status must be OTLP values."""
    with pytest.raises(ValueError):
        _record(**changes)


def test_attributes_are_read_only_and_private() -> None:
    """The record copies the caller's dict and exposes a view nobody can write through."""
    given = {"af.epoch": 1}
    record = _record(attributes=given)
    given["af.epoch"] = 2
    assert record.attributes["af.epoch"] == 1
    with pytest.raises(TypeError):
        record.attributes["x"] = 1  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.name = "other"  # type: ignore[misc]


def test_origin_is_not_part_of_identity() -> None:
    """The same span read from two places is equal and hashes alike."""
    a, b = _record(origin="trace.jsonl:3"), _record(origin="http://tempo/api/v2/traces/x")
    assert a == b
    assert len({a, b}) == 1
    assert a != _record(attributes={"af.epoch": 2})
