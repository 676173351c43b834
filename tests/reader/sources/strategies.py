"""Hypothesis strategies and a real SDK span factory for the encoding round-trip tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from af_otel.reader.sources import ARRAY_KEYS

# Tag names the Jaeger translator writes from span fields: an attribute by one of these names
# cannot be told apart from the field in the UI JSON, so the round trips leave them out.
JAEGER_FIELD_TAGS = frozenset(
    {
        "span.kind",
        "otel.status_code",
        "otel.status_description",
        "otel.scope.name",
        "otel.scope.version",
        "otel.library.name",
        "otel.library.version",
        "w3c.tracestate",
        "error",
    }
)

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
keys = text.filter(lambda k: k != "" and k not in JAEGER_FIELD_TAGS)
int64 = st.integers(-(2**63), 2**63 - 1)
finite = st.floats(allow_nan=False, allow_infinity=False)
scalars = st.one_of(text, st.booleans(), int64, finite)
arrays = st.one_of(
    st.lists(text, max_size=4),
    st.lists(st.booleans(), max_size=4),
    st.lists(int64, max_size=4),
    st.lists(finite, max_size=4),
)
maps = st.dictionaries(keys, st.one_of(text, int64, st.booleans()), max_size=3)
values = st.one_of(scalars, arrays, st.binary(max_size=8), maps)
# The af_otel array keys, holding string arrays as the processor writes them.
af_arrays = st.dictionaries(st.sampled_from(sorted(ARRAY_KEYS)), st.lists(text, max_size=4))
# Any other key. Hypothesis also draws text from the string constants of the code under test
# (af_otel's own names among them), so an af_otel array key is left out here by name: drawn with
# a scalar it is no attribute the processor writes, and in the Jaeger UI JSON a string on such a
# key cannot be told from the JSON text of an array.
plain_keys = keys.filter(lambda k: k not in ARRAY_KEYS)
attribute_maps = st.builds(
    lambda plain, af: {**plain, **af}, st.dictionaries(plain_keys, values, max_size=6), af_arrays
)

_EXPORTER = InMemorySpanExporter()
_PROVIDER = TracerProvider(resource=Resource({"service.name": "prop", "host.cores": 4}))
_PROVIDER.add_span_processor(SimpleSpanProcessor(_EXPORTER))
_TRACER = _PROVIDER.get_tracer("af_otel.tests", "1")


def sdk_span(attributes: Mapping[str, Any], *, kind: SpanKind = SpanKind.CLIENT) -> ReadableSpan:
    """One finished SDK span carrying ``attributes`` on itself and on one event."""
    _EXPORTER.clear()
    span = _TRACER.start_span("chat prop", kind=kind, start_time=1_700_000_000_000_001_000)
    span.set_attributes(dict(attributes))
    span.add_event("af.commit", dict(attributes), timestamp=1_700_000_000_000_002_000)
    span.end(end_time=1_700_000_000_000_009_000)
    (finished,) = _EXPORTER.get_finished_spans()
    return finished
