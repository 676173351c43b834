"""Hostile input on the read path: every source raises only af_otel's typed errors, naming where,
or skips and counts what it cannot read when lenient; never a bare Python exception."""

from __future__ import annotations

import copy
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as encode_proto
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel.errors import AfOtelError, UnknownFormatError
from af_otel.reader.records import SpanRecord
from af_otel.reader.sources import read_spans

from .hostile import cyclic, json_junk, junk

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _recorded_spans() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("reliability")
    with tracer.start_as_current_span("agent") as agent:
        agent.set_attribute("af.run.id", "run-1")
        with tracer.start_as_current_span(
            "chat m",
            attributes={
                "af.epoch": 1,
                "af.receipt.state": "minted",
                "af.gaps": ["provider-defaults"],
                "gen_ai.request.temperature": 0.5,
                "flag": True,
            },
        ) as call:
            call.add_event(
                "af.commit",
                {"af.commit.seq": 1, "af.commit.key": "messages", "af.commit.value": "[]"},
            )
    provider.shutdown()
    return exporter


_EXPORTER = _recorded_spans()
OTLP: dict[str, Any] = encode_spans(_EXPORTER.get_finished_spans()).to_dict()
PROTO: bytes = encode_proto(_EXPORTER.get_finished_spans()).SerializeToString()
JAEGER_V1: dict[str, Any] = {
    "data": [
        {
            "traceID": "74606892ea4f2c34a11bd89e2d2c8a5d",
            "spans": [
                {
                    "traceID": "74606892ea4f2c34a11bd89e2d2c8a5d",
                    "spanID": "a5bd05b1b9971d26",
                    "operationName": "chat m",
                    "references": [
                        {
                            "refType": "CHILD_OF",
                            "traceID": "74606892ea4f2c34a11bd89e2d2c8a5d",
                            "spanID": "b5bd05b1b9971d27",
                        }
                    ],
                    "startTime": 1700000000000000,
                    "duration": 1000,
                    "tags": [
                        {"key": "af.epoch", "type": "int64", "value": 1},
                        {"key": "af.gaps", "type": "string", "value": '["provider-defaults"]'},
                        {"key": "span.kind", "type": "string", "value": "client"},
                        {"key": "t", "type": "float64", "value": 0.5},
                    ],
                    "logs": [
                        {
                            "timestamp": 1700000000000001,
                            "fields": [{"key": "event", "type": "string", "value": "af.commit"}],
                        }
                    ],
                    "processID": "p1",
                }
            ],
            "processes": {
                "p1": {
                    "serviceName": "svc",
                    "tags": [{"key": "host", "type": "string", "value": "h"}],
                }
            },
        }
    ]
}
DOCUMENTS: dict[str, dict[str, Any]] = {
    "otlp": OTLP,
    "tempo-v1": {"batches": OTLP["resourceSpans"]},
    "tempo-v2": {"trace": OTLP, "status": "PARTIAL"},
    "jaeger-v3": {"result": OTLP},
    "jaeger-v1": JAEGER_V1,
}


def test_fixtures_read_cleanly() -> None:
    """The unmutated documents read to the same spans, so the mutations below start from valid input."""
    for name, doc in DOCUMENTS.items():
        records = list(read_spans(doc))
        assert records, name
        assert all(isinstance(r, SpanRecord) for r in records)


def _slots(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _slots(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _slots(item, (*path, index))


def mutate(doc: dict[str, Any], slot: int, op: str, value: Any) -> Any:
    """A deep copy of ``doc`` with one place replaced, removed, doubled or renamed."""
    out = copy.deepcopy(doc)
    paths = [p for p in _slots(out) if p]
    path = paths[slot % len(paths)]
    parent: Any = out
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if op == "replace":
        parent[last] = value
    elif op == "delete":
        del parent[last]
    elif op == "double" and isinstance(parent, list):
        parent.insert(last, copy.deepcopy(parent[last]))
    elif op == "rename" and isinstance(parent, dict):
        parent[str(value)[:20]] = parent.pop(last)
    else:
        parent[last] = value
    return out


def drain(source: Any, *, lenient: bool) -> list[SpanRecord] | AfOtelError:
    """All records of ``source``, or the typed error reading it raised (anything else fails the test)."""
    try:
        with read_spans(source, lenient=lenient) as stream:
            return list(stream)
    except AfOtelError as exc:
        return exc


_ops = st.sampled_from(["replace", "replace", "replace", "delete", "double", "rename"])


class TestDocuments:
    @given(
        name=st.sampled_from(sorted(DOCUMENTS)), slot=st.integers(0, 10_000), op=_ops, value=junk
    )
    @SETTINGS
    def test_mutated_document(self, name: str, slot: int, op: str, value: Any) -> None:
        """A document with any one place broken reads, or raises a typed error naming <document>."""
        doc = mutate(DOCUMENTS[name], slot, op, value)
        strict = drain(doc, lenient=False)
        if isinstance(strict, AfOtelError):
            assert "<document>" in str(strict)
        lenient = drain(doc, lenient=True)
        if isinstance(lenient, AfOtelError):
            # Lenient reading refuses only a document whose shape is unknown as a whole.
            assert isinstance(lenient, UnknownFormatError)
            assert isinstance(strict, UnknownFormatError)
        elif not isinstance(strict, AfOtelError):
            assert lenient == strict

    @given(doc=junk)
    @SETTINGS
    def test_any_value(self, doc: Any) -> None:
        """Whatever object is handed to read_spans, only typed errors come out."""
        for lenient in (False, True):
            drain(doc, lenient=lenient)


def _nested_any_value(depth: int, container: str) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(depth):
        if container == "kvlistValue":
            value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
        else:
            value = {"arrayValue": {"values": [value]}}
    return value


def _doc_with_attribute(value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(OTLP)
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"].append(
        {"key": "hostile", "value": value}
    )
    return doc


def _cyclic_any_value() -> dict[str, Any]:
    values: dict[str, Any] = {"values": []}
    values["values"].append({"arrayValue": values})
    return {"kvlistValue": {"values": [{"key": "x", "value": {"arrayValue": values}}]}}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("deep-kvlist-5000", _nested_any_value(5000, "kvlistValue")),
        ("deep-array-5000", _nested_any_value(5000, "arrayValue")),
        ("cyclic-array", _cyclic_any_value()),
        ("int-5000-digits", {"intValue": "9" * 5000}),
        ("nan-int", {"intValue": math.nan}),
        ("nan-double", {"doubleValue": "NaN"}),
        ("bytes-string", {"stringValue": b"\xff"}),
        ("self-cycle", cyclic()),
    ],
)
def test_pathological_attribute_value(name: str, value: Any) -> None:
    """Deep nesting, cycles, huge integers and non-JSON values in an attribute raise a typed error or read."""
    doc = _doc_with_attribute(value)
    strict = drain(doc, lenient=False)
    if isinstance(strict, AfOtelError):
        assert "<document>" in str(strict), name
    lenient = drain(doc, lenient=True)
    assert not isinstance(lenient, AfOtelError), name


def _write(tmp: Path, data: bytes) -> Path:
    path = tmp / "trace.jsonl"
    path.write_bytes(data)
    return path


def _lines(doc: Any, copies: int = 2) -> bytes:
    return b"".join(orjson.dumps(doc) + b"\n" for _ in range(copies))


class TestFiles:
    @given(cut=st.integers(0, 10_000), noise=st.binary(max_size=64), where=st.integers(0, 10_000))
    @SETTINGS
    def test_torn_and_noisy_lines(self, cut: int, noise: bytes, where: int) -> None:
        """A JSON-lines file cut anywhere, with random bytes spliced in, reads or names file and line."""
        data = _lines(OTLP, 3)
        data = data[: cut % (len(data) + 1)]
        at = where % (len(data) + 1)
        data = data[:at] + noise + data[at:]
        with tempfile.TemporaryDirectory() as tmp:
            path = _write(Path(tmp), data)
            strict = drain(str(path), lenient=False)
            if isinstance(strict, AfOtelError):
                assert str(path) in str(strict)
            lenient = drain(str(path), lenient=True)
            if isinstance(lenient, AfOtelError):
                # A file whose only line is torn cannot be told from a cut document: refused whole.
                assert str(path) in str(lenient)

    @given(slot=st.integers(0, 10_000), op=_ops, value=json_junk)
    @SETTINGS
    def test_mutated_lines(self, slot: int, op: str, value: Any) -> None:
        """A mutated span in the middle of a JSON-lines file: strict names the line, lenient keeps the others."""
        bad = mutate(OTLP, slot, op, value)
        data = orjson.dumps(OTLP) + b"\n" + orjson.dumps(bad) + b"\n" + orjson.dumps(OTLP) + b"\n"
        with tempfile.TemporaryDirectory() as tmp:
            path = _write(Path(tmp), data)
            strict = drain(str(path), lenient=False)
            if isinstance(strict, AfOtelError):
                assert f"{path}:2" in str(strict)
            lenient = drain(str(path), lenient=True)
            assert not isinstance(lenient, AfOtelError)
            assert len(lenient) >= 2 * len(list(read_spans(OTLP)))

    @pytest.mark.parametrize(
        ("name", "text"),
        [
            ("invalid-utf8", orjson.dumps(OTLP).replace(b'"chat m"', b'"chat \xff\xfe"')),
            ("nan-literal", orjson.dumps(OTLP).replace(b'"intValue":"1"', b'"intValue":NaN', 1)),
            (
                "duplicate-keys",
                orjson.dumps(OTLP).replace(b'"name":"chat m"', b'"name":"x","name":"chat m"'),
            ),
            ("lone-surrogate-escape", orjson.dumps(OTLP).replace(b'"chat m"', b'"chat \\ud800"')),
            ("deep-array", b'{"resourceSpans":' + b"[" * 5000 + b"]" * 5000 + b"}"),
            ("bom-and-crlf", b"\xef\xbb\xbf" + orjson.dumps(OTLP) + b"\r\n"),
            ("gzip-magic", b"\x1f\x8b\x08\x00garbage"),
            ("nul-bytes", b"\x00" * 64),
        ],
    )
    def test_fixed_hostile_files(self, tmp_path: Path, name: str, text: bytes) -> None:
        """Invalid UTF-8, NaN, duplicate keys, deep nesting and binary files: typed errors naming the file."""
        path = _write(tmp_path, text + b"\n")
        for lenient in (False, True):
            result = drain(str(path), lenient=lenient)
            if isinstance(result, AfOtelError):
                assert str(path) in str(result), name

    @given(
        cut=st.integers(0, 10_000),
        flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
    )
    @SETTINGS
    def test_damaged_protobuf(self, cut: int, flips: list[tuple[int, int]]) -> None:
        """Length-prefixed OTLP protobuf, truncated and with bytes flipped: typed errors naming the file."""
        record = len(PROTO).to_bytes(4, "big") + PROTO
        data = bytearray(record * 2)
        for at, byte in flips:
            data[4 + at % (len(data) - 4)] = byte
        data = data[: max(5, cut % (len(data) + 1))]
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.pb"
            path.write_bytes(bytes(data))
            for lenient in (False, True):
                result = drain(str(path), lenient=lenient)
                if isinstance(result, AfOtelError):
                    assert str(path) in str(result)

    def test_missing_and_unreadable_paths(self, tmp_path: Path) -> None:
        """A missing file, a directory, and a path under a regular file raise SourceError naming the path."""
        regular = tmp_path / "file"
        regular.write_text("x")
        for path in (tmp_path / "missing.jsonl", tmp_path, regular / "below"):
            result = drain(str(path), lenient=True)
            assert isinstance(result, AfOtelError)
            assert str(path) in str(result)


class FakeSpan:
    """An object that looks like an SDK ReadableSpan but holds hostile values."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


class TestSdkSpans:
    @given(
        field=st.sampled_from(
            [
                "context",
                "kind",
                "attributes",
                "start_time",
                "end_time",
                "events",
                "status",
                "name",
                "parent",
                "resource",
            ]
        ),
        value=junk,
    )
    @SETTINGS
    def test_hostile_readable_span(self, field: str, value: Any) -> None:
        """A ReadableSpan-shaped object with one hostile field: a typed error naming ReadableSpan[i], or a skip."""
        real = _EXPORTER.get_finished_spans()[-1]
        fields = {
            name: getattr(real, name)
            for name in (
                "context",
                "kind",
                "attributes",
                "start_time",
                "end_time",
                "events",
                "status",
                "name",
                "parent",
                "resource",
                "instrumentation_scope",
                "dropped_attributes",
                "dropped_events",
            )
        }
        fields[field] = value
        strict = drain([real, FakeSpan(**fields)], lenient=False)
        if isinstance(strict, AfOtelError):
            assert "ReadableSpan[1]" in str(strict)
        lenient = drain([real, FakeSpan(**fields)], lenient=True)
        assert not isinstance(lenient, AfOtelError)
        assert len(lenient) >= 1
