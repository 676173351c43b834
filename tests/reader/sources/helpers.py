"""Shared pieces of the source tests: the committed fixtures, their spans, and a local HTTP server."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit

from af_otel.reader.records import AttrValue, EventRecord, SpanRecord
from af_otel.reader.sources import ARRAY_KEYS, read_spans

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _load_shapes() -> ModuleType:
    # Loaded by path: the fixtures folder is data plus its generator, not a package.
    spec = importlib.util.spec_from_file_location(
        "af_reader_fixture_shapes", FIXTURES / "shapes.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


shapes = _load_shapes()


@cache
def sdk_records() -> tuple[SpanRecord, ...]:
    """The fixture spans, read straight from the SDK's ReadableSpan objects."""
    return tuple(read_spans(shapes.build_spans()))


def by_id(records: Iterable[SpanRecord]) -> dict[tuple[str, str], SpanRecord]:
    """Records keyed by (trace id, span id); a duplicate id fails the test."""
    out: dict[tuple[str, str], SpanRecord] = {}
    for record in records:
        key = (record.trace_id, record.span_id)
        assert key not in out, f"span {key} read twice"
        out[key] = record
    return out


def as_jaeger_v1_sees_it(record: SpanRecord) -> SpanRecord:
    """The record with the losses the Jaeger UI JSON is documented to have."""
    return dataclasses.replace(
        record,
        attributes=_arrays_as_text(record.attributes),
        dropped_attributes_count=0,
        dropped_events_count=0,
        events=tuple(_event_as_jaeger_v1_sees_it(e) for e in record.events),
    )


def _event_as_jaeger_v1_sees_it(event: EventRecord) -> EventRecord:
    """An event as a Jaeger log: the translator writes the name as the field ``event`` only when
    no attribute has that key, so such an attribute stands in for the name (a string is read as
    the name, anything else stays an attribute beside no name)."""
    attributes = _arrays_as_text(event.attributes)
    name = event.name
    if "event" in attributes:
        name = ""
        if isinstance(attributes["event"], str):
            name = str(attributes.pop("event"))
    return dataclasses.replace(event, name=name, attributes=attributes, dropped_attributes_count=0)


def _arrays_as_text(attributes: Mapping[str, AttrValue]) -> dict[str, AttrValue]:
    return {
        key: _json_text(value) if isinstance(value, tuple) and key not in ARRAY_KEYS else value
        for key, value in attributes.items()
    }


def _json_text(value: tuple[object, ...]) -> str:
    return json.dumps(list(value), separators=(",", ":"), ensure_ascii=False)


@contextmanager
def serve(
    routes: Mapping[str, tuple[int, bytes]],
    seen: list[dict[str, str]] | None = None,
    *,
    delay: float = 0.0,
    in_flight: list[int] | None = None,
) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 answering GET paths from ``routes``; yields its base URL.

    A route matches the whole path with its query, else the path alone. Unknown paths get a 404
    with a JSON error body, like Tempo and Jaeger. Each request's headers (and its path, as
    ``:path``) are appended to ``seen`` when given. Each answer waits ``delay`` seconds; the most
    requests served at once is kept in ``in_flight[0]`` when given.
    """
    lock = threading.Lock()
    busy = [0]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if seen is not None:
                seen.append({":path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            with lock:
                busy[0] += 1
                if in_flight is not None:
                    in_flight[0] = max(in_flight[0], busy[0])
            try:
                time.sleep(delay)
                self._answer()
            finally:
                with lock:
                    busy[0] -= 1

        def _answer(self) -> None:
            route = routes.get(self.path) or routes.get(urlsplit(self.path).path)
            status, body = route or (404, b'{"error": "trace not found"}')
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
