"""The ``audit`` extra is optional: the package, the reader and the ``af-otel`` command import and
run without chDB, clickhouse-connect or rich, and ``af-otel audit`` says which extra it needs."""

from __future__ import annotations

import pytest

from tests.without_otel import run_without

AUDIT = """
    import sys
    from af_otel.cli import main
    code = main(["audit", "--clickhouse", "chdb:///nowhere", "--store", "nowhere"])
    print("exit", code)
"""


@pytest.mark.parametrize("blocked", ["clickhouse_connect", "rich"])
def test_audit_without_the_extra_names_it_and_exits_2(blocked: str) -> None:
    """With a package of the extra missing, `af-otel audit` tells how to install it: exit 2."""
    result = run_without(AUDIT, blocked=blocked)
    assert result.stdout.strip().splitlines()[-1] == "exit 2", result.stderr
    assert "pip install 'af-otel[audit]'" in result.stderr


def test_a_chdb_url_without_chdb_names_the_missing_package() -> None:
    """clickhouse-connect without chDB: a chdb:// URL is refused naming chdb, exit 2."""
    result = run_without(AUDIT, blocked="chdb")
    assert result.stdout.strip().splitlines()[-1] == "exit 2", result.stderr
    assert "--clickhouse chdb:///nowhere" in result.stderr
    assert "needs the chdb package (pip install 'af-otel[audit]')" in result.stderr


@pytest.mark.parametrize("blocked", ["chdb", "clickhouse_connect", "rich"])
def test_the_package_and_the_command_need_none_of_it(blocked: str) -> None:
    """The package, the reader, and the command's parser (with `audit` in it) import without it,
    and the core package imports no module of the audit."""
    code = """
        import sys
        import af_otel, af_otel.reader, af_otel.cli.read
        print("audit loaded with the core:", any(m.startswith("af_otel.audit") for m in sys.modules))
        from af_otel.cli import build_parser
        build_parser().parse_args(["audit", "--clickhouse", "chdb:///x"])
        print("extra loaded by the parser:", sorted(
            m for m in sys.modules if m.split(".")[0] in ("chdb", "clickhouse_connect", "rich")
        ))
    """
    result = run_without(code, blocked=blocked)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "audit loaded with the core: False",
        "extra loaded by the parser: []",
    ]
