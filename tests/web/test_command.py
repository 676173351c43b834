"""``af-otel serve`` on the command line: one backend or file, the key from the reader's own
options and variables, loopback by default; wrong arguments exit 2 with one line."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from af_otel import names
from af_otel.cli import build_parser, main
from af_otel.cli.options import key_from_args
from af_otel.keys import KeyRing
from af_otel.reader.sources import ClickHouseSource, JaegerSource, PhoenixSource, TempoSource
from af_otel.web.command import DEFAULT_HOST, evidence_from


def parse(*argv: str) -> object:
    return build_parser().parse_args(["serve", *argv])


def test_serve_is_an_af_otel_command() -> None:
    """The subcommand is registered and binds to loopback unless told otherwise."""
    args = parse("traces.jsonl")
    assert args.command == "serve"  # type: ignore[attr-defined]
    assert args.host == DEFAULT_HOST == "127.0.0.1"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("argv", "kind", "label"),
    [
        (["--tempo", "http://t:3200"], TempoSource, "Tempo at http://t:3200"),
        (["--jaeger", "http://j:16686"], JaegerSource, "Jaeger at http://j:16686"),
        (
            ["--phoenix", "http://p:6006", "--project", "agents"],
            PhoenixSource,
            "Phoenix at http://p:6006 (project agents)",
        ),
        (
            ["--clickhouse", "chdb:///d", "--table", "spans"],
            ClickHouseSource,
            "ClickHouse at chdb:///d (default.spans)",
        ),
    ],
)
def test_each_backend_becomes_its_source(argv: list[str], kind: type, label: str) -> None:
    evidence = evidence_from(parse(*argv, "--store", "s"))  # type: ignore[arg-type]
    assert isinstance(evidence.source, kind)
    assert evidence.label == label
    assert evidence.store == "s"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "give one of"),
        (["f.jsonl", "--tempo", "http://t"], "give one of"),
        (["--tempo", "http://t", "--project", "p"], "--project names a Phoenix project"),
        (["f.jsonl", "--database", "d"], "--database names where ClickHouse keeps spans"),
        (["--clickhouse", "chdb:///d", "--table", "a b"], "--table 'a b' is not a plain"),
    ],
)
def test_wrong_arguments_exit_2_with_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err
    assert len(err.strip().splitlines()) == 1


def test_the_key_comes_from_the_readers_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--key-file, else AF_OTEL_KEY: the same sources as af-otel verify."""
    monkeypatch.setenv(names.ENV_KEY, "from-env")
    assert evidence_from(parse("f.jsonl"))._key == KeyRing((b"from-env",))  # type: ignore[arg-type]
    key_file = tmp_path / "key"
    key_file.write_bytes(b"from-file\n")
    evidence = evidence_from(parse("f.jsonl", "--key-file", str(key_file)))  # type: ignore[arg-type]
    assert evidence._key == KeyRing((b"from-file",))


def test_serve_and_verify_share_one_key_option(tmp_path: Path) -> None:
    """The key option is declared once: serve and verify parse --key-file alike."""
    key_file = tmp_path / "key"
    key_file.write_bytes(b"shared\n")
    parser = build_parser()
    for command in ("serve", "verify"):
        args = parser.parse_args([command, "f.jsonl", "--key-file", str(key_file)])
        assert key_from_args(args) == KeyRing((b"shared",))
    actions = {
        name: next(a for a in sub._actions if "--key-file" in a.option_strings)
        for name, sub in _subparsers(parser).items()
        if name in ("serve", "verify", "served", "report")
    }
    assert len({(a.dest, a.help, a.metavar) for a in actions.values()}) == 1
    assert set(actions) == {"serve", "verify", "served", "report"}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    group = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(group.choices)
