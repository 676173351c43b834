"""The package's shape: no module over 600 lines, no function over 80 (issue 24's rule for
modules of one idea). A module or function that grows past the line fails here by name."""

from __future__ import annotations

import ast
from pathlib import Path

import af_otel

PACKAGE = Path(af_otel.__file__).parent
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def long_functions(source: str, name: str) -> dict[str, int]:
    """Every function (methods and nested ones too) of ``source`` longer than the limit."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found[f"{name}:{node.lineno} {node.name}"] = length
    return found


def _sources() -> list[tuple[str, str]]:
    return [
        (str(path.relative_to(PACKAGE)), path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def test_no_module_over_600_lines() -> None:
    long = {
        name: lines
        for name, source in _sources()
        if (lines := source.count("\n")) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_over_80_lines() -> None:
    long: dict[str, int] = {}
    for name, source in _sources():
        long |= long_functions(source, name)
    assert long == {}


def test_the_rule_finds_a_long_method_and_spares_a_short_one() -> None:
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    source = f"class C:\n    def long(self):\n{body}\n\n    def short(self):\n        return 1\n"
    assert long_functions(source, "m.py") == {"m.py:2 long": MAX_FUNCTION_LINES + 1}
