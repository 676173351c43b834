"""One generated day for the audit's tests: recorded once (the real SDK and processor), written
as OTLP JSON lines for ``verify`` and into chDB with the exporter's own DDL for ``audit``: the
clean day in database ``default``, its tampered copy in database ``tampered``, the clean day
again in the exporter's JSON variant of the table in database ``jsonday``. Every client is
closed again (chDB runs one engine path a process at a time), and all of it lives in pytest's
temporary folders."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import clickhouse_connect
import pytest

from tests.audit.day import Day, record_day
from tests.audit.exporter import load_table


@dataclass(frozen=True, slots=True)
class Loaded:
    day: Day
    url: str
    rows: int


def load_day(folder: Path) -> Loaded:
    """Record the day into ``folder`` and write it into chDB there (`Loaded`); the client is
    closed again. Other rooms' tests (the reader's ClickHouse source) build their day with it."""
    day = record_day(folder)
    url = f"chdb://{folder / 'clickhouse'}"
    client = clickhouse_connect.get_client(dsn=url)
    try:
        rows = load_table(client, day.traces)
        load_table(client, day.tampered, database="tampered")
        load_table(client, day.traces, database="jsonday", json_variant=True)
    finally:
        client.close()
    return Loaded(day, url, rows)


@pytest.fixture(scope="session")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    return load_day(tmp_path_factory.mktemp("audit-day"))


@pytest.fixture
def clickhouse(loaded: Loaded) -> Iterator[clickhouse_connect.driver.client.Client]:
    """A client on the day's engine, closed after the test."""
    client = clickhouse_connect.get_client(dsn=loaded.url)
    try:
        yield client
    finally:
        client.close()
