"""The public surface: every name in ``af_otel.__all__`` imports and is documented, and the pure core
(canonical, model, receipts) imports and works with OpenTelemetry unavailable."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import af_otel
from tests.without_otel import run_without

# The names the receipt core provides; others add theirs to __all__.
CORE = ("canonical_json", "receipt_hash", "mint_receipt", "ReceiptDigests")


def _readme_api() -> str:
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    return readme.split("The Python API is what `af_otel.__all__` lists.")[1].split("\n\n")[0]


def test_all_has_no_duplicates_and_holds_the_core() -> None:
    """__all__ lists each name once and includes the receipt core's contract names."""
    assert len(af_otel.__all__) == len(set(af_otel.__all__))
    assert set(CORE) <= set(af_otel.__all__)


def test_readme_lists_exactly_all() -> None:
    """The README's paragraph on the Python API names each name of __all__, and no other."""
    assert set(re.findall(r"`(\w+)`", _readme_api())) == set(af_otel.__all__)


def test_dir_lists_every_public_name() -> None:
    """dir(af_otel) shows every name of __all__, the lazily loaded emit names before first use."""
    code = "import af_otel, sys; print(sorted(set(af_otel.__all__) - set(dir(af_otel))))"
    code += "; print('af_otel.processor' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.split("\n")[:2] == ["[]", "False"]


def test_dir_lists_no_public_name_outside_all() -> None:
    """Every name dir(af_otel) shows is in __all__, a submodule, or private."""
    shown = {
        name
        for name in dir(af_otel)
        if not name.startswith("_") and not inspect.ismodule(getattr(af_otel, name))
    }
    assert shown == set(af_otel.__all__)


def test_every_error_class_is_exported_and_listed_as_an_error() -> None:
    """Every AfOtelError the package defines is in __all__ and in the README's list of errors,
    and that list names nothing else (so a value such as MalformedReceipt is not read as one)."""
    from af_otel import errors

    defined = {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, af_otel.AfOtelError)
    }
    assert defined <= set(af_otel.__all__)
    listed = set(re.findall(r"`(\w+)`", _readme_api().split("Errors,")[1]))
    assert listed == defined


def test_malformed_receipt_is_a_value_and_said_to_be() -> None:
    """MalformedReceipt is a frozen value carrying a reason, not an exception; the README says so."""
    assert not issubclass(af_otel.MalformedReceipt, BaseException)
    malformed = af_otel.MalformedReceipt("cut")
    with pytest.raises(AttributeError):
        malformed.reason = "other"  # type: ignore[misc]
    assert "`MalformedReceipt` (a value, not an exception" in " ".join(_readme_api().split())


def _write_bad_inputs(tmp: Path) -> None:
    (tmp / "garbage.txt").write_text("hello world\n")
    (tmp / "jaeger.json").write_text(
        json.dumps({"data": [{"traceID": "ab", "spans": [{"operationName": 3}], "processes": {}}]})
    )
    (tmp / "otlp.jsonl").write_text(
        json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xx"}]}]}]}) + "\n"
    )


def _bad_calls(tmp: Path) -> dict[str, Callable[[], object]]:
    """The bad calls by name; the files they read are written by _write_bad_inputs, in a test's
    tmp_path (collection only takes the names, and writes nothing)."""
    return {
        "read_spans: no such file": lambda: list(af_otel.read_spans(tmp / "missing.jsonl")),
        "read_spans: no known format": lambda: list(af_otel.read_spans(tmp / "garbage.txt")),
        "read_spans: a bad Jaeger span": lambda: list(af_otel.read_spans(tmp / "jaeger.json")),
        "read_spans: a bad OTLP id": lambda: list(af_otel.read_spans(tmp / "otlp.jsonl")),
        "canonical_json: NaN": lambda: af_otel.canonical_json(float("nan")),
        "Request.from_dict: messages not a list": lambda: af_otel.Request.from_dict(
            {"messages": 3}
        ),
    }


@pytest.mark.parametrize("case", list(_bad_calls(Path("unused"))))
def test_public_functions_raise_exported_errors(case: str, tmp_path: Path) -> None:
    """What read_spans, canonical_json and Request raise on bad input is an AfOtelError whose
    own class users can import from af_otel (no internal ValueError escapes)."""
    _write_bad_inputs(tmp_path)
    with pytest.raises(af_otel.AfOtelError) as raised:
        _bad_calls(tmp_path)[case]()
    kind = type(raised.value)
    assert kind.__name__ in af_otel.__all__
    assert getattr(af_otel, kind.__name__) is kind


def test_mint_and_the_read_functions_answer_bad_input_without_raising(tmp_path: Path) -> None:
    """mint_receipt names unreadable content by a state; served_views and verify of nothing
    return nothing."""
    receipt = af_otel.mint_receipt({"messages": 3}, run_id="r", epoch=1)
    assert (receipt.state, receipt.absent_reason) == ("absent", "content-unreadable")
    assert af_otel.served_views([], store=tmp_path / "none") == ()
    assert af_otel.verify([]) == ()


@pytest.mark.parametrize("name", af_otel.__all__)
def test_every_listed_name_imports(name: str) -> None:
    """Each name of __all__ resolves on the package (lazily loaded ones included)."""
    namespace: dict[str, object] = {}
    exec(f"from af_otel import {name}", namespace)  # the spelling users write
    assert namespace[name] is getattr(af_otel, name)


def _documented(name: str) -> bool:
    value = getattr(af_otel, name)
    return inspect.isclass(value) or inspect.isroutine(value) or inspect.ismodule(value)


@pytest.mark.parametrize("name", [name for name in af_otel.__all__ if _documented(name)])
def test_every_listed_callable_is_documented(name: str) -> None:
    """Each class, function or module of __all__ has a docstring of its own (a dataclass's
    generated signature does not count); constants are documented where they are defined, and
    are not listed here, so that no case passes without a check."""
    value = getattr(af_otel, name)
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
    result = run_without(PURE_CORE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_blocking_really_blocks() -> None:
    """The blocker used above does make an OpenTelemetry import fail (so the test can fail)."""
    result = run_without("import opentelemetry.trace")
    assert result.returncode != 0
    assert "blocked for this test: opentelemetry" in result.stderr
