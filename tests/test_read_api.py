"""The read-back API as a user first calls it: ``af_otel.verify(af_otel.read_spans(path))``
works, and a wrong object passed to `verify` or `served_views` raises TypeError saying what to
pass. Plus the store check readers use (`open_store(..., must_exist=True)`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import af_otel
from af_otel.errors import StoreError
from af_otel.reader import VerdictStatus
from af_otel.store import LocalStore, open_store
from tests.reader.recordings import agent, file_recorder


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, Path]:
    traces, store = tmp_path / "traces.jsonl", tmp_path / "store"
    with file_recorder(traces, LocalStore(store)) as rec:
        agent(rec, "api-run", 3, base={"messages": [{"role": "user", "parts": []}]})
    return traces, store


def test_verify_takes_the_spans_read_spans_gives(recorded: tuple[Path, Path]) -> None:
    """Spans, or views, give one verdict a call in view order, the same as view by view."""
    traces, store = recorded
    one_by_one = [
        af_otel.verify(view)
        for view in af_otel.served_views(af_otel.read_spans(traces), store=store)
    ]
    from_spans = af_otel.verify(af_otel.read_spans(traces), store=str(store))
    from_views = af_otel.verify(af_otel.served_views(af_otel.read_spans(traces), store=store))
    assert list(from_spans) == one_by_one == list(from_views)
    assert [(v.epoch, v.status) for v in from_spans] == [
        (1, VerdictStatus.VERIFIED),
        (2, VerdictStatus.VERIFIED),
        (3, VerdictStatus.VERIFIED),
    ]
    assert af_otel.verify(iter(())) == ()


def test_verify_rebuilds_spans_with_the_default_store_when_none_is_given(
    recorded: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Like `served_views`: without store=, $AF_OTEL_STORE names it."""
    traces, store = recorded
    monkeypatch.setenv("AF_OTEL_STORE", str(store))
    verdicts = af_otel.verify(af_otel.read_spans(traces))
    assert {v.status for v in verdicts} == {VerdictStatus.VERIFIED}


def test_a_wrong_object_raises_type_error_saying_what_to_pass(
    recorded: tuple[Path, Path],
) -> None:
    traces, store = recorded
    views = af_otel.served_views(af_otel.read_spans(traces), store=store)
    records = list(af_otel.read_spans(traces))
    document = json.loads(traces.read_text().splitlines()[0])
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.get_tracer("t").start_span("chat").end()
    cases = [
        (
            af_otel.verify,
            str(traces),
            "verify() cannot read a str; pass the spans read_spans gives",
        ),
        (af_otel.verify, traces, f"e.g. read_spans({str(traces)!r})"),
        (af_otel.verify, document, "a parsed JSON document goes through read_spans(document)"),
        (af_otel.verify, 42, "verify() cannot read a int"),
        (af_otel.verify, [1], "verify() takes spans; item 0 is a int"),
        (af_otel.verify, [views[0], records[0]], "verify() takes views; item 1 is a SpanRecord"),
        (af_otel.served_views, str(traces), "served_views() cannot read a str"),
        (af_otel.served_views, views, "these are served views already: verify them"),
        (
            af_otel.served_views,
            exporter.get_finished_spans(),
            "OpenTelemetry SDK spans go through read_spans(spans)",
        ),
    ]
    for function, argument, said in cases:
        with pytest.raises(TypeError) as caught:
            function(argument)  # type: ignore[operator]
        assert said in str(caught.value), (function, argument)
    with pytest.raises(TypeError, match="a view is built with its store already"):
        af_otel.verify(views[0], store=store)
    provider.shutdown()


def test_open_store_must_exist(tmp_path: Path) -> None:
    """A reader's store must be there: a missing path, a file and an empty URL are refused,
    each saying which; an existing directory and a URL holding blobs open."""
    (tmp_path / "file").write_text("x")
    for url, said in [
        (tmp_path / "missing", "no store directory at"),
        (tmp_path / "file", "is not a directory"),
        ("memory://af-otel-api-test-empty", "nothing is stored under it"),
    ]:
        with pytest.raises(StoreError, match=said):
            open_store(url, must_exist=True)
        open_store(url)  # opening to write is still lazy
    (tmp_path / "there").mkdir()
    open_store(tmp_path / "there", must_exist=True)
    open_store("memory://af-otel-api-test-full").put(b"blob")
    address = "sha256:" + hashlib.sha256(b"blob").hexdigest()
    assert open_store("memory://af-otel-api-test-full", must_exist=True).has(address)
