"""Security: no unsafe deserialization, store paths that cannot escape their root, salted and keyed
receipts that cannot be matched to content without the salt or the key."""

from __future__ import annotations

import ast
import hashlib
import io
import logging
import os
import string
import tokenize
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from af_otel import canonical_json, mint_receipt, names, receipt_hash
from af_otel.errors import InvalidAddressError, StoreError
from af_otel.keys import KeyRing
from af_otel.store import LocalStore, validate_address

PACKAGE = Path(__file__).resolve().parents[2] / "af_otel"

# Modules whose loaders run code or build arbitrary objects from bytes.
_UNSAFE_MODULES = frozenset(
    {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "jsonpickle"}
)
_UNSAFE_BUILTINS = frozenset({"eval", "exec", "compile", "__import__"})
# yaml loaders that can build Python objects; only safe_load / SafeLoader are acceptable.
_UNSAFE_YAML = frozenset(
    {"load", "load_all", "unsafe_load", "unsafe_load_all", "full_load", "full_load_all"}
)


def unsafe_uses(source: str, filename: str) -> list[str]:
    """Every place in ``source`` that imports a code-running deserializer or calls eval/exec."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [
                f"{where} import {a.name}"
                for a in node.names
                if a.name.split(".")[0] in _UNSAFE_MODULES
            ]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in _UNSAFE_MODULES:
                found.append(f"{where} from {node.module} import")
            if node.module.split(".")[0] == "yaml":
                found += [
                    f"{where} from yaml import {a.name}"
                    for a in node.names
                    if a.name in _UNSAFE_YAML
                ]
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in _UNSAFE_BUILTINS:
                found.append(f"{where} {func.id}()")
            if isinstance(func, ast.Attribute) and func.attr in _UNSAFE_YAML:
                owner = func.value
                if isinstance(owner, ast.Name) and owner.id == "yaml":
                    found.append(f"{where} yaml.{func.attr}()")
            if isinstance(func, ast.Attribute) and func.attr in {"loads", "load"}:
                owner = func.value
                if isinstance(owner, ast.Name) and owner.id in _UNSAFE_MODULES:
                    found.append(f"{where} {owner.id}.{func.attr}()")
    return found


def code_names(source: str) -> list[tuple[str, int]]:
    """The identifiers of ``source`` with their lines; strings, comments and docstrings are not code."""
    return [
        (tok.string, tok.start[0])
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.NAME
    ]


class TestNoUnsafeDeserialization:
    def test_package_has_none(self) -> None:
        """No module of the package imports pickle/marshal/shelve or calls eval, exec or yaml.load."""
        files = sorted(PACKAGE.rglob("*.py"))
        assert files, "the package sources were not found"
        found = [
            hit
            for f in files
            for hit in unsafe_uses(f.read_text("utf-8"), str(f.relative_to(PACKAGE.parent)))
        ]
        assert found == []

    def test_package_tokens_have_none(self) -> None:
        """A token scan agrees (names used any way at all, e.g. ``getattr(pickle, ...)``), prose aside."""
        banned = _UNSAFE_MODULES | {"eval", "exec", "unsafe_load", "full_load"}
        hits = [
            f"{f.relative_to(PACKAGE.parent)}:{line}: {name}"
            for f in sorted(PACKAGE.rglob("*.py"))
            for name, line in code_names(f.read_text("utf-8"))
            if name in banned
        ]
        assert hits == []

    @pytest.mark.parametrize(
        "snippet",
        [
            "import pickle",
            "import marshal as m",
            "from pickle import loads",
            "import yaml\nyaml.load(x)",
            "from yaml import unsafe_load",
            "eval('1')",
            "exec('x = 1')",
            "import shelve",
        ],
    )
    def test_scanner_catches(self, snippet: str) -> None:
        """The scanner flags each unsafe form, so a clean result means something."""
        assert unsafe_uses(snippet, "snippet.py")

    def test_scanner_allows_safe_forms(self) -> None:
        """yaml.safe_load, json.loads and orjson.loads are not flagged."""
        assert (
            unsafe_uses(
                "import yaml, json, orjson\nyaml.safe_load(x)\njson.loads(x)\norjson.loads(x)",
                "ok.py",
            )
            == []
        )


_HEX = frozenset("0123456789abcdef")


def _is_valid(text: object) -> bool:
    return (
        isinstance(text, str)
        and len(text) == 71
        and text.startswith("sha256:")
        and set(text[7:]) <= _HEX
    )


_HOSTILE_ADDRESSES = [
    "sha256:../../../../etc/passwd",
    "sha256:" + "../" * 21 + "a",
    "sha256:" + "a" * 62 + "/..",
    "sha256:" + "a" * 64 + "\n",
    "sha256:" + "a" * 63 + "\x00",
    "sha256:" + "A" * 64,
    "sha256:" + "٣" * 64,  # Unicode digits
    "sha256:/" + "a" * 63,
    "SHA256:" + "a" * 64,
    "/etc/passwd",
    "sha256:" + "a" * 65,
    "",
]


class TestStorePaths:
    @given(
        st.one_of(
            st.text(max_size=90),
            st.sampled_from(_HOSTILE_ADDRESSES),
            st.binary(max_size=80),
            st.integers(),
        )
    )
    @settings(max_examples=300)
    def test_only_valid_addresses_pass(self, address: object) -> None:
        """validate_address accepts exactly sha256: + 64 lowercase hex and raises the typed error otherwise."""
        if _is_valid(address):
            assert validate_address(address) == address  # type: ignore[arg-type]
        else:
            with pytest.raises(InvalidAddressError):
                validate_address(address)  # type: ignore[arg-type]

    @pytest.mark.parametrize("address", _HOSTILE_ADDRESSES)
    def test_hostile_address_touches_nothing(self, tmp_path: Path, address: str) -> None:
        """get/has of a traversal address raise InvalidAddressError before any path is touched."""
        root = tmp_path / "store"
        store = LocalStore(root)
        with pytest.raises(InvalidAddressError):
            store.get(address)
        with pytest.raises(InvalidAddressError):
            store.has(address)
        assert not root.exists()

    def test_symlinked_shard_is_refused(self, tmp_path: Path) -> None:
        """A shard directory replaced by a link to outside the root is refused on read and on write."""
        root, outside = tmp_path / "store", tmp_path / "outside"
        outside.mkdir()
        store = LocalStore(root)
        data = b"shard escape"
        address = store.put(data)
        digits = address.removeprefix("sha256:")
        shard = root / "sha256" / digits[:2]
        blob = shard / digits[2:]
        blob.chmod(0o644)
        blob.unlink()
        shard.rmdir()
        shard.symlink_to(outside, target_is_directory=True)
        (outside / digits[2:]).write_bytes(data)  # a valid-looking blob outside the root
        with pytest.raises(StoreError, match="symbolic link"):
            store.get(address)
        # Another writer (a new store object, as in another process) checks the shard and refuses.
        with pytest.raises(StoreError, match="symbolic link"):
            LocalStore(root).put(data)
        # The writer that stored the blob remembers it (docs/store.md): its put opens nothing, so
        # it writes nothing through the link either, and a read still refuses the link.
        assert store.put(data) == address
        with pytest.raises(StoreError, match="symbolic link"):
            store.get(address)
        assert sorted(p.name for p in outside.iterdir()) == [digits[2:]]

    def test_symlinked_blob_is_refused(self, tmp_path: Path) -> None:
        """A blob replaced by a link to a file outside the root (even one with the right bytes) is refused."""
        root, secret = tmp_path / "store", tmp_path / "secret"
        secret.write_bytes(b"top secret")
        store = LocalStore(root)
        address = store.put(b"top secret")
        digits = address.removeprefix("sha256:")
        blob = root / "sha256" / digits[:2] / digits[2:]
        blob.chmod(0o644)
        blob.unlink()
        blob.symlink_to(secret)
        with pytest.raises(StoreError, match="symbolic link"):
            store.get(address)

    def test_symlinked_sha256_dir_gets_no_writes(self, tmp_path: Path) -> None:
        """With <root>/sha256 pointing outside, a put writes nothing outside the root."""
        root, outside = tmp_path / "store", tmp_path / "outside"
        root.mkdir()
        outside.mkdir()
        (root / "sha256").symlink_to(outside, target_is_directory=True)
        store = LocalStore(root)
        with pytest.raises(StoreError):
            store.put(b"should not land outside")
        assert list(outside.iterdir()) == []

    @given(st.lists(st.binary(max_size=256), min_size=1, max_size=20))
    @settings(max_examples=30, deadline=None)
    def test_writes_stay_under_root(self, blobs: list[bytes]) -> None:
        """Every file a run of puts creates is below the root, and nothing above it changes."""
        import tempfile

        with tempfile.TemporaryDirectory() as top:
            base = Path(top)
            (base / "sibling").write_text("untouched")
            store = LocalStore(base / "store")
            for blob in blobs:
                store.put(blob)
            outside = sorted(str(p.relative_to(base)) for p in base.iterdir())
            assert outside == ["sibling", "store"]
            for path in (base / "store").rglob("*"):
                assert path.resolve().is_relative_to((base / "store").resolve())
                assert not path.is_symlink()


_TEXT = st.text(alphabet=string.ascii_letters + string.digits + " ", min_size=0, max_size=40)


def _plain(salt: str, text: str, digits: int = 64) -> str:
    return hashlib.sha256((salt + "\x1f" + text).encode()).hexdigest()[:digits]


class TestSalts:
    def test_empty_salt_refused(self) -> None:
        """receipt_hash refuses an empty salt: an unsalted hash of a short prompt is a guess away."""
        with pytest.raises(ValueError, match="salt"):
            receipt_hash("", "hello")

    def test_empty_run_id_mints_no_receipt(self) -> None:
        """A request without a run id mints no fingerprints at all, only the reason."""
        receipt = mint_receipt(
            {"messages": [{"role": "user", "content": "hi"}]}, run_id="", epoch=1
        )
        assert receipt.state == "absent"
        assert receipt.absent_reason == "no-run-id"
        assert set(receipt.to_attributes()) == {"af.receipt.state", "af.receipt.absent_reason"}

    @given(content=_TEXT, run=st.text(min_size=1, max_size=20))
    @settings(max_examples=100)
    def test_message_entry_is_salted(self, content: str, run: str) -> None:
        """A message's entry hash is not the unsalted (or empty-salted) hash of its canonical JSON."""
        message = {"role": "user", "parts": [{"type": "text", "content": content}]}
        receipt = mint_receipt({"messages": [message]}, run_id=run, epoch=1)
        body = canonical_json(message).decode()
        entry = receipt.messages_added[0]
        assert entry == receipt_hash(run, body, scheme="af-2")
        assert entry != hashlib.sha256(body.encode()).hexdigest()
        assert entry != _plain("", body)


class TestKeyedReceipts:
    @given(
        content=_TEXT,
        run=st.text(alphabet=string.ascii_letters, min_size=1, max_size=12),
        key=st.binary(min_size=16, max_size=48),
    )
    @settings(max_examples=100)
    def test_unkeyed_guessing_fails(self, content: str, run: str, key: bytes) -> None:
        """With a key, the plain H of the true content (right salt, right text) matches no receipt value."""
        message = {"role": "user", "parts": [{"type": "text", "content": content}]}
        request = {"system": "be brief", "messages": [message], "tools": [{"name": "f"}]}
        keyed = mint_receipt(request, run_id=run, epoch=1, key=key)
        plain = mint_receipt(request, run_id=run, epoch=1)
        assert keyed.scheme == "af-2-hmac"
        assert plain.scheme == "af-2"
        keyed_values = {
            keyed.system_hash,
            keyed.messages_chain,
            keyed.digest,
            *keyed.system_pieces,
            *keyed.messages_added,
            *keyed.tools_hashes,
        }
        plain_values = {
            plain.system_hash,
            plain.messages_chain,
            plain.digest,
            *plain.system_pieces,
            *plain.messages_added,
            *plain.tools_hashes,
        }
        # The attacker's best guess is the plain receipt of the true content: it matches nothing.
        assert keyed_values.isdisjoint(plain_values)
        assert receipt_hash(run, canonical_json(message), scheme="af-2") not in keyed_values

    def test_key_never_in_attributes(self) -> None:
        """The key bytes (raw, hex, or as text) appear in no receipt attribute."""
        key = "k3y-" + os.urandom(12).hex()
        receipt = mint_receipt(
            {"messages": [{"role": "user", "content": key[:4]}]}, run_id="r", epoch=1, key=key
        )
        text = repr(receipt.to_attributes())
        assert key not in text
        assert key.encode().hex() not in text


def _key_forms(key: bytes) -> list[bytes]:
    import base64

    return [key, key.hex().encode(), base64.b64encode(key), base64.b64encode(key).rstrip(b"=")]


def _keyed_trace(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    *,
    failing: bool = True,
) -> tuple[bytes, Any]:
    """Three runs through the real processor, keyed from the environment, with a store that fails now
    and then so that error paths log too; the OTLP JSON export is written to a file."""
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from af_otel.processor import ReceiptSpanProcessor, guard

    from .agents import provider_with, script
    from .test_faults import FailingStore, _enospc

    monkeypatch.setattr(guard, "_logged", set())  # each site logs once per process: start afresh
    trace_path = tmp_path / "trace.jsonl"
    store = FailingStore(LocalStore(tmp_path / "store"), _enospc, lambda n: failing and n % 2 == 0)
    with caplog.at_level(logging.DEBUG):
        processor = ReceiptSpanProcessor(
            SimpleSpanProcessor(FileSpanExporter(trace_path)), store=store, content="store"
        )
        provider = provider_with(processor)
        tracer = provider.get_tracer("af_otel")  # a writer recording every field
        for index in range(3):
            script(tracer, index).play()
        provider.shutdown()
    return trace_path.read_bytes(), store


class TestKeyHandling:
    @pytest.mark.parametrize("source", ["env", "file"])
    def test_key_never_exported_or_logged(
        self,
        source: str,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """With AF_OTEL_KEY (or AF_OTEL_KEY_FILE) set, receipts are keyed, and the key in no form
        (raw, hex, base64) appears in any exported attribute or event, nor in any log record."""
        key = b"sekrit-" + os.urandom(16).hex().encode()
        if source == "env":
            monkeypatch.setenv(names.ENV_KEY, key.decode())
        else:
            key_file = tmp_path / "key"
            key_file.write_bytes(key + b"\n")
            monkeypatch.setenv(names.ENV_KEY_FILE, str(key_file))
        exported, _ = _keyed_trace(tmp_path, caplog, monkeypatch)
        assert b'"af-2-hmac"' in exported
        assert b'"af-2"' not in exported
        logged = "\n".join(
            record.getMessage()
            + (logging.Formatter().formatException(record.exc_info) if record.exc_info else "")
            for record in caplog.records
        ).encode()
        assert caplog.records, "the failing store should have logged"
        for form in _key_forms(key):
            assert form not in exported
            assert form not in logged

    def test_unreadable_key_file_warns_without_content(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        """An unreadable AF_OTEL_KEY_FILE warns and falls back to plain receipts; the warning names the path only."""
        monkeypatch.setenv(names.ENV_KEY_FILE, str(tmp_path / "missing-key"))
        monkeypatch.delenv(names.ENV_KEY, raising=False)
        exported, _ = _keyed_trace(tmp_path, caplog, monkeypatch)
        assert b'"af-2"' in exported
        assert any("missing-key" in record.getMessage() for record in caplog.records)

    def test_keyed_trace_verifies_only_with_the_key(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The reader verifies a keyed trace with the key, and refuses (a typed error) without it."""
        from af_otel.errors import ReaderError
        from af_otel.reader.sources import read_spans
        from af_otel.reader.verify import verify
        from af_otel.reader.view import served_views

        key = os.urandom(24).hex()
        monkeypatch.setenv(names.ENV_KEY, key)
        _, store = _keyed_trace(tmp_path, caplog, monkeypatch, failing=False)
        views = served_views(read_spans(str(tmp_path / "trace.jsonl")), store=store.inner)
        assert views
        verified = 0
        for view in views:
            status = verify(view, key=key).status
            assert status != "damaged"
            with pytest.raises(ReaderError):
                verify(view)
            if status == "verified":
                verified += 1
                # af-2 names its key's id: another key is refused by name, not tried
                with pytest.raises(ReaderError, match="key id"):
                    verify(view, key=key + "x")
                ring = KeyRing.of([key + "x", key])
                assert verify(view, key=ring).status == "verified"
        assert verified > 0
