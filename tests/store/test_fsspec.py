"""The fsspec store: memory:// round trips, the local layout through file://, and both write ways."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from fsspec.implementations.memory import MemoryFileSystem
from hypothesis import given, settings
from hypothesis import strategies as st

from af_otel.canonical import canonical_json
from af_otel.errors import BlobDamagedError, BlobNotFoundError, InvalidAddressError, StoreError
from af_otel.store import FsspecStore, LocalStore, address_of, open_store
from af_otel.store.base import Store

MEMORY = MemoryFileSystem()


class RecordingFS(MemoryFileSystem):
    """The memory file system, recording writes and moves, able to fail a move on request."""

    protocol = ("afrecord",)
    calls: ClassVar[list[tuple[str, str]]] = []
    fail_mv: ClassVar[bool] = False

    def pipe_file(self, path: str, value: bytes, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("pipe", path))
        super().pipe_file(path, value, *args, **kwargs)

    def mv(self, path1: str, path2: str, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("mv", path2))
        if self.fail_mv:
            raise OSError(28, "No space left on device")
        super().mv(path1, path2, *args, **kwargs)


class ObjectStoreFS(RecordingFS):
    """A stand-in under a protocol name af_otel treats as an object store (one PUT is atomic)."""

    protocol = ("r2",)


@pytest.fixture
def url() -> Iterator[str]:
    """A fresh memory:// root, removed afterwards (the memory file system is process-wide)."""
    root = f"afotel-{uuid.uuid4().hex}"
    yield f"memory://{root}"
    if MEMORY.exists(f"/{root}"):
        MEMORY.rm(f"/{root}", recursive=True)


@pytest.fixture
def store(url: str) -> FsspecStore:
    return FsspecStore(url)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Register the recording file systems for this test only."""
    registry = importlib.import_module("fsspec.registry")
    for cls in (RecordingFS, ObjectStoreFS):
        monkeypatch.setitem(registry._registry, cls.protocol[0], cls)
    RecordingFS.calls.clear()
    yield
    RecordingFS.fail_mv = False


def key_of(url: str, address: str) -> str:
    digits = address.removeprefix("sha256:")
    return f"/{url.removeprefix('memory://')}/sha256/{digits[:2]}/{digits[2:]}"


def keys_under(url: str) -> list[str]:
    root = "/" + url.removeprefix("memory://")
    return sorted(MEMORY.find(root)) if MEMORY.exists(root) else []


class TestMemoryRoundTrip:
    @given(data=st.binary(max_size=4096))
    @settings(max_examples=50)
    def test_put_then_get(self, data: bytes) -> None:
        """What goes in comes out, at the SHA-256 address of the bytes."""
        store = FsspecStore(f"memory://afotel-{uuid.uuid4().hex}")
        address = store.put(data)
        assert address == address_of(data)
        assert store.get(address) == data
        assert store.has(address)
        MEMORY.rm("/" + store.url.removeprefix("memory://"), recursive=True)

    def test_layout_and_url(self, store: FsspecStore, url: str) -> None:
        """Blobs sit at <url>/sha256/<2 hex>/<62 hex>, and nothing else is left behind."""
        address = store.put(b"layout")
        assert store.url == url
        assert keys_under(url) == [key_of(url, address)]
        assert MEMORY.cat_file(key_of(url, address)) == b"layout"

    def test_json_round_trip(self, store: FsspecStore) -> None:
        """put_json stores canonical JSON; get_json gives the value back."""
        value = {"b": [1, "two", True], "a": {"nested": "yes"}}
        address = store.put_json(value)
        assert store.get(address) == canonical_json(value)
        assert store.get_json(address) == value

    def test_satisfies_the_store_protocol(self, store: FsspecStore) -> None:
        """The fsspec store can be used wherever a Store is expected."""
        seam: Store = store
        assert seam.get(seam.put(b"seam")) == b"seam"


class TestMemoryChecks:
    def test_write_once(self, store: FsspecStore, url: str) -> None:
        """A second put of the same bytes does not rewrite the stored object, even a damaged one."""
        address = store.put(b"original")
        MEMORY.pipe_file(key_of(url, address), b"tampered")
        assert store.put(b"original") == address
        assert MEMORY.cat_file(key_of(url, address)) == b"tampered"

    def test_damaged_blob(self, store: FsspecStore, url: str) -> None:
        """Bytes that do not hash to their key raise BlobDamagedError naming address and URL."""
        address = store.put(b"original")
        MEMORY.pipe_file(key_of(url, address), b"tampered")
        with pytest.raises(BlobDamagedError) as caught:
            store.get(address)
        assert address in str(caught.value)
        assert "memory://" in str(caught.value)

    def test_missing_blob(self, store: FsspecStore) -> None:
        """An address never stored raises BlobNotFoundError naming it."""
        address = address_of(b"never")
        assert not store.has(address)
        with pytest.raises(BlobNotFoundError, match=address):
            store.get(address)

    def test_temp_keys_are_never_read(self, store: FsspecStore, url: str) -> None:
        """A leftover temporary key beside a blob's key is not a blob."""
        address = address_of(b"payload")
        key = key_of(url, address)
        MEMORY.pipe_file(key.rsplit("/", 1)[0] + "/.tmp.deadbeef.0123", b"payload")
        assert not store.has(address)
        with pytest.raises(BlobNotFoundError):
            store.get(address)

    @given(
        candidate=st.one_of(
            st.text(max_size=90),
            st.sampled_from(["../../x", "/etc/passwd", "sha256:" + "A" * 64, "sha256:" + "a" * 63]),
        )
    )
    @settings(max_examples=100)
    def test_invalid_addresses_touch_nothing(self, candidate: str) -> None:
        """Invalid addresses raise InvalidAddressError and never become keys."""
        store = FsspecStore("memory://afotel-invalid")
        before = sorted(MEMORY.store)
        for call in (store.get, store.has, store.get_json):
            with pytest.raises(InvalidAddressError):
                call(candidate)
        assert sorted(MEMORY.store) == before

    def test_sixteen_threads(self, store: FsspecStore, url: str) -> None:
        """16 threads putting the same and their own blobs agree on addresses and lose none."""
        barrier = threading.Barrier(16)
        failures: list[BaseException] = []

        def work(worker: int) -> None:
            try:
                barrier.wait()
                for i in range(10):
                    store.put(b"shared")
                    store.put(f"{worker}-{i}".encode())
            except BaseException as exc:  # reported below; a thread cannot fail the test itself
                failures.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        assert len(keys_under(url)) == 1 + 16 * 10
        assert store.get(address_of(b"shared")) == b"shared"
        assert all(".tmp." not in key for key in keys_under(url))


class TestWriteWays:
    def test_renaming_file_systems_write_a_temp_key_then_move(self, registered: None) -> None:
        """On a file system with moves, the blob's key is only ever the target of a move."""
        store = FsspecStore(f"afrecord://afotel-{uuid.uuid4().hex}")
        address = store.put(b"moved")
        digits = address.removeprefix("sha256:")
        piped = [path for op, path in RecordingFS.calls if op == "pipe"]
        assert len(piped) == 1
        assert "/.tmp." in piped[0]
        assert RecordingFS.calls[-1] == ("mv", piped[0].rsplit("/", 1)[0] + "/" + digits[2:])
        assert store.get(address) == b"moved"

    def test_failed_move_leaves_no_blob_and_no_temp(self, registered: None) -> None:
        """A move that fails raises StoreError naming the key, and removes the temporary key."""
        root = f"afotel-{uuid.uuid4().hex}"
        store = FsspecStore(f"afrecord://{root}")
        RecordingFS.fail_mv = True
        with pytest.raises(StoreError, match="No space left") as caught:
            store.put(b"doomed")
        assert "afrecord://" in str(caught.value)
        RecordingFS.fail_mv = False
        assert not store.has(address_of(b"doomed"))
        assert [p for p in MEMORY.find(f"/{root}") if ".tmp." in p] == []

    def test_object_stores_write_directly(self, registered: None) -> None:
        """On object stores one PUT is atomic and a move is a copy, so the blob key is put once."""
        store = FsspecStore(f"r2://afotel-{uuid.uuid4().hex}")
        address = store.put(b"direct")
        digits = address.removeprefix("sha256:")
        assert len(RecordingFS.calls) == 1
        op, key = RecordingFS.calls[0]
        assert op == "pipe"
        assert key.endswith(f"/sha256/{digits[:2]}/{digits[2:]}")
        assert store.get(address) == b"direct"


class TestSameLayoutAsLocal:
    def test_file_url_blobs_are_local_blobs(self, tmp_path: Path) -> None:
        """Blobs written through fsspec's file:// are read by the local store, and back."""
        remote = FsspecStore(tmp_path.as_uri())
        local = LocalStore(tmp_path)
        first = remote.put(b"via fsspec")
        second = local.put(b"via local")
        assert local.get(first) == b"via fsspec"
        assert remote.get(second) == b"via local"
        assert [p.name for p in tmp_path.rglob(".tmp.*")] == []


class TestOpening:
    def test_unknown_protocol(self) -> None:
        """A URL no fsspec implementation knows is a StoreError naming the URL."""
        with pytest.raises(StoreError, match="nosuchproto://bucket"):
            open_store("nosuchproto://bucket/x")

    def test_missing_backend(self) -> None:
        """A known protocol whose backend is not installed is a StoreError, not an ImportError."""
        registry = importlib.import_module("fsspec.registry")
        assert "oci" in registry.known_implementations
        assert importlib.util.find_spec("ocifs") is None
        with pytest.raises(StoreError, match="oci://bucket"):
            FsspecStore("oci://bucket/x")

    def test_without_fsspec(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without fsspec installed an fsspec URL says which extra to install."""
        monkeypatch.setitem(sys.modules, "fsspec", None)
        with pytest.raises(StoreError, match=r"af-otel\[fsspec\]"):
            open_store("memory://x")

    def test_local_store_never_imports_fsspec(self, tmp_path: Path) -> None:
        """The embedded store works in a process where fsspec cannot be imported at all."""
        script = (
            "import sys; sys.modules['fsspec'] = None\n"
            "from af_otel.store import open_store\n"
            f"s = open_store({str(tmp_path)!r}); assert s.get(s.put(b'x')) == b'x'\n"
        )
        root = Path(__file__).resolve().parents[2]
        subprocess.run([sys.executable, "-c", script], check=True, cwd=root, timeout=60)
