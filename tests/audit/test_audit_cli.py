"""``af-otel audit`` end to end on a generated day in embedded chDB (the exporter's DDL, rows as
the exporter writes them), held against ``af-otel verify`` on the same spans as OTLP JSON lines:
the same verdicts, shards that split the day, results written once per call, damage exits 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from af_otel.cli import main
from tests.audit.conftest import Loaded
from tests.audit.day import BLIND_RUN, LANES_RUN, TAMPERED_EPOCH, TAMPERED_RUN


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def audit(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, *args: str
) -> tuple[int, list[dict[str, Any]], str]:
    """``audit --json`` on the day: exit code, the rows, stderr (the summary text goes there);
    the summary object that ends stdout is checked and left out."""
    code, out, err = cli(
        capsys,
        "audit",
        "--clickhouse",
        loaded.url,
        "--store",
        str(loaded.day.store),
        "--json",
        *args,
    )
    lines = [json.loads(line) for line in out.splitlines()]
    if lines:  # no summary when nothing was read (exit 2 or 3)
        assert lines[-1]["type"] == "summary"
        assert lines[-1]["exit"] == code
        lines.pop()
    assert all("type" not in line for line in lines)
    return code, lines, err


def verified(
    capsys: pytest.CaptureFixture[str], traces: Path, store: Path
) -> tuple[int, list[Any]]:
    """``verify --json`` on a file: exit code and the verdict objects (not the summary)."""
    code, out, _ = cli(capsys, "verify", str(traces), "--store", str(store), "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    return code, [line for line in lines if line["type"] == "verdict"]


def key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["run_id"], row["epoch"], row["span_id"], row["status"], row["reason"])


def last_counts(text: str) -> str:
    """What the last line says after its source: ``A verified, B reconstructed, C damaged``."""
    return text.strip().splitlines()[-1].split(": ", 1)[1]


def test_audit_gives_the_verdicts_verify_gives(
    capsys: pytest.CaptureFixture[str], loaded: Loaded
) -> None:
    """Call for call, the audit's status and reason are verify's on the same spans as a file."""
    code, rows, _ = audit(capsys, loaded)
    verify_code, verdicts = verified(capsys, loaded.day.traces, loaded.day.store)
    assert code == verify_code == 0
    assert sorted(map(key, rows)) == sorted(map(key, verdicts))
    runs = {row["run_id"] for row in rows}
    assert {TAMPERED_RUN, LANES_RUN, BLIND_RUN} <= runs
    blind = [row for row in rows if row["run_id"] == BLIND_RUN]
    assert [r["status"] for r in blind] == ["reconstructed"]
    assert "no-receipt-on-chart" in blind[0]["gaps"]
    lanes = [row for row in rows if row["run_id"] == LANES_RUN]
    # Each turn's `run` block is a lane of its own (the state is freed after it): one run
    # numbered as one over four lanes of two services.
    assert len({row["lane"] for row in lanes}) == 4
    assert {row["service"] for row in lanes} == {"checkout", "support"}
    assert sorted(row["epoch"] for row in lanes) == [1, 2, 3, 4]
    agent = [row for row in rows if row["run_id"] == TAMPERED_RUN]
    assert len({row["trace_id"] for row in agent}) == len(agent) > 1  # spread over traces


def test_the_last_line_is_verify_s(capsys: pytest.CaptureFixture[str], loaded: Loaded) -> None:
    """Without --json the summary ends on verify's last line, with the same counts."""
    code, out, _ = cli(
        capsys, "audit", "--clickhouse", loaded.url, "--store", str(loaded.day.store)
    )
    _, verify_out, _ = cli(
        capsys, "verify", str(loaded.day.traces), "--store", str(loaded.day.store)
    )
    assert code == 0
    last = out.strip().splitlines()[-1]
    assert last.startswith(
        f"{len(verified(capsys, loaded.day.traces, loaded.day.store)[1])} LLM call(s) in {loaded.url} default.otel_traces: "
    )
    assert last_counts(out) == last_counts(verify_out)
    for heading in ("by status:", "by gap kind:", "by service and model:", "worst runs"):
        assert heading in out
    assert f"  {BLIND_RUN} (support): 0 damaged, 1 reconstructed of 1 call(s)" in out


def test_a_tampered_call_is_damaged_and_exits_1(
    capsys: pytest.CaptureFixture[str], loaded: Loaded
) -> None:
    """The tampered copy: the edited call is damaged, as verify says, and the audit exits 1."""
    code, rows, err = audit(capsys, loaded, "--database", "tampered")
    verify_code, verdicts = verified(capsys, loaded.day.tampered, loaded.day.store)
    assert code == verify_code == 1
    assert sorted(map(key, rows)) == sorted(map(key, verdicts))
    damaged = {(r["run_id"], r["epoch"]) for r in rows if r["status"] == "damaged"}
    assert (TAMPERED_RUN, TAMPERED_EPOCH) in damaged
    assert {run for run, _ in damaged} == {TAMPERED_RUN}
    assert f"  {TAMPERED_RUN} (checkout): " in err  # first among the worst runs


def test_two_shards_split_the_day(capsys: pytest.CaptureFixture[str], loaded: Loaded) -> None:
    """Shards 0/2 and 1/2 are disjoint, each holds whole runs, and together they are the day."""
    _, whole, _ = audit(capsys, loaded)
    _, first, _ = audit(capsys, loaded, "--shard", "0/2")
    _, second, _ = audit(capsys, loaded, "--shard", "1/2")
    assert first
    assert second
    calls = [{(r["trace_id"], r["span_id"]) for r in rows} for rows in (first, second)]
    assert not calls[0] & calls[1]
    assert not {r["run_id"] for r in first} & {r["run_id"] for r in second}
    assert sorted(map(key, first + second)) == sorted(map(key, whole))


def test_workers_give_the_same_rows(capsys: pytest.CaptureFixture[str], loaded: Loaded) -> None:
    """Two worker processes give the rows one process gives, in the same order."""
    _, one, _ = audit(capsys, loaded)
    code, two, _ = audit(capsys, loaded, "--workers", "2")
    assert code == 0
    assert two == one


def test_results_are_one_row_a_call_however_often_audited(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, clickhouse: Any
) -> None:
    """--results writes a row a call; a second audit of the same day leaves one row a call."""
    _, rows, err = audit(capsys, loaded, "--results", "audit_results")
    assert f"results: {len(rows)} row(s) written" in err
    clickhouse.command("SELECT 1")
    table = "default.audit_results"
    assert clickhouse.query(f"SELECT count() FROM {table}").result_rows == [(len(rows),)]
    audit(capsys, loaded, "--results", "audit_results")
    assert clickhouse.query(f"SELECT count() FROM {table} FINAL").result_rows == [(len(rows),)]
    clickhouse.command(f"OPTIMIZE TABLE {table} FINAL")
    stored = clickhouse.query(
        f"SELECT TraceId, SpanId, RunId, Epoch, Status, Reason, GapKinds, Model, ServiceName,"
        f" toUnixTimestamp64Nano(Timestamp) FROM {table}"
    ).result_rows
    assert sorted(stored) == sorted(
        (
            r["trace_id"],
            r["span_id"],
            r["run_id"],
            r["epoch"],
            r["status"],
            r["reason"],
            r["gaps"],
            r["model"],
            r["service"],
            r["time_ns"],
        )
        for r in rows
    )


def test_a_window_before_the_day_has_nothing_to_verify(
    capsys: pytest.CaptureFixture[str], loaded: Loaded
) -> None:
    """A window that holds no call exits 3, as verify on input with no af_otel span does."""
    code, rows, err = audit(
        capsys, loaded, "--start", "2001-01-01T00:00:00Z", "--end", "2001-01-02"
    )
    assert (code, rows) == (3, [])
    assert "nothing to verify" in err


def test_a_window_around_the_day_holds_all_of_it(
    capsys: pytest.CaptureFixture[str], loaded: Loaded
) -> None:
    """--since a day takes every call (the day was recorded just now)."""
    _, whole, _ = audit(capsys, loaded)
    code, rows, _ = audit(capsys, loaded, "--since", "1d")
    assert code == 0
    assert all(row.pop("source").endswith("Z)") for row in rows)  # each names the window
    assert rows == [{k: v for k, v in row.items() if k != "source"} for row in whole]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--clickhouse", "ftp://nowhere"), "--clickhouse ftp://nowhere"),
        (("--clickhouse", "http://127.0.0.1:9"), "--clickhouse http://127.0.0.1:9: "),
        (("--table", "no_such_table"), "no_such_table"),
        (("--shard", "2/2"), "shard 2/2"),
        (("--table", "otel; DROP"), "--table"),
    ],
)
def test_bad_options_exit_2_naming_them(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, args: tuple[str, ...], named: str
) -> None:
    """A URL of another kind, a server that does not answer, a missing table, a shard out of
    range, a table name that is no identifier: exit 2, the option named."""
    options = ["--clickhouse", loaded.url, "--store", str(loaded.day.store), *args]
    try:
        code, _, err = cli(capsys, "audit", *options)
    except SystemExit as exc:  # argparse's usage errors
        code, err = int(str(exc.code)), capsys.readouterr().err
    assert code == 2
    assert named in err


def test_a_store_without_the_day_s_blobs_exits_2(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, tmp_path: Path
) -> None:
    """Given a store that holds none of the blobs the spans refer to, audit refuses as verify does."""
    empty = tmp_path / "empty-store"
    empty.mkdir()
    code, _, err = cli(capsys, "audit", "--clickhouse", loaded.url, "--store", str(empty))
    verify_code, _, verify_err = cli(
        capsys, "verify", str(loaded.day.traces), "--store", str(empty)
    )
    assert code == verify_code == 2
    assert f"--store {empty}" in err
    assert f"--store {empty}" in verify_err


def test_a_receipt_edited_in_the_table_is_damaged(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, clickhouse: Any
) -> None:
    """Someone with write access to the table changes one call's receipt (its model): that call
    is damaged, never a gap, and the audit exits 1; the others are as they were."""
    clickhouse.command("CREATE DATABASE IF NOT EXISTS edited")
    clickhouse.command("CREATE TABLE edited.otel_traces AS default.otel_traces")
    clickhouse.command("INSERT INTO edited.otel_traces SELECT * FROM default.otel_traces")
    clickhouse.command(
        "ALTER TABLE edited.otel_traces UPDATE SpanAttributes ="
        " mapUpdate(SpanAttributes, map('af.receipt.model', 'gpt-4o'))"
        f" WHERE SpanAttributes['af.run.id'] = '{TAMPERED_RUN}' AND SpanAttributes['af.epoch'] = '2'"
        " SETTINGS mutations_sync = 1"
    )
    _, clean, _ = audit(capsys, loaded)
    code, rows, _ = audit(capsys, loaded, "--database", "edited")
    assert code == 1
    changed = [
        (r["run_id"], r["epoch"], r["status"]) for r in rows if key(r) not in set(map(key, clean))
    ]
    assert changed == [(TAMPERED_RUN, 2, "damaged")]


def test_an_unreadable_row_fails_naming_it_or_is_skipped_when_lenient(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, clickhouse: Any
) -> None:
    """A row whose trace id is not hex: exit 2 naming its trace and span; with --lenient it is
    skipped, counted and described, and every other call is verified as before."""
    clickhouse.command("CREATE DATABASE IF NOT EXISTS broken")
    clickhouse.command("DROP TABLE IF EXISTS broken.otel_traces")
    clickhouse.command("CREATE TABLE broken.otel_traces AS default.otel_traces")
    clickhouse.command("INSERT INTO broken.otel_traces SELECT * FROM default.otel_traces")
    clickhouse.command(
        "INSERT INTO broken.otel_traces (Timestamp, TraceId, SpanId, SpanName, SpanAttributes)"
        " VALUES (now64(9), 'not-a-trace-id', '00f067aa0ba902b7', 'chat',"
        " map('af.receipt.state', 'minted', 'af.run.id', 'broken-run'))"
    )
    for workers in ("1", "2"):  # raised in a worker process, the error is the same
        code, _, err = audit(capsys, loaded, "--database", "broken", "--workers", workers)
        assert code == 2
        assert "trace not-a-trace-id span 00f067aa0ba902b7" in err
    _, clean, _ = audit(capsys, loaded)
    code, rows, err = audit(capsys, loaded, "--database", "broken", "--lenient")
    assert code == 0
    assert "skipped 1 unreadable row(s)" in err
    assert "trace not-a-trace-id span 00f067aa0ba902b7" in err
    assert sorted(map(key, rows)) == sorted(map(key, clean))


def _doc_queries() -> list[str]:
    """The SELECT queries docs/audit.md gives for charts and alerts on the results table."""
    text = (Path(__file__).parents[2] / "docs" / "audit.md").read_text(encoding="utf-8")
    blocks = [block.split("```", 1)[0] for block in text.split("```sql\n")[1:]]
    return [block.strip() for block in blocks if block.lstrip().startswith("SELECT")]


def test_the_docs_chart_and_alert_queries_run_on_the_results(
    capsys: pytest.CaptureFixture[str], loaded: Loaded
) -> None:
    """The chart counts every call by status; the alert names the service with damaged calls."""
    import clickhouse_connect

    code, rows, _ = audit(capsys, loaded, "--database", "tampered", "--results", "af_audit")
    assert code == 1
    chart, alert = _doc_queries()
    client = clickhouse_connect.get_client(dsn=loaded.url, database="tampered")
    try:
        by_status = client.query(chart).result_rows
        assert {s: sum(n for _, t, n in by_status if t == s) for _, s, _ in by_status} == {
            s: sum(r["status"] == s for r in rows) for s in {r["status"] for r in rows}
        }
        assert client.query(alert).result_rows == [("checkout", 2)]
    finally:
        client.close()


def test_the_json_variant_of_the_table_audits_the_same(
    capsys: pytest.CaptureFixture[str], loaded: Loaded
) -> None:
    """The exporter's JSON variant (attribute columns of type JSON) gives the same verdicts, and
    shards the same runs as the plain table."""
    _, plain, _ = audit(capsys, loaded)
    code, rows, _ = audit(capsys, loaded, "--database", "jsonday")
    assert code == 0
    assert sorted(map(key, rows)) == sorted(map(key, plain))
    _, plain_shard, _ = audit(capsys, loaded, "--shard", "1/2")
    _, json_shard, _ = audit(capsys, loaded, "--database", "jsonday", "--shard", "1/2")
    assert sorted(map(key, json_shard)) == sorted(map(key, plain_shard))
