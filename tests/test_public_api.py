"""The public surface: every name in ``af_otel.__all__`` imports and is documented, and the pure core
(canonical, model, receipts) imports and works with OpenTelemetry unavailable."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import af_otel
from tests.without_otel import run_without_opentelemetry

# The names the receipt core provides; others add theirs to __all__.
CORE = ("canonical_json", "receipt_hash", "mint_receipt", "ReceiptDigests")


def test_all_has_no_duplicates_and_holds_the_core() -> None:
    """__all__ lists each name once and includes the receipt core's contract names."""
    assert len(af_otel.__all__) == len(set(af_otel.__all__))
    assert set(CORE) <= set(af_otel.__all__)


def test_readme_lists_exactly_all() -> None:
    """The README's paragraph on the Python API names each name of __all__, and no other."""
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    paragraph = readme.split("The Python API is what `af_otel.__all__` lists.")[1].split("\n\n")[0]
    listed = set(re.findall(r"`(\w+)`", paragraph))
    assert listed == set(af_otel.__all__)


def test_dir_lists_every_public_name() -> None:
    """dir(af_otel) shows every name of __all__, the lazily loaded emit names before first use."""
    code = "import af_otel, sys; print(sorted(set(af_otel.__all__) - set(dir(af_otel))))"
    code += "; print('af_otel.processor' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.split("\n")[:2] == ["[]", "False"]


def test_public_functions_raise_exported_errors() -> None:
    """Every error class the package defines is exported: what read_spans, verify and the
    store raise can be caught by the name users import."""
    from af_otel import errors

    defined = {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, af_otel.AfOtelError)
    }
    assert defined <= set(af_otel.__all__)


@pytest.mark.parametrize("name", af_otel.__all__)
def test_every_listed_name_imports(name: str) -> None:
    """Each name of __all__ resolves on the package (lazily loaded ones included)."""
    namespace: dict[str, object] = {}
    exec(f"from af_otel import {name}", namespace)  # the spelling users write
    assert namespace[name] is getattr(af_otel, name)


@pytest.mark.parametrize("name", af_otel.__all__)
def test_every_listed_callable_is_documented(name: str) -> None:
    """Each class, function or module of __all__ has a docstring of its own (a dataclass's
    generated signature does not count); constants are documented where they are defined."""
    value = getattr(af_otel, name)
    if not (inspect.isclass(value) or inspect.isroutine(value) or inspect.ismodule(value)):
        return
    doc = value.__doc__ or ""
    assert doc.strip(), f"{name} has no docstring"
    assert not doc.startswith(f"{getattr(value, '__name__', name)}("), (
        f"{name}: generated docstring"
    )


def test_star_import_gives_exactly_all() -> None:
    """`from af_otel import *` binds exactly the names of __all__."""
    namespace: dict[str, object] = {}
    exec("from af_otel import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(af_otel.__all__)


PURE_CORE = """
    import af_otel.canonical
    import af_otel.model
    import af_otel.model.gap_rules
    import af_otel.receipts
    from af_otel import canonical_json, mint_receipt, receipt_hash

    assert not [m for m in sys.modules if m.startswith("opentelemetry")]
    receipt = mint_receipt({"messages": [{"role": "user", "content": "hi"}]}, run_id="r", epoch=1)
    assert receipt.state == "minted", receipt
    assert canonical_json({"b": 1.0, "a": None}) == b'{"a":null,"b":1}'
    assert receipt_hash("run-1", "hello") == "e4d01446ceea21bc"
    print("ok")
"""


def test_pure_core_imports_without_opentelemetry() -> None:
    """With every opentelemetry import failing, the pure core imports, mints and hashes."""
    result = run_without_opentelemetry(PURE_CORE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_blocking_really_blocks() -> None:
    """The blocker used above does make an OpenTelemetry import fail (so the test can fail)."""
    result = run_without_opentelemetry("import opentelemetry.trace")
    assert result.returncode != 0
    assert "blocked for this test: opentelemetry" in result.stderr
