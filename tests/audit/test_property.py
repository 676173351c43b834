"""Whatever the day holds, the audit of its rows in the exporter's table gives every call the
verdict the reader gives it read from the OTLP file: days drawn by Hypothesis (runs of any
length, served by one or two writers, calls without receipt, calls outside any run block, which
the processor gives their own trace's run); and any policy judges the audit's results as it
judges the reader's verdicts."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import clickhouse_connect
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from af_otel.audit.calls import CallResult, audit_batches
from af_otel.audit.clickhouse import Table, stream_runs
from af_otel.cli.pipeline import json_lines_provider
from af_otel.processor import run
from af_otel.reader.gaps import SERVED_GAPS
from af_otel.reader.policy import Gate, Policy, judge
from af_otel.reader.sources import read_spans
from af_otel.reader.verify import VerdictStatus, verify
from af_otel.reader.view import served_views
from af_otel.store import LocalStore, Store
from tests.audit.exporter import load_table
from tests.builders import assistant, user
from tests.reader.recordings import Recorder

# A call: which writer serves it, and whether its content is captured.
CALL = st.tuples(st.integers(0, 1), st.booleans())
# A run: its calls, and whether they are served in a run block (else each call is a run of its
# own trace).
RUN = st.tuples(st.lists(CALL, min_size=1, max_size=4), st.booleans())
_DAYS = itertools.count()
POLICY = st.builds(
    Policy,
    require=st.sampled_from([VerdictStatus.VERIFIED, VerdictStatus.RECONSTRUCTED]),
    fail_on=st.frozensets(st.sampled_from(list(SERVED_GAPS)), max_size=3),
    max_reconstructed=st.none() | st.sampled_from([0.0, 20.0, 50.0, 100.0]),
)


@contextmanager
def _writers(folder: Path, store: Store) -> Iterator[list[Recorder]]:
    made = [
        Recorder(store, provider=json_lines_provider(folder / f"w{i}.jsonl", store=store))
        for i in range(2)
    ]
    try:
        yield made
    finally:
        for writer in made:
            writer.close()


def _record(folder: Path, store: Store, runs: list[tuple[list[tuple[int, bool]], bool]]) -> Path:
    with _writers(folder, store) as writers:
        for index, (calls, named) in enumerate(runs):
            history: list[dict[str, Any]] = []
            for turn, (writer, captured) in enumerate(calls):
                history.append(user(f"run {index} question {turn}"))
                if not named:
                    writers[writer].chat(history)
                    continue
                with run(f"prop-{index}"):
                    if captured:
                        writers[writer].chat(history)
                    else:
                        writers[writer].blind_chat()
                history.append(assistant(f"answer {turn}"))
    traces = folder / "traces.jsonl"
    traces.write_text(
        "".join((folder / f"w{i}.jsonl").read_text(encoding="utf-8") for i in range(2)),
        encoding="utf-8",
    )
    return traces


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(runs=st.lists(RUN, min_size=1, max_size=5), policy=POLICY)
def test_any_day_audits_as_the_reader_reads_it(
    tmp_path: Path, runs: list[tuple[list[tuple[int, bool]], bool]], policy: Policy
) -> None:
    """Call for call (run, epoch, span, status, reason), the audit is the reader; the audit's
    results fed to a `Gate` break the rules `judge` finds broken in the reader's verdicts, by
    as many calls, and exit alike."""
    folder = tmp_path / f"day-{next(_DAYS)}"
    folder.mkdir()
    store = LocalStore(folder / "store")
    traces = _record(folder, store, runs)
    views = served_views(tuple(read_spans(str(traces))), store=store)
    verdicts = verify(views)
    expected = sorted(
        (v.run_id or "", v.epoch, v.span_id, d.status.value, d.reason)
        for v, d in zip(views, verdicts, strict=True)
    )
    gate: Gate[CallResult] = Gate(policy)
    url = f"chdb://{folder / 'clickhouse'}"
    client = clickhouse_connect.get_client(dsn=url)
    try:
        load_table(client, traces)
        results = [
            r
            for batch in audit_batches(
                stream_runs(client, Table(url, "default"), None, None), store, source=url
            )
            for r in batch.results
        ]
    finally:
        client.close()
    got = sorted((r.run_id, r.epoch, r.span_id, r.status, r.reason) for r in results)
    assert got == expected
    assert len(got) == sum(len(calls) for calls, _ in runs)
    for result in results:
        gate.add(result, VerdictStatus(result.status), result.gaps)
    audited, read = gate.outcome(), judge(verdicts, policy)
    assert audited.exit_code == read.exit_code
    assert [(b.option, b.count) for b in audited.breaches] == [
        (b.option, b.count) for b in read.breaches
    ]
