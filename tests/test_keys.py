"""The key of keyed receipts is looked up in one place: the writer and the reader find the same
key in the same order, and a key file that cannot be read is a described problem each side acts on
(the processor warns and mints plain receipts, the reading commands stop with exit 2)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from af_otel import names
from af_otel.canonical import key_id
from af_otel.cli import main
from af_otel.keys import KeyProblem, KeyRing, find_key, find_keys
from af_otel.processor import settings as settings_module
from af_otel.processor.settings import resolve_settings
from af_otel.store import LocalStore
from tests.reader.recordings import agent, file_recorder


@pytest.fixture(autouse=True)
def _no_key_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(names.ENV_KEY, raising=False)
    monkeypatch.delenv(names.ENV_KEY_FILE, raising=False)
    monkeypatch.delenv(names.ENV_KEY_RING, raising=False)
    monkeypatch.setattr(settings_module, "_warned", set())


def test_the_named_file_then_the_variable_then_the_variables_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--key-file wins over AF_OTEL_KEY, which wins over AF_OTEL_KEY_FILE; files are stripped."""
    (tmp_path / "cli").write_bytes(b"from-cli\n")
    (tmp_path / "env").write_bytes(b"  from-env-file \n")
    assert find_key() is None
    monkeypatch.setenv(names.ENV_KEY_FILE, str(tmp_path / "env"))
    assert find_key() == b"from-env-file"
    monkeypatch.setenv(names.ENV_KEY, "from-variable")
    assert find_key() == b"from-variable"
    assert find_key(tmp_path / "cli") == b"from-cli"
    assert resolve_settings(store=None).key == b"from-variable"


def test_an_empty_key_file_means_no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of white space holds no key: plain receipts, not an HMAC under an empty key."""
    (tmp_path / "blank").write_bytes(b"\n \n")
    monkeypatch.setenv(names.ENV_KEY_FILE, str(tmp_path / "blank"))
    assert find_key() is None


def test_an_unreadable_key_file_is_a_problem_named_by_its_setting(tmp_path: Path) -> None:
    """The problem names the option that named the file and the path, never a key."""
    problem = find_key(tmp_path / "missing")
    assert isinstance(problem, KeyProblem)
    assert str(problem).startswith(f"--key-file={tmp_path / 'missing'}: ")


def test_the_writer_warns_and_mints_plain_receipts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An unreadable AF_OTEL_KEY_FILE never stops the application: one warning, no key."""
    monkeypatch.setenv(names.ENV_KEY_FILE, str(tmp_path / "missing"))
    with caplog.at_level(logging.WARNING, logger="af_otel"):
        assert resolve_settings(store=None).key is None
    assert names.ENV_KEY_FILE in caplog.text


def test_the_reader_stops_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """af-otel verify with an unreadable AF_OTEL_KEY_FILE exits 2 and says which setting failed."""
    traces, store = tmp_path / "traces.jsonl", LocalStore(tmp_path / "store")
    with file_recorder(traces, store) as recorder:
        agent(recorder, "keyed-run", 1)
    monkeypatch.setenv(names.ENV_KEY_FILE, str(tmp_path / "missing"))
    assert main(["verify", str(traces), "--store", str(tmp_path / "store")]) == 2
    assert f"{names.ENV_KEY_FILE}={tmp_path / 'missing'}" in capsys.readouterr().err


def test_rotated_keys_verify_from_a_ring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs keyed before and after a rotation verify together with both keys, as repeated
    --key-file or as the ring file AF_OTEL_KEY_RING; with one key, the other run's key id is named
    and the command exits 2."""
    store = LocalStore(tmp_path / "store")
    for name, key in (("old", "key-before-rotation"), ("new", "key-after-rotation")):
        with file_recorder(tmp_path / f"{name}.jsonl", store, key=key) as recorder:
            agent(recorder, f"run-{name}", 2)
        (tmp_path / name).write_text(key + "\n")
    traces = tmp_path / "both.jsonl"
    traces.write_bytes(
        (tmp_path / "old.jsonl").read_bytes() + (tmp_path / "new.jsonl").read_bytes()
    )
    common = ["verify", str(traces), "--store", str(tmp_path / "store")]
    both = ["--key-file", str(tmp_path / "old"), "--key-file", str(tmp_path / "new")]
    assert main([*common, *both]) == 0
    capsys.readouterr()
    assert main([*common, "--key-file", str(tmp_path / "new")]) == 2
    assert key_id("key-before-rotation") in capsys.readouterr().err
    ring = tmp_path / "ring"
    ring.write_text("key-before-rotation\n\nkey-after-rotation\n")
    monkeypatch.setenv(names.ENV_KEY_RING, str(ring))
    assert main(common) == 0
    assert find_keys() == KeyRing((b"key-before-rotation", b"key-after-rotation"))
