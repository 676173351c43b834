"""``--clickhouse`` for the reading commands and ``serve``: a generated day the real processor
enriched, written into chDB with the exporter's exact DDL, reads as the OTLP file it was exported
from: ``verify`` gives the same verdicts and exit code (a tampered call damaged, exit 1),
``served`` the same views, ``--trace`` and a window the calls of what they ask, and ``serve``
the same evidence page data."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from af_otel import names
from af_otel.cli import build_parser, main
from af_otel.reader.sources import ClickHouseSource, read_spans
from af_otel.web.command import evidence_from
from tests.audit.conftest import Loaded, load_day
from tests.audit.day import TAMPERED_EPOCH, TAMPERED_RUN

# What may differ between the two reads of one call: where its span was read from.
_WHERE = ("source",)


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    return load_day(tmp_path_factory.mktemp("clickhouse-cli"))


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, Any]], str]:
    """A command's exit code, its JSON lines, and stderr."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def _calls(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every object but the summary, without where it was read, in a stable order."""
    calls = [
        {k: v for k, v in line.items() if k not in _WHERE}
        for line in lines
        if line.get("type") != "summary"
    ]
    return sorted(calls, key=lambda c: json.dumps(c, sort_keys=True))


def _counts(lines: list[dict[str, Any]]) -> Any:
    (summary,) = [line for line in lines if line.get("type") == "summary"]
    return {k: v for k, v in summary.items() if k != "read"}


@pytest.mark.parametrize(("database", "copy"), [("default", "traces"), ("tampered", "tampered")])
def test_verify_reads_the_table_as_the_file(
    capsys: pytest.CaptureFixture[str], day: Loaded, database: str, copy: str
) -> None:
    """Call for call the verdicts, the counts and the exit code of the table are the file's;
    the tampered copy's edited call is damaged and both exit 1."""
    store = str(day.day.store)
    code, table, _ = cli(
        capsys, "verify", "--clickhouse", day.url, "--database", database, "--store", store,
        "--json",
    )  # fmt: skip
    file_code, from_file, _ = cli(
        capsys, "verify", str(getattr(day.day, copy)), "--store", store, "--json"
    )
    assert code == file_code == (1 if copy == "tampered" else 0)
    assert _calls(table) == _calls(from_file)
    assert len(_calls(table)) > 20
    assert _counts(table) == _counts(from_file)
    damaged = {(c["run_id"], c["epoch"]) for c in _calls(table) if c["status"] == "damaged"}
    assert ((TAMPERED_RUN, TAMPERED_EPOCH) in damaged) == (copy == "tampered")
    assert {run for run, _ in damaged} <= {TAMPERED_RUN}


def test_the_last_line_names_the_table(capsys: pytest.CaptureFixture[str], day: Loaded) -> None:
    """Without --json, verify's last line gives the file's counts for the table it read."""
    store = str(day.day.store)
    assert main(["verify", "--clickhouse", day.url, "--store", store]) == 0
    table = capsys.readouterr().out.strip().splitlines()[-1]
    assert main(["verify", str(day.day.traces), "--store", store]) == 0
    from_file = capsys.readouterr().out.strip().splitlines()[-1]
    assert table.startswith(f"{len(list(_llm_spans(day)))} LLM call(s) in ")
    assert f"{day.url} default.otel_traces" in table
    assert table.split(": ", 1)[1] == from_file.split(": ", 1)[1]


def _llm_spans(day: Loaded) -> list[Any]:
    return [
        s
        for s in read_spans(str(day.day.traces))
        if names.RECEIPT_STATE in s.attributes and s.name != names.RUN_CLOSE
    ]


@pytest.mark.parametrize("database", ["default", "jsonday"])
def test_served_shows_the_file_s_views(
    capsys: pytest.CaptureFixture[str], day: Loaded, database: str
) -> None:
    """``served --json`` of the table (plain or the JSON variant) is the file's, view for view."""
    store = str(day.day.store)
    code, table, _ = cli(
        capsys, "served", "--clickhouse", day.url, "--database", database, "--store", store,
        "--json",
    )  # fmt: skip
    file_code, from_file, _ = cli(capsys, "served", str(day.day.traces), "--store", store, "--json")
    assert code == file_code == 0
    assert table
    assert _calls(table) == _calls(from_file)


def test_a_trace_and_a_window_read_what_they_ask(
    capsys: pytest.CaptureFixture[str], day: Loaded
) -> None:
    """``--trace ID`` verifies the calls of that trace alone; ``--since`` a window holding the
    whole day verifies every call, as the whole table does."""
    store = str(day.day.store)
    _, whole, _ = cli(capsys, "verify", "--clickhouse", day.url, "--store", store, "--json")
    calls = _calls(whole)
    trace = calls[0]["trace_id"]
    code, one, _ = cli(
        capsys, "verify", "--clickhouse", day.url, "--trace", trace, "--store", store, "--json"
    )
    assert code == 0
    assert {c["span_id"] for c in _calls(one)} == {
        c["span_id"] for c in calls if c["trace_id"] == trace
    }
    code, window, _ = cli(
        capsys, "verify", "--clickhouse", day.url, "--since", "1d", "--store", store, "--json"
    )
    assert code == 0
    assert _calls(window) == calls


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["x.jsonl", "--database", "d"], "--database goes with --clickhouse"),
        (
            ["--tempo", "http://t", "--trace", "ab", "--table", "t"],
            "--table goes with --clickhouse",
        ),
        (["x.jsonl", "--clickhouse", "chdb:///d"], "give a FILE or --clickhouse URL, not both"),
        (["--clickhouse", "chdb:///d", "--query", "{}"], "--query goes with --tempo"),
        (["--clickhouse", "chdb:///d", "--table", "a-b"], "--table 'a-b' is not a plain"),
    ],
)
def test_options_that_do_not_go_with_clickhouse_are_named(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each wrong combination is a usage error (exit 2) naming the option, before any read."""
    with pytest.raises(SystemExit) as caught:
        main(["verify", *argv])
    assert caught.value.code == 2
    assert message in capsys.readouterr().err


def _trace_file(lines: Path, trace_id: str, target: Path) -> Path:
    """The OTLP JSON lines of ``lines`` holding only the spans of ``trace_id``."""
    kept = []
    for line in lines.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        for resource in doc.get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                scope["spans"] = [s for s in scope.get("spans", []) if s["traceId"] == trace_id]
        kept.append(json.dumps(doc))
    target.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return target


def test_serve_shows_each_call_as_from_its_trace_s_file(day: Loaded, tmp_path: Path) -> None:
    """``serve --clickhouse`` builds the ClickHouse source and reads a trace per click, as for
    any backend: each LLM call's page data (view and verdict) is what serving a file of that
    trace's spans gives (read alone, a call of a run spread over traces shows what its trace
    holds)."""
    parser = build_parser()
    store = str(day.day.store)
    argv = ["serve", "--clickhouse", day.url, "--database", "tampered", "--store", store]
    table = evidence_from(parser.parse_args(argv))
    assert isinstance(table.source, ClickHouseSource)
    assert table.label == f"ClickHouse at {day.url} (tampered.otel_traces)"
    spans = [s for s in read_spans(str(day.day.tampered)) if names.RECEIPT_STATE in s.attributes]
    statuses = {}
    for span in spans:
        trace_file = _trace_file(
            day.day.tampered, span.trace_id, tmp_path / f"{span.trace_id}.jsonl"
        )
        from_file = evidence_from(parser.parse_args(["serve", str(trace_file), "--store", store]))
        shown = table.span(span.trace_id, span.span_id)
        want = from_file.span(span.trace_id, span.span_id)
        assert replace(shown.view, origin="") == replace(want.view, origin="")
        assert shown.verdict == want.verdict
        assert shown.verdict is not None
        statuses[shown.view.span_id] = shown.verdict.status.value
    assert len(statuses) == len(spans) > 20
