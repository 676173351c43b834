"""``af-otel audit FILES``: OTLP JSON lines (plain, gzip, a glob) read through embedded chDB's
``file()``, with the verdicts ``verify`` gives on the same file, as the table's audit has."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from af_otel.cli import main
from tests.audit.conftest import Loaded
from tests.audit.day import TAMPERED_EPOCH, TAMPERED_RUN


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, Any]]]:
    """A command's exit code and its JSON lines, the closing summary object left out (the
    audit's rows carry no ``type``, verify's verdicts ``"type": "verdict"``)."""
    code = main(list(args))
    out = capsys.readouterr().out
    lines = [json.loads(line) for line in out.splitlines()]
    return code, [line for line in lines if line.get("type") != "summary"]


def key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["run_id"], row["epoch"], row["span_id"], row["status"], row["reason"])


@pytest.mark.parametrize("copy", ["traces", "tampered"])
def test_a_file_audits_as_verify_reads_it(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, copy: str
) -> None:
    """The day's file and its tampered copy: the audit's verdicts are verify's, exit codes too."""
    path = str(getattr(loaded.day, copy))
    store = str(loaded.day.store)
    code, rows = run(capsys, "audit", path, "--store", store, "--json")
    verify_code, verdicts = run(capsys, "verify", path, "--store", store, "--json")
    assert code == verify_code == (1 if copy == "tampered" else 0)
    assert sorted(map(key, rows)) == sorted(map(key, verdicts))
    damaged = {(r["run_id"], r["epoch"]) for r in rows if r["status"] == "damaged"}
    assert ((TAMPERED_RUN, TAMPERED_EPOCH) in damaged) == (copy == "tampered")


def test_a_glob_of_compressed_files_reads_as_the_file(
    capsys: pytest.CaptureFixture[str], loaded: Loaded, tmp_path: Path
) -> None:
    """The day split in two gzip files, named by one glob, gives the day's rows."""
    lines = loaded.day.traces.read_text(encoding="utf-8").splitlines(keepends=True)
    half = len(lines) // 2
    for name, part in (("a", lines[:half]), ("b", lines[half:])):
        with gzip.open(tmp_path / f"day-{name}.jsonl.gz", "wt", encoding="utf-8") as out:
            out.writelines(part)
    shutil.copy(loaded.day.traces, tmp_path / "other.json")  # not matched by the glob
    store = str(loaded.day.store)
    _, whole = run(capsys, "audit", str(loaded.day.traces), "--store", store, "--json")
    code, rows = run(capsys, "audit", str(tmp_path / "day-*.jsonl.gz"), "--store", store, "--json")
    assert code == 0
    assert sorted(map(key, rows)) == sorted(map(key, whole))


def test_shards_of_a_file_split_it(capsys: pytest.CaptureFixture[str], loaded: Loaded) -> None:
    """Shards of a file are disjoint and whole, and shard as the table does (same hash)."""
    path, store = str(loaded.day.traces), str(loaded.day.store)
    _, whole = run(capsys, "audit", path, "--store", store, "--json")
    parts = [
        run(capsys, "audit", path, "--store", store, "--json", "--shard", f"{k}/2")[1]
        for k in (0, 1)
    ]
    from_table = run(
        capsys, "audit", "--clickhouse", loaded.url, "--store", store, "--json", "--shard", "0/2"
    )[1]
    assert sorted(map(key, parts[0] + parts[1])) == sorted(map(key, whole))
    assert not {r["span_id"] for r in parts[0]} & {r["span_id"] for r in parts[1]}
    assert sorted(map(key, parts[0])) == sorted(map(key, from_table))


def test_files_and_a_table_or_results_are_refused(
    capsys: pytest.CaptureFixture[str], loaded: Loaded
) -> None:
    """FILES and --clickhouse exclude each other; --results needs --clickhouse."""
    for extra in (["--clickhouse", loaded.url], ["--results", "t"]):
        with pytest.raises(SystemExit) as exc:
            main(["audit", str(loaded.day.traces), *extra])
        assert exc.value.code == 2
    assert "--clickhouse" in capsys.readouterr().err
