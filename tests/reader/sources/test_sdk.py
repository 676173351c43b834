"""SDK ReadableSpans: read by duck typing, with OTLP's numbering, and without importing OpenTelemetry."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode

from af_otel.errors import SourceError
from af_otel.reader import records
from af_otel.reader.sources import SourceFormat, read_spans

from .helpers import FIXTURES, shapes
from .strategies import sdk_span

API_TO_OTLP = {
    SpanKind.INTERNAL: records.SpanKind.INTERNAL,
    SpanKind.SERVER: records.SpanKind.SERVER,
    SpanKind.CLIENT: records.SpanKind.CLIENT,
    SpanKind.PRODUCER: records.SpanKind.PRODUCER,
    SpanKind.CONSUMER: records.SpanKind.CONSUMER,
}


@pytest.mark.parametrize("kind", list(API_TO_OTLP))
def test_api_kinds_become_otlp_kinds(kind: SpanKind) -> None:
    """The API numbers kinds from INTERNAL = 0; records use OTLP's, where 0 is UNSPECIFIED."""
    (record,) = read_spans([sdk_span({}, kind=kind)])
    assert record.kind is API_TO_OTLP[kind]


def test_origins_count_the_spans() -> None:
    """Each record's origin is ReadableSpan[i], in the order given."""
    stream = read_spans(shapes.build_spans())
    assert stream.format is SourceFormat.SDK
    assert [r.origin for r in stream] == [f"ReadableSpan[{i}]" for i in range(9)]


def _unended() -> ReadableSpan:
    context = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=False)
    return ReadableSpan(
        name="still running",
        context=context,
        start_time=1,
        end_time=None,
        status=Status(StatusCode.UNSET),
    )


def test_an_unended_span_is_named() -> None:
    """A span that has not ended raises naming its index and name; lenient skips it."""
    spans = [sdk_span({"a": 1}), _unended()]
    with pytest.raises(
        SourceError, match=r"^ReadableSpan\[1\] 'still running': the span has not ended"
    ):
        list(read_spans(spans))
    stream = read_spans(spans, lenient=True)
    assert len(list(stream)) == 1
    assert stream.skipped_spans == 1


def test_values_the_sdk_keeps_follow_the_otlp_rules() -> None:
    """Bytes become base64 text, maps sorted JSON text, sequences tuples, as an OTLP export would."""
    span = sdk_span({"b": b"\x00\xff", "m": {"z": [1, b"\x01"], "a": None}, "s": ["x", "y"]})
    (record,) = read_spans([span])
    assert dict(record.attributes) == {
        "b": "AP8=",
        "m": '{"a":null,"z":[1,"AQ=="]}',
        "s": ("x", "y"),
    }


def test_the_sources_import_without_opentelemetry() -> None:
    """With opentelemetry unimportable, records and every JSON source still load and read."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["opentelemetry"] = None  # any import of it now fails
        from af_otel.reader.sources import read_spans
        count = sum(1 for name in ("otlp-json-file.jsonl", "tempo-v1.json", "jaeger-v1.json")
                    for _ in read_spans({str(FIXTURES)!r} + "/" + name))
        loaded = sorted(m for m in sys.modules if m.startswith(("opentelemetry.", "httpx")))
        print(count, loaded)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "23 []"


def test_the_scope_keeps_its_name_and_version() -> None:
    """A span of a real tracer reads back with its instrumentation scope's name and version."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.get_tracer("my.instrumentation", "2.5.1").start_span("call").end()
    provider.get_tracer("unversioned").start_span("call").end()
    versioned, bare = read_spans(exporter.get_finished_spans())
    assert (versioned.scope, versioned.scope_version) == ("my.instrumentation", "2.5.1")
    assert (bare.scope, bare.scope_version) == ("unversioned", "")
    provider.shutdown()
