"""Faults on the emit path: an exporter that is down or slow, a store that refuses writes (disk full,
permission denied, a path under a file, its directory removed or replaced while running, a write
that dies half way) and shutdown with spans in flight. The application never sees an exception,
every span still reaches the inner processor, spans never point at content that was not stored,
and nothing half-written is ever readable as a valid blob."""

from __future__ import annotations

import errno
import json
import os
import resource
import shutil
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SynchronousMultiSpanProcessor
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from af_otel import names
from af_otel.canonical import canonical_json
from af_otel.errors import BlobDamagedError, BlobNotFoundError, StoreError
from af_otel.processor import ReceiptSpanProcessor
from af_otel.reader.sources import read_spans
from af_otel.reader.verify import verify
from af_otel.reader.view import served_views
from af_otel.store import LocalStore, Store, address_of
from af_otel.store.items import load_items

from .agents import Collecting, provider_with, script
from .test_fork import _in_child


class FailingStore:
    """A real local store behind a switch: while ``failing`` says so, put raises ``error`` instead."""

    def __init__(
        self, inner: LocalStore, error: Callable[[], BaseException], failing: Callable[[int], bool]
    ) -> None:
        self.inner = inner
        self.error = error
        self.failing = failing
        self.puts = 0
        self.refused = 0

    @property
    def url(self) -> str:
        return self.inner.url

    def put(self, data: bytes) -> str:
        self.puts += 1
        if self.failing(self.puts):
            self.refused += 1
            raise self.error()
        return self.inner.put(data)

    def get(self, address: str) -> bytes:
        return self.inner.get(address)

    def has(self, address: str) -> bool:
        return self.inner.has(address)

    def put_json(self, value: object) -> str:
        from af_otel.store.base import encode_json

        return self.put(encode_json(value))

    def get_json(self, address: str) -> object:
        return self.inner.get_json(address)


def _enospc() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _eacces() -> OSError:
    return PermissionError(errno.EACCES, os.strerror(errno.EACCES))


RUNS = 20


def _play(
    store: Store, *, between: Callable[[int], None] = lambda _: None, **options: Any
) -> tuple[InMemorySpanExporter, int]:
    exporter = InMemorySpanExporter()
    processor = ReceiptSpanProcessor(
        SimpleSpanProcessor(exporter), store=store, content="store", **options
    )
    tracer = provider_with(processor).get_tracer("af_otel")  # a writer recording every field
    spans = 0
    for index in range(RUNS):
        between(index)
        run = script(tracer, index)
        run.play()  # the application: any exception here fails the test
        spans += run.span_count
    return exporter, spans


def _check_evidence(spans: Sequence[ReadableSpan], readable: Store) -> dict[str, int]:
    """Every LLM span is minted; every ref and base it names is readable and verified; payloads
    that were lost are named gaps on the reader's views, never a damaged or falsely verified view."""
    tally = {"calls": 0, "refs": 0, "lost": 0, "verified": 0, "reconstructed": 0}
    for span in spans:
        attributes = span.attributes or {}
        if names.EPOCH not in attributes:
            continue
        tally["calls"] += 1
        assert attributes[names.RECEIPT_STATE] == names.STATE_MINTED
        base = attributes.get(names.RUN_BASE)
        if base is not None:
            readable.get(str(base))  # raises if the span names a base that was never stored
        for event in span.events:
            commit = event.attributes or {}
            if event.name != names.COMMIT_EVENT or commit.get(names.COMMIT_VERB) == "delete":
                continue
            ref = commit.get(names.COMMIT_REF)
            if ref is None:
                tally["lost"] += 1
                continue
            tally["refs"] += 1
            data = readable.get(str(ref))
            assert address_of(data) == ref
            payload = readable.get_json(str(ref))
            if isinstance(payload, list):  # messages are stored one blob each (store/items.py)
                payload = load_items(readable, payload)
            assert len(canonical_json(payload)) == commit[names.COMMIT_BYTES]
    for view in served_views(read_spans(list(spans)), store=readable):
        verdict = verify(view)
        assert verdict.status != "damaged", verdict
        tally[str(verdict.status)] += 1
        if verdict.status == "reconstructed":
            # The gap names the missing record (cache-transform and provider-defaults excuse nothing here).
            assert set(view.gap_kinds) & _RECORD_GAPS, (view.gap_kinds, verdict)
    if tally["lost"]:
        assert tally["reconstructed"] > 0
    return tally


_RECORD_GAPS = {names.GAP_NO_CONVERSATION, names.GAP_NO_RUN_LOG, names.GAP_NO_FOLD_BASE}


@pytest.mark.parametrize(
    ("name", "error", "failing"),
    [
        ("disk-full", _enospc, lambda n: True),
        ("permission-denied", _eacces, lambda n: True),
        ("store-error", lambda: StoreError("backend down"), lambda n: True),
        ("flaky-disk-full", _enospc, lambda n: n % 3 == 0),
    ],
)
def test_store_refuses_writes(
    tmp_path: Path, name: str, error: Callable[[], BaseException], failing: Callable[[int], bool]
) -> None:
    """A store whose puts fail (always, or every third): spans flow, receipts mint, no dangling refs."""
    store = FailingStore(LocalStore(tmp_path / "store"), error, failing)
    exporter, expected = _play(store)
    spans = exporter.get_finished_spans()
    assert len(spans) == expected
    assert store.refused > 0
    tally = _check_evidence(spans, store.inner)
    assert tally["calls"] == RUNS * 5
    assert tally["lost"] > 0, name


def test_store_under_a_regular_file(tmp_path: Path) -> None:
    """A store path below a regular file (ENOTDIR; chmod cannot stop root): nothing stored, nothing referenced."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = LocalStore(blocker / "store")
    exporter, expected = _play(store)
    spans = exporter.get_finished_spans()
    assert len(spans) == expected
    tally = _check_evidence(spans, store)
    assert tally["refs"] == 0
    assert tally["lost"] > 0


def test_store_directory_removed_while_running(tmp_path: Path) -> None:
    """The store directory deleted between runs is re-created; every ref still resolves."""
    root = tmp_path / "store"
    store = LocalStore(root)

    def remove(index: int) -> None:
        if index % 5 == 4 and root.exists():
            shutil.rmtree(root)

    exporter, expected = _play(store, between=remove)
    spans = exporter.get_finished_spans()
    assert len(spans) == expected
    # Refs written before a removal point at blobs that are gone: the reader names them, never trusts them.
    for view in served_views(read_spans(list(spans)), store=store):
        assert verify(view).status != "damaged"


def test_store_directory_replaced_by_a_file(tmp_path: Path) -> None:
    """The store root replaced by a regular file half way: later puts fail, spans stay whole."""
    root = tmp_path / "store"
    store = LocalStore(root)

    def replace(index: int) -> None:
        if index == RUNS // 2:
            shutil.rmtree(root, ignore_errors=True)
            root.write_text("squatter")

    exporter, expected = _play(store, between=replace)
    spans = exporter.get_finished_spans()
    assert len(spans) == expected
    root.unlink()
    shutil.copytree(tmp_path / "store", root, dirs_exist_ok=True) if (
        tmp_path / "store"
    ).is_dir() else None
    for view in served_views(read_spans(list(spans)), store=store):
        assert verify(view).status != "damaged"


def _half_write_child(root: str) -> dict[str, Any]:
    """In a child: files may grow to 200 bytes only, so every larger blob dies half way through."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))
    store = LocalStore(root)
    big = b"x" * 4096
    try:
        store.put(big)
        direct = "stored"
    except StoreError as exc:
        direct = str(exc)
    exporter = InMemorySpanExporter()
    processor = ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=store, content="store")
    tracer = provider_with(processor).get_tracer("af_otel")  # a writer recording every field
    for index in range(5):
        run = script(tracer, index)
        run.play()
    refs = [
        str((event.attributes or {}).get(names.COMMIT_REF))
        for span in exporter.get_finished_spans()
        for event in span.events
        if (event.attributes or {}).get(names.COMMIT_REF)
    ]
    lost = sum(
        1
        for span in exporter.get_finished_spans()
        for event in span.events
        if event.name == names.COMMIT_EVENT
        and names.COMMIT_REF not in (event.attributes or {})
        and (event.attributes or {}).get(names.COMMIT_VERB) != "delete"
    )
    return {
        "direct": direct,
        "big": address_of(big),
        "refs": refs,
        "lost": lost,
        "spans": len(exporter.get_finished_spans()),
    }


def test_write_that_dies_half_way(tmp_path: Path) -> None:
    """A blob write cut short (file size limit, as a full disk does mid-write) leaves no blob and no
    temporary file; spans name only blobs that were written whole; a torn blob planted at an
    address reads as damage, never as content."""
    root = tmp_path / "store"
    result = _in_child(lambda: _half_write_child(str(root)))
    assert result["direct"] != "stored"
    assert result["spans"] == 5 * 6
    assert result["lost"] > 0
    store = LocalStore(root)
    with pytest.raises(BlobNotFoundError):
        store.get(result["big"])
    assert list(root.rglob(".tmp.*")) == []
    for ref in result["refs"]:
        assert address_of(store.get(ref)) == ref
    # A torn file at a blob's own path (a crash of some other writer) is damage, never truth.
    digits = result["big"].removeprefix("sha256:")
    torn = root / "sha256" / digits[:2] / digits[2:]
    torn.parent.mkdir(parents=True, exist_ok=True)
    torn.write_bytes(b"x" * 300)
    with pytest.raises(BlobDamagedError):
        store.get(result["big"])


class DownExporter(SpanExporter):
    """An exporter whose backend is down: each export takes ``delay`` seconds, then fails or raises."""

    def __init__(self, delay: float, *, raises: bool) -> None:
        self.delay = delay
        self.raises = raises
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        time.sleep(self.delay)
        if self.raises:
            raise ConnectionError("collector unreachable")
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        pass


@pytest.mark.parametrize("raises", [False, True])
def test_exporter_down_and_queue_full(tmp_path: Path, raises: bool) -> None:
    """A slow failing exporter behind a tiny BatchSpanProcessor queue: the queue overflows and drops,
    af_otel hands every span on, and the application never sees an exception."""
    exporter = DownExporter(0.02, raises=raises)
    batch = BatchSpanProcessor(
        exporter, max_queue_size=8, max_export_batch_size=4, schedule_delay_millis=1
    )
    tee = Collecting(keep=False)
    inner = SynchronousMultiSpanProcessor()
    inner.add_span_processor(tee)
    inner.add_span_processor(batch)
    processor = ReceiptSpanProcessor(inner, store=LocalStore(tmp_path / "store"))
    provider = provider_with(processor)
    tracer = provider.get_tracer("af_otel")  # a writer recording every field
    total = 0
    for index in range(100):
        run = script(tracer, index)
        run.play()
        total += run.span_count
    provider.shutdown()
    assert tee.ended == total
    assert exporter.calls > 0


def test_shutdown_with_spans_in_flight(tmp_path: Path) -> None:
    """Provider shutdown while eight threads are mid-run: no thread sees an exception, and spans that
    end after shutdown are still handed to the inner processor (which drops them)."""
    tee = Collecting(keep=False)
    inner = SynchronousMultiSpanProcessor()
    inner.add_span_processor(tee)
    inner.add_span_processor(
        BatchSpanProcessor(DownExporter(0.001, raises=False), schedule_delay_millis=1)
    )
    processor = ReceiptSpanProcessor(inner, store=LocalStore(tmp_path / "store"))
    provider = provider_with(processor)
    tracer = provider.get_tracer("af_otel")  # a writer recording every field
    failures: list[BaseException] = []
    played = [0] * 8
    started = threading.Barrier(9)

    def worker(slot: int) -> None:
        started.wait()
        try:
            for index in range(slot, 400, 8):
                run = script(tracer, index)
                run.play()
                played[slot] += run.span_count
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    started.wait()
    time.sleep(0.05)
    provider.shutdown()
    for thread in threads:
        thread.join()
    assert failures == []
    assert tee.ended == sum(played)


def test_evidence_on_a_healthy_store(tmp_path: Path) -> None:
    """The same runs on a working store: every payload is referenced, every view verified."""
    store = LocalStore(tmp_path / "store")
    exporter, _ = _play(store)
    tally = _check_evidence(exporter.get_finished_spans(), store)
    assert tally["lost"] == 0
    assert tally["verified"] == RUNS * 5
    assert json.dumps(tally)


def test_span_says_its_payload_was_lost(tmp_path: Path) -> None:
    """A span whose commit payload could not be stored says so itself: ``no-run-log`` on its
    ``af.gaps`` (its changes are incomplete), while spans whose payloads were stored do not."""
    # Every 11th write fails: a call writes a blob per new message plus their list, so failures
    # rarer than that leave some calls whole.
    store = FailingStore(LocalStore(tmp_path / "store"), _enospc, lambda n: n % 11 == 0)
    exporter, _ = _play(store)
    flagged = clean = 0
    for span in exporter.get_finished_spans():
        attributes = span.attributes or {}
        if names.EPOCH not in attributes:
            continue
        lost = any(
            event.name == names.COMMIT_EVENT
            and (event.attributes or {}).get(names.COMMIT_VERB) != "delete"
            and names.COMMIT_REF not in (event.attributes or {})
            and names.COMMIT_VALUE not in (event.attributes or {})
            for event in span.events
        )
        gaps = tuple(attributes.get(names.GAPS, ()))
        assert (names.GAP_NO_RUN_LOG in gaps) == lost, (lost, gaps)
        flagged += lost
        clean += not lost
    assert flagged > 0
    assert clean > 0
