"""Jaeger: the ``/api/v3`` OTLP body, the ``/api/traces`` UI JSON, and ``JaegerSource`` by trace id.

The UI JSON is OTLP passed through the Collector's Jaeger translator, which is lossy in known ways
undone here: times are microseconds; kind, status and scope ride as the tags ``span.kind``,
``otel.status_code``, ``otel.scope.name`` and ``otel.scope.version``; events are logs whose ``event`` field is the name;
arrays and maps become JSON text; a trace id whose high half is zero prints as 16 hex digits.
Array text is turned back into a tuple only for the af_otel keys known to be arrays, since any
other string tag may legitimately look like JSON. Dropped-attribute and dropped-event counts do
not survive the translator: records read from this format carry 0.

``/api/v3`` is OTLP, but Jaeger 2.x on Elasticsearch, OpenSearch, Cassandra or Badger stores spans
in the same tag model and serves arrays and maps back as JSON text (``stringValue``); the same
af_otel array keys are turned back there too. A map stays JSON text either way: the attribute
model has no maps.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

import orjson

from af_otel import names
from af_otel.errors import SourceError
from af_otel.reader.records import EventRecord, SpanKind, SpanRecord, StatusCode, freeze_attributes
from af_otel.reader.sources.decoders import (
    Problem,
    array_text,
    base64_text,
    double_value,
    int_value,
    message_field,
)
from af_otel.reader.sources.fetch import (
    ByTraceId,
    TraceApi,
    expect_body,
    get_bytes,
    parse_json,
    with_query,
)
from af_otel.reader.sources.otlp import resource_spans_records
from af_otel.reader.sources.source import Ask, InWindow, OneTrace, refused
from af_otel.reader.sources.stream import NoteKind, SourceFormat, SpanStream
from af_otel.reader.sources.window import DEFAULT_SEARCH_LIMIT, Window

if TYPE_CHECKING:
    from af_otel.reader.records import AttrValue

__all__ = [
    "ARRAY_KEYS",
    "DEFAULT_SEARCH_LIMIT",
    "JaegerSource",
    "jaeger_v1_records",
    "jaeger_v3_records",
]

# The af_otel attributes that are arrays on the span (docs/receipt-spec.md §4, §12, §13); Jaeger
# shows them as JSON text and the reader turns them back.
ARRAY_KEYS: Final = frozenset(
    {
        names.GAPS,
        names.RECEIPT_SYSTEM_PIECES,
        names.RECEIPT_MESSAGES_ADDED,
        names.RECEIPT_TOOLS_NAMES,
        names.RECEIPT_TOOLS_HASHES,
        names.RECEIPT_UNRECORDED,
        names.RECORD_DIFFERS,
        # A run's close record (its epochs are ints, which the JSON text keeps).
        names.RUN_CLOSE_LANES,
        names.RUN_CLOSE_EPOCHS,
        names.RUN_CLOSE_DIGESTS,
    }
)

# Where Jaeger 2.x puts its query warnings on an OTLP span, and the one it writes on a trace cut
# at ``max_trace_size`` ("trace has more than N spans, showing first N spans only").
_WARNINGS_ATTRIBUTE: Final = "@jaeger@warnings"
_TRUNCATED: Final = re.compile(r"trace has more than \d+ spans|truncated")
_V3_TEXT_ARRAYS: Final = ARRAY_KEYS | {_WARNINGS_ATTRIBUTE}

_KINDS: Final = {
    "internal": SpanKind.INTERNAL,
    "server": SpanKind.SERVER,
    "client": SpanKind.CLIENT,
    "producer": SpanKind.PRODUCER,
    "consumer": SpanKind.CONSUMER,
}
_STATUSES: Final = {"OK": StatusCode.OK, "ERROR": StatusCode.ERROR}
# Tags the translator adds from span fields rather than from attributes.
_TAG_KIND: Final = "span.kind"
_TAG_STATUS: Final = "otel.status_code"
_TAG_ERROR: Final = "error"
_TAG_SCOPE: Final = ("otel.scope.name", "otel.library.name")
_TAG_SCOPE_VERSION: Final = ("otel.scope.version", "otel.library.version")
_TAG_DROPPED: Final = frozenset({"otel.status_description", "w3c.tracestate"})
_EVENT_FIELD: Final = "event"
# The translator's service name for a resource with no attributes at all: not a real service.
_NO_SERVICE: Final = "OTLPResourceNoServiceName"


def jaeger_v3_records(
    doc: Mapping[str, object], origin: str, stream: SpanStream
) -> Iterator[SpanRecord]:
    """Records of a ``GET /api/v3/traces/<id>`` body: ``{"result": {"resourceSpans": [...]}}``.

    Jaeger's query adjusters explain themselves in the span attribute ``@jaeger@warnings``; each
    warning becomes a note (a trace cut at the query's ``max_trace_size`` a truncation note).
    """
    result = stream.member(doc.get("result"), dict, f"{origin}: result")
    if result is None:
        return
    for record in resource_spans_records(
        message_field(result, "resourceSpans"),
        origin,
        stream,
        path="result.resourceSpans",
        text_arrays=_V3_TEXT_ARRAYS,
    ):
        warnings = record.attributes.get(_WARNINGS_ATTRIBUTE)
        for warning in warnings if isinstance(warnings, tuple) else (warnings,):
            if warning is not None:
                stream.note(
                    f"{origin}: Jaeger warning on span {record.span_id}: {warning}",
                    _warning_kind(str(warning)),
                )
        yield record


def _warning_kind(warning: str) -> NoteKind:
    return NoteKind.TRUNCATED if _TRUNCATED.search(warning) else NoteKind.WARNING


def jaeger_v1_records(
    doc: Mapping[str, object], origin: str, stream: SpanStream
) -> Iterator[SpanRecord]:
    """Records of a ``GET /api/traces/<id>`` (or search) body: ``{"data": [{"spans", ...}]}``."""
    for error in _list(doc.get("errors")):
        stream.note(f"{origin}: Jaeger reported an error: {error}", NoteKind.ERROR)
    data = stream.member(doc.get("data"), list, f"{origin}: data")
    if data is None:
        return
    index = 0
    for t, trace in enumerate(data):
        if not isinstance(trace, dict):
            stream.problem(f"{origin}: data[{t}] must be an object", unit="span")
            continue
        for warning in _list(trace.get("warnings")):
            text = f"{origin}: Jaeger warning on data[{t}]: {warning}"
            stream.note(text, _warning_kind(str(warning)))
        processes = _Processes(trace.get("processes"))
        for k, span in enumerate(_list(trace.get("spans"))):
            # Jaeger's adjusters (clock skew, duplicate ids) explain themselves per span.
            for warning in _list(span.get("warnings") if isinstance(span, dict) else None):
                text = f"{origin}: Jaeger warning on data[{t}].spans[{k}]: {warning}"
                stream.note(text, _warning_kind(str(warning)))
            try:
                yield _span(span, processes, origin)
            except Problem as exc:
                stream.problem(f"{origin}: span {index} (data[{t}].spans[{k}]): {exc}", unit="span")
            index += 1


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


class _Processes:
    """The trace's process table, each entry decoded once into a resource mapping."""

    __slots__ = ("_decoded", "_raw")

    def __init__(self, raw: object) -> None:
        self._raw = raw if isinstance(raw, dict) else {}
        self._decoded: dict[str, Mapping[str, AttrValue]] = {}

    def resource(self, span: Mapping[str, Any]) -> Mapping[str, AttrValue]:
        inline = span.get("process")  # the embedded-process variant (Jaeger's uiconv, anonymizer)
        if isinstance(inline, dict):
            return _resource(inline)
        pid = span.get("processID")
        if not isinstance(pid, str) or pid not in self._raw:
            raise Problem(f"processID {pid!r} is not in the trace's processes")
        if pid not in self._decoded:
            process = self._raw[pid]
            if not isinstance(process, dict):
                raise Problem(f"process {pid!r} must be an object")
            self._decoded[pid] = _resource(process)
        return self._decoded[pid]


def _resource(process: Mapping[str, Any]) -> Mapping[str, AttrValue]:
    resource = dict(_tags(process.get("tags"), "process.tags"))
    service = process.get("serviceName")
    if isinstance(service, str) and service and service != _NO_SERVICE:
        resource["service.name"] = service
    return freeze_attributes(resource, owned=True)


def _jaeger_id(value: object, digits: int, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise Problem(f"missing {what}")
    if len(value) > digits or any(c not in "0123456789abcdefABCDEF" for c in value):
        raise Problem(f"{what} {value!r} is not up to {digits} hex digits")
    text = value.lower().rjust(digits, "0")
    if text.count("0") == digits:
        raise Problem(f"{what} is all zeros (an invalid id)")
    return text


def _parent(span: Mapping[str, Any], trace_id: str) -> str | None:
    # The translator puts the parent first, as a CHILD_OF reference in the same trace; links
    # follow as FOLLOWS_FROM. The embedded-process variant may carry parentSpanID instead.
    for ref in _list(span.get("references")):
        if (
            isinstance(ref, dict)
            and ref.get("refType") == "CHILD_OF"
            and _jaeger_id(ref.get("traceID"), 32, "references.traceID") == trace_id
        ):
            return _jaeger_id(ref.get("spanID"), 16, "references.spanID")
    parent = span.get("parentSpanID")
    if isinstance(parent, str) and parent.strip("0"):
        return _jaeger_id(parent, 16, "parentSpanID")
    return None


def _span(span: object, processes: _Processes, origin: str) -> SpanRecord:
    if not isinstance(span, dict):
        raise Problem(f"a span must be an object, got {type(span).__name__}")
    trace_id = _jaeger_id(span.get("traceID"), 32, "traceID")
    name = span.get("operationName", "")
    if not isinstance(name, str):
        raise Problem("operationName must be a string")
    tags = _tags(span.get("tags"), "tags")
    kind = SpanKind.UNSPECIFIED
    status = StatusCode.UNSET
    scope = version = ""
    attributes: dict[str, AttrValue] = {}
    for key, value in tags:
        if key == _TAG_KIND and isinstance(value, str) and value in _KINDS:
            kind = _KINDS[value]
        elif key == _TAG_STATUS and isinstance(value, str) and value in _STATUSES:
            status = _STATUSES[value]
        elif key in _TAG_SCOPE and isinstance(value, str):
            scope = value
        elif key in _TAG_SCOPE_VERSION and isinstance(value, str):
            version = value
        elif key in _TAG_DROPPED:
            continue
        elif key == _TAG_ERROR and value is True and status is StatusCode.ERROR:
            continue  # the translator writes `error=true` right after `otel.status_code=ERROR`
        else:
            attributes[key] = value
    if status is StatusCode.UNSET and attributes.get(_TAG_ERROR) is True:
        status = StatusCode.ERROR  # a span from a native Jaeger client: error=true is its status
    start_us = int_value(span.get("startTime"), "startTime", 0)
    duration_us = int_value(span.get("duration"), "duration", 0)
    return SpanRecord(
        trace_id=trace_id,
        span_id=_jaeger_id(span.get("spanID"), 16, "spanID"),
        parent_span_id=_parent(span, trace_id),
        name=name,
        kind=kind,
        start_ns=start_us * 1000,
        end_ns=(start_us + duration_us) * 1000,
        attributes=freeze_attributes(attributes, owned=True),
        events=tuple(_event(log, f"logs[{i}]") for i, log in enumerate(_list(span.get("logs")))),
        resource=processes.resource(span),
        scope=scope,
        status_code=status,
        origin=origin,
        scope_version=version,
    )


def _event(log: object, what: str) -> EventRecord:
    if not isinstance(log, dict):
        raise Problem(f"{what} must be an object")
    name = ""
    attributes: dict[str, AttrValue] = {}
    for key, value in _tags(log.get("fields"), f"{what}.fields"):
        if key == _EVENT_FIELD and isinstance(value, str) and not name:
            name = value
        else:
            attributes[key] = value
    return EventRecord(
        name=name,
        time_ns=int_value(log.get("timestamp"), f"{what}.timestamp", 0) * 1000,
        attributes=freeze_attributes(attributes, owned=True),
    )


def _tags(tags: object, what: str) -> list[tuple[str, AttrValue]]:
    if tags is None:
        return []
    if not isinstance(tags, list):
        raise Problem(f"{what} must be a list")
    out: list[tuple[str, AttrValue]] = []
    for tag in tags:
        if not isinstance(tag, dict) or not isinstance(tag.get("key"), str):
            raise Problem(f"{what} holds an entry without a string key")
        key: str = tag["key"]
        out.append((key, _tag_value(key, tag.get("type", "string"), tag.get("value"), what)))
    return out


def _tag_value(key: str, vtype: object, value: object, what: str) -> AttrValue:
    where = f"{what} {key!r}"
    # The embedded-process variant renders every value as a string; the type still says what it was.
    if vtype == "string":
        if not isinstance(value, str):
            raise Problem(f"{where} must be a string")
        return array_text(value) if key in ARRAY_KEYS else value
    if vtype == "bool":
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
        raise Problem(f"{where} must be a bool")
    if vtype == "int64":
        return int_value(value, where)  # strings outside the JS-safe range
    if vtype == "float64":
        return double_value(value, where)
    if vtype == "binary":
        return base64_text(value, where)
    raise Problem(f"{where} has unknown type {vtype!r}")


@dataclass(frozen=True, slots=True)
class JaegerSource(ByTraceId):
    """Fetch traces by id from Jaeger's query API (needs httpx: ``pip install 'af-otel[live]'``).

    ``url`` is the query service's base URL (``http://jaeger:16686``); ``api`` picks the OTLP
    ``/api/v3/traces`` (Jaeger v2, lossless) or the UI's ``/api/traces`` (lossy, see module doc).
    """

    api: Literal["v3", "v1"] = "v3"

    APIS: ClassVar[Mapping[str, TraceApi]] = {
        "v3": TraceApi("/api/v3/traces/", "result", SourceFormat.JAEGER_V3, jaeger_v3_records),
        "v1": TraceApi("/api/traces/", "data", SourceFormat.JAEGER_V1, jaeger_v1_records),
    }

    def search_url(self, window: Window, service: str, limit: int) -> str:
        """The FindTraces URL ``window`` asks for ``service``."""
        if self.api == "v3":
            # The snake_case parameter names: every Jaeger with /api/v3 accepts them (2.x reads
            # them as aliases of its camelCase ones).
            params: dict[str, str | int] = {
                "query.service_name": service,
                "query.start_time_min": window.start_iso,
                "query.start_time_max": window.end_iso,
                "query.num_traces": limit,
            }
            return with_query(self.url.rstrip("/") + "/api/v3/traces", params)
        params = {
            "service": service,
            "start": window.start_ns // 1000,
            "end": window.end_ns // 1000,
            "limit": limit,
        }
        return with_query(self.url.rstrip("/") + "/api/traces", params)

    def window(
        self,
        window: Window,
        service: str,
        *,
        limit: int = DEFAULT_SEARCH_LIMIT,
        lenient: bool = False,
    ) -> SpanStream:
        """Find ``service``'s traces that started in ``window`` (Jaeger's FindTraces) now.

        Jaeger answers a search with the found traces whole, in one body (``/api/v3``: one
        ``{"result": ...}`` document, or one per line from the older streaming gateway), so
        memory follows ``limit``, not the window. A search that finds nothing is zero spans; one
        that returns ``limit`` traces is noted as truncated.
        """
        if not service:
            raise SourceError(f"{self.url}: a Jaeger search needs a service name")
        url = self.search_url(window, service, limit)
        body = get_bytes(
            url, headers=self.headers, timeout=self.timeout, client=self.client, not_found=None
        )
        fmt = SourceFormat.JAEGER_SEARCH if self.api == "v3" else SourceFormat.JAEGER_V1
        stream = SpanStream(url, fmt, lenient=lenient)
        return stream.feed(self._found(body, url, stream, window, limit))

    @property
    def label(self) -> str:
        return f"Jaeger at {self.url}"

    def read(self, ask: Ask, *, lenient: bool = False) -> SpanStream:
        """`Source.read`: one trace by id, or a window's search (``search``: the service)."""
        if isinstance(ask, OneTrace):
            return self.trace(ask.trace_id, lenient=lenient)
        if isinstance(ask, InWindow):
            return self.window(ask.window, ask.search or "", limit=ask.limit, lenient=lenient)
        raise refused(self, ask, "one trace by id, or a window")

    def _found(
        self, body: bytes | None, url: str, stream: SpanStream, window: Window, limit: int
    ) -> Iterator[SpanRecord]:
        traces: set[str] = set()
        api = self.APIS[self.api]
        for doc in _chunks(body, url):
            for record in api.records(expect_body(doc, url, api.key, stream.format), url, stream):
                if record.trace_id not in traces:
                    traces.add(record.trace_id)
                    stream.traces_read = len(traces)
                yield record
        if len(traces) >= limit:
            stream.note(
                f"{url}: Jaeger returned {len(traces)} traces, the search limit; traces beyond it "
                f"in {window} were not read (narrow the window or raise the limit)",
                NoteKind.TRUNCATED,
            )


def _chunks(body: bytes | None, url: str) -> Iterator[object]:
    """The JSON documents of a body: one, or one per line (a streamed gRPC-gateway answer)."""
    if body is None:
        return
    try:
        yield orjson.loads(body)
        return
    except orjson.JSONDecodeError:
        pass
    for line in body.splitlines():
        if line.strip():
            yield parse_json(line, url)
