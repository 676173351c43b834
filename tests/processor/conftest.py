"""A real SDK pipeline per test: TracerProvider -> ReceiptSpanProcessor -> SimpleSpanProcessor ->
InMemorySpanExporter, with a local store in the test's own directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from af_otel.store import LocalStore, Store
from tests.builders import Pipeline, make_pipeline

__all__ = ["Pipeline", "make_pipeline"]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return LocalStore(tmp_path / "store")


@pytest.fixture
def pipeline(store: Store) -> Iterator[Pipeline]:
    made = make_pipeline(store)
    yield made
    made.provider.shutdown()
