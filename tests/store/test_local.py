"""The local directory store: layout, write-once, verification, atomicity, symlinks, concurrency."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from af_otel.canonical import canonical_json
from af_otel.errors import BlobDamagedError, BlobNotFoundError, InvalidAddressError, StoreError
from af_otel.store import LocalStore, address_of, open_store
from af_otel.store.base import Store

from .helpers import fs_events, tree

REPO = Path(__file__).resolve().parents[2]


def blob_path(root: Path, address: str) -> Path:
    digits = address.removeprefix("sha256:")
    return root / "sha256" / digits[:2] / digits[2:]


def temp_files(root: Path) -> list[Path]:
    return list(root.rglob(".tmp.*")) if root.exists() else []


class TestRoundTrip:
    @given(data=st.binary(max_size=8192))
    @settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
    def test_put_then_get(self, store: LocalStore, data: bytes) -> None:
        """What goes in comes out, at the SHA-256 address of the bytes."""
        address = store.put(data)
        assert address == "sha256:" + hashlib.sha256(data).hexdigest()
        assert store.get(address) == data
        assert store.has(address)

    def test_layout(self, store: LocalStore, root: Path) -> None:
        """A blob lives at <root>/sha256/<first 2 hex>/<remaining 62 hex>, read-only."""
        address = store.put(b"layout")
        path = blob_path(root, address)
        assert path.read_bytes() == b"layout"
        assert len(path.name) == 62
        assert len(path.parent.name) == 2
        assert stat.S_IMODE(path.stat().st_mode) & 0o222 == 0

    def test_root_is_created_on_first_put_only(self, store: LocalStore, root: Path) -> None:
        """Opening, asking and reading an empty store create nothing; the first put does."""
        absent = address_of(b"absent")
        assert not store.has(absent)
        with pytest.raises(BlobNotFoundError):
            store.get(absent)
        assert not root.exists()
        store.put(b"first")
        assert root.is_dir()

    def test_nested_root_is_created(self, tmp_path: Path) -> None:
        """A root several directories deep is created with its parents."""
        store = LocalStore(tmp_path / "a" / "b" / "c")
        assert store.get(store.put(b"deep")) == b"deep"

    def test_bytes_like_values_are_accepted(self, store: LocalStore) -> None:
        """bytearray and memoryview are stored as the bytes they hold."""
        assert store.put(bytearray(b"xy")) == store.put(memoryview(b"xy")) == address_of(b"xy")

    def test_text_is_refused(self, store: LocalStore) -> None:
        """A str is not bytes: the caller must choose an encoding."""
        with pytest.raises(TypeError):
            store.put("text")  # type: ignore[arg-type]

    def test_url_is_the_file_url_of_the_root(self, root: Path) -> None:
        """The url names the absolute root as a file:// URL."""
        assert LocalStore(root).url == root.resolve().as_uri()

    def test_satisfies_the_store_protocol(self, store: LocalStore) -> None:
        """The local store can be used wherever a Store is expected."""
        seam: Store = store
        assert seam.get(seam.put(b"seam")) == b"seam"


class TestJSON:
    @given(
        value=st.recursive(
            st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(st.text(max_size=8), inner, max_size=4)
            ),
            max_leaves=20,
        )
    )
    @settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
    def test_json_round_trip(self, store: LocalStore, value: object) -> None:
        """put_json stores canonical JSON and get_json returns an equal value."""
        address = store.put_json(value)
        assert store.get(address) == canonical_json(value)
        assert store.get_json(address) == value

    def test_key_order_does_not_change_the_address(self, store: LocalStore) -> None:
        """Equal values with keys in another order share one blob."""
        assert store.put_json({"a": 1, "b": "x"}) == store.put_json({"b": "x", "a": 1})

    def test_non_json_blob_raises_store_error(self, store: LocalStore) -> None:
        """get_json on bytes that are not JSON names the address instead of returning junk."""
        address = store.put(b"\xff not json")
        with pytest.raises(StoreError, match=address):
            store.get_json(address)


class TestWriteOnce:
    def test_same_bytes_same_address_one_file(self, store: LocalStore, root: Path) -> None:
        """Putting the same bytes again returns the same address and keeps one file."""
        first = store.put(b"once")
        inode = blob_path(root, first).stat().st_ino
        assert store.put(b"once") == first
        assert blob_path(root, first).stat().st_ino == inode
        assert sum(1 for p in root.rglob("*") if p.is_file()) == 1

    def test_existing_blob_is_not_rewritten(self, store: LocalStore, root: Path) -> None:
        """A second put leaves the file alone, even a damaged one: evidence is not overwritten."""
        address = store.put(b"original")
        path = blob_path(root, address)
        path.chmod(0o644)
        path.write_bytes(b"tampered")
        store.put(b"original")
        assert path.read_bytes() == b"tampered"
        with pytest.raises(BlobDamagedError):
            store.get(address)


class TestVerification:
    @pytest.mark.parametrize("damage", [b"edited!", b"", b"edite", b"edited" + b"\x00"])
    def test_edited_blob_is_damaged(self, store: LocalStore, root: Path, damage: bytes) -> None:
        """Bytes edited on disk raise BlobDamagedError naming the address and the file."""
        address = store.put(b"edited")
        path = blob_path(root, address)
        path.chmod(0o644)
        path.write_bytes(damage)
        with pytest.raises(BlobDamagedError) as caught:
            store.get(address)
        assert address in str(caught.value)
        assert str(path) in str(caught.value)
        with pytest.raises(BlobDamagedError):
            store.get_json(address)

    def test_blob_copied_to_another_address_is_damaged(self, store: LocalStore, root: Path) -> None:
        """A valid blob moved under a different name is still damage, never truth."""
        real = store.put(b"real")
        other = address_of(b"other")
        target = blob_path(root, other)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob_path(root, real).read_bytes())
        assert store.has(other)
        with pytest.raises(BlobDamagedError, match=other):
            store.get(other)

    def test_missing_blob(self, store: LocalStore) -> None:
        """An address never stored raises BlobNotFoundError (a KeyError) naming it."""
        store.put(b"something else")
        for data in (b"never", b"something els"):
            address = address_of(data)
            assert not store.has(address)
            with pytest.raises(BlobNotFoundError, match=address):
                store.get(address)
            with pytest.raises(KeyError):
                store.get(address)

    def test_directory_at_blob_path_is_refused(self, store: LocalStore, root: Path) -> None:
        """Something other than a regular file at a blob's path is a StoreError, not a blob."""
        address = address_of(b"dir")
        blob_path(root, address).mkdir(parents=True)
        with pytest.raises(StoreError, match="not a regular file"):
            store.has(address)
        with pytest.raises(StoreError):
            store.get(address)
        with pytest.raises(StoreError):
            store.put(b"dir")

    def test_fifo_at_blob_path_is_refused_without_blocking(
        self, store: LocalStore, root: Path
    ) -> None:
        """A FIFO planted at a blob's path is refused at once instead of hanging the reader."""
        address = address_of(b"fifo")
        path = blob_path(root, address)
        path.parent.mkdir(parents=True)
        os.mkfifo(path)
        with pytest.raises(StoreError, match="not a regular file"):
            store.get(address)
        with pytest.raises(StoreError, match="not a regular file"):
            store.has(address)


class TestInvalidAddresses:
    @given(
        candidate=st.one_of(
            st.text(max_size=100),
            st.text(alphabet="0123456789abcdefABCDEF./\\\x00", min_size=60, max_size=70).map(
                lambda digits: "sha256:" + digits
            ),
            st.sampled_from(["../../outside/secret", "/etc/passwd", "sha256:../" * 8, "..", "."]),
        )
    )
    @settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
    def test_never_touch_the_file_system(self, tmp_path: Path, candidate: str) -> None:
        """Invalid addresses raise InvalidAddressError before any path is opened or made."""
        if len(candidate) == 71 and candidate.startswith("sha256:"):
            digits = candidate[7:]
            if all(c in "0123456789abcdef" for c in digits):
                return  # a valid address by chance
        root = tmp_path / "root"
        (tmp_path / "outside").mkdir(exist_ok=True)
        (tmp_path / "outside" / "secret").write_bytes(b"secret")
        store = LocalStore(root)
        store.put(b"inside")
        before = tree(tmp_path)
        for call in (store.get, store.has, store.get_json):
            with fs_events() as events, pytest.raises(InvalidAddressError):
                call(candidate)
            assert events == []
        assert tree(tmp_path) == before

    def test_the_spy_sees_a_valid_read(self, store: LocalStore) -> None:
        """The file-system spy above is live: a valid get shows up as opened paths."""
        address = store.put(b"seen")
        with fs_events() as events:
            store.get(address)
        assert any(event == "open" for event, _ in events)


class TestSymlinks:
    def plant(self, root: Path, outside: Path, data: bytes) -> str:
        """Put a well-formed blob outside the root and return its address."""
        address = address_of(data)
        digits = address.removeprefix("sha256:")
        outside.mkdir(parents=True, exist_ok=True)
        (outside / digits[2:]).write_bytes(data)
        return address

    def test_shard_directory_symlink_is_refused(
        self, store: LocalStore, root: Path, tmp_path: Path
    ) -> None:
        """A shard directory linked outside the root is never read through, even for valid bytes."""
        outside = tmp_path / "outside"
        address = self.plant(root, outside, b"planted")
        store.put(b"make root")
        shard = root / "sha256" / address.removeprefix("sha256:")[:2]
        shard.symlink_to(outside, target_is_directory=True)
        with pytest.raises(StoreError, match="symbolic link"):
            store.get(address)
        with pytest.raises(StoreError, match="symbolic link"):
            store.has(address)

    def test_put_through_shard_symlink_writes_nothing_outside(
        self, store: LocalStore, root: Path, tmp_path: Path
    ) -> None:
        """A put whose shard directory is a link outside the root fails and leaves it untouched."""
        outside = tmp_path / "outside"
        outside.mkdir()
        store.put(b"make root")
        address = address_of(b"escape")
        (root / "sha256" / address.removeprefix("sha256:")[:2]).symlink_to(outside)
        with pytest.raises(StoreError, match="symbolic link"):
            store.put(b"escape")
        assert list(outside.iterdir()) == []

    def test_algorithm_directory_symlink_is_refused(
        self, store: LocalStore, root: Path, tmp_path: Path
    ) -> None:
        """The sha256/ directory itself linked elsewhere is refused for reads and writes."""
        outside = tmp_path / "outside"
        address = self.plant(root, outside / address_of(b"x").removeprefix("sha256:")[:2], b"x")
        root.mkdir()
        (root / "sha256").symlink_to(outside)
        with pytest.raises(StoreError, match="symbolic link"):
            store.get(address)
        with pytest.raises(StoreError, match="symbolic link"):
            store.put(b"y")
        assert sorted(p.name for p in outside.iterdir()) == [address[7:9]]

    def test_blob_symlink_is_refused(self, store: LocalStore, root: Path, tmp_path: Path) -> None:
        """A blob path that is a link (here to a file with the right bytes) is refused."""
        outside = tmp_path / "outside"
        address = self.plant(root, outside, b"linked")
        store.put(b"make root")
        shard = root / "sha256" / address.removeprefix("sha256:")[:2]
        shard.mkdir(exist_ok=True)
        (shard / address.removeprefix("sha256:")[2:]).symlink_to(
            outside / address.removeprefix("sha256:")[2:]
        )
        with pytest.raises(StoreError, match="symbolic link"):
            store.get(address)
        with pytest.raises(StoreError, match="symbolic link"):
            store.has(address)
        with pytest.raises(StoreError, match="symbolic link"):
            store.put(b"linked")

    def test_symlinked_root_is_followed(self, tmp_path: Path, walk_mode: str) -> None:
        """The root itself may be reached through a link: that is the user's choice of place."""
        real = tmp_path / "real"
        real.mkdir()
        (tmp_path / "alias").symlink_to(real)
        store = LocalStore(tmp_path / "alias")
        address = store.put(b"through alias")
        assert blob_path(real, address).read_bytes() == b"through alias"
        assert store.get(address) == b"through alias"


class TestAtomicity:
    def test_temp_files_are_never_read(self, store: LocalStore, root: Path) -> None:
        """A half-written temporary file next to where a blob belongs is not a blob."""
        data = b"complete content"
        address = address_of(data)
        digits = address.removeprefix("sha256:")
        shard = root / "sha256" / digits[:2]
        shard.mkdir(parents=True)
        (shard / f".tmp.{digits[2:10]}.1.deadbeef").write_bytes(data[:7])
        (shard / f".tmp.{digits[2:10]}.2.deadbeef").write_bytes(data)
        assert not store.has(address)
        with pytest.raises(BlobNotFoundError):
            store.get(address)
        assert store.put(data) == address
        assert store.get(address) == data

    def test_failed_write_leaves_no_blob_and_no_temp(
        self, store: LocalStore, root: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A put that fails after writing (fsync here) raises StoreError and leaves nothing."""

        def broken_fsync(fd: int) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(os, "fsync", broken_fsync)
        with pytest.raises(StoreError, match="Input/output error") as caught:
            store.put(b"doomed")
        assert str(blob_path(root, address_of(b"doomed"))) in str(caught.value)
        monkeypatch.undo()
        assert not store.has(address_of(b"doomed"))
        assert temp_files(root) == []

    def test_a_short_write_is_written_on(
        self, store: LocalStore, root: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A write that takes only part of the bytes is continued until the blob is whole."""
        real_write = os.write

        def short_write(fd: int, data: object) -> int:
            return real_write(fd, memoryview(data)[:7])  # type: ignore[arg-type]

        monkeypatch.setattr(os, "write", short_write)
        data = os.urandom(1000)
        address = store.put(data)
        monkeypatch.undo()
        assert blob_path(root, address).read_bytes() == data
        assert LocalStore(root).get(address) == data

    def test_a_taken_temporary_name_gives_way_to_a_fresh_one(
        self, store: LocalStore, root: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A temporary name already on disk (another thread counted alike, or a leftover) is
        left as it is, and the blob is written under a fresh one."""
        from af_otel.store import local

        data = b"taken name"
        digits = address_of(data).removeprefix("sha256:")
        name = f".tmp.{digits[2:10]}.{local._TEMPS.stem}.{local._TEMPS.count + 1}"
        shard = root / "sha256" / digits[:2]
        shard.mkdir(parents=True)
        (shard / name).write_bytes(b"someone else's")
        address = store.put(data)
        assert store.get(address) == data
        assert (shard / name).read_bytes() == b"someone else's"
        assert temp_files(root) == [shard / name]

    @pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
    def test_a_forked_child_names_its_temporaries_apart(self) -> None:
        """After fork, parent and child, counting from the same number, never share a name."""
        from af_otel.store import local

        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its next name, to the parent
            os.write(write, local._temp_name("abcdefgh").encode())
            os._exit(0)
        os.close(write)
        child = os.read(read, 200).decode()
        os.close(read)
        os.waitpid(pid, 0)
        assert child.split(".")[3] == str(pid)  # .tmp.<8 hex>.<pid>.<token>.<count>
        assert local._temp_name("abcdefgh") != child

    def test_process_killed_before_rename(self, root: Path) -> None:
        """A writer killed after writing but before the rename leaves only an unread temp file."""
        data = os.urandom(1 << 20)
        (root.parent / "payload").write_bytes(data)
        script = textwrap.dedent(
            f"""
            import os, signal, sys
            from pathlib import Path
            sys.path.insert(0, {str(REPO)!r})
            from af_otel.store import LocalStore

            def die(*args, **kwargs):
                os.kill(os.getpid(), signal.SIGKILL)

            os.replace = die
            LocalStore({str(root)!r}).put(Path({str(root.parent / "payload")!r}).read_bytes())
            """
        )
        result = subprocess.run([sys.executable, "-c", script], check=False, timeout=60)
        assert result.returncode == -9
        store = LocalStore(root)
        address = address_of(data)
        leftovers = temp_files(root)
        assert len(leftovers) == 1
        assert leftovers[0].read_bytes() == data
        assert not store.has(address)
        with pytest.raises(BlobNotFoundError):
            store.get(address)
        assert store.put(data) == address
        assert store.get(address) == data


class TestConcurrency:
    def test_sixteen_threads(self, store: LocalStore, root: Path) -> None:
        """16 threads putting shared and private blobs at once agree on addresses and lose none."""
        shared = os.urandom(256 * 1024)
        barrier = threading.Barrier(16)
        results: dict[int, list[str]] = {}
        failures: list[BaseException] = []

        def work(worker: int) -> None:
            try:
                barrier.wait()
                got = [store.put(shared)]
                got += [store.put(f"worker {worker} item {i}".encode()) for i in range(20)]
                got.append(store.put(shared))
                results[worker] = got
            except BaseException as exc:  # reported below; a thread cannot fail the test itself
                failures.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        assert {got[0] for got in results.values()} == {address_of(shared)}
        assert store.get(address_of(shared)) == shared
        for worker, got in results.items():
            assert store.get(got[5]) == f"worker {worker} item 4".encode()
        blobs = [p for p in root.rglob("*") if p.is_file()]
        assert len(blobs) == 1 + 16 * 20
        assert temp_files(root) == []

    def test_four_processes(self, root: Path) -> None:
        """Separate processes putting the same blobs into one root all succeed, one file each."""
        script = textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(REPO)!r})
            from af_otel.store import LocalStore
            store = LocalStore({str(root)!r})
            for i in range(200):
                store.put(b"shared %d" % (i % 50))
            """
        )
        workers = [subprocess.Popen([sys.executable, "-c", script]) for _ in range(4)]
        assert [w.wait(timeout=120) for w in workers] == [0, 0, 0, 0]
        store = LocalStore(root)
        for i in range(50):
            assert store.get(address_of(b"shared %d" % i)) == b"shared %d" % i
        assert sum(1 for p in root.rglob("*") if p.is_file()) == 50
        assert temp_files(root) == []


class TestErrors:
    def test_root_under_a_regular_file(self, tmp_path: Path, walk_mode: str) -> None:
        """A root that cannot be created (its parent is a file) gives StoreError naming it."""
        (tmp_path / "file").write_bytes(b"not a directory")
        root = tmp_path / "file" / "store"
        store = open_store(root)
        with pytest.raises(StoreError) as caught:
            store.put(b"data")
        assert str(root) in str(caught.value)

    def test_root_that_is_a_file(self, tmp_path: Path, walk_mode: str) -> None:
        """A root that is a regular file is a StoreError for reads and writes, naming the root."""
        root = tmp_path / "store"
        root.write_bytes(b"")
        store = LocalStore(root)
        for call in (lambda: store.put(b"x"), lambda: store.get(address_of(b"x"))):
            with pytest.raises(StoreError, match=str(root)):
                call()

    def test_shard_that_is_a_file(self, store: LocalStore, root: Path) -> None:
        """A file where a shard directory belongs is a StoreError naming that path."""
        address = address_of(b"x")
        shard = root / "sha256" / address.removeprefix("sha256:")[:2]
        shard.parent.mkdir(parents=True)
        shard.write_bytes(b"")
        with pytest.raises(StoreError, match=str(shard)):
            store.put(b"x")
        with pytest.raises(StoreError, match=str(shard)):
            store.get(address)


class TestDedup:
    def test_conversation_costs_its_unique_content(self, store: LocalStore, root: Path) -> None:
        """A 60-turn conversation re-stored whole every turn occupies only its unique bytes."""
        system = {"type": "text", "content": "You are a careful assistant. " * 40}
        tools = [
            {"type": "function", "name": f"tool_{i}", "description": "d" * 300} for i in range(8)
        ]
        messages: list[dict[str, object]] = []
        put_bytes = 0
        for turn in range(60):
            role = "user" if turn % 2 == 0 else "assistant"
            text = f"turn {turn}: " + hashlib.sha256(str(turn).encode()).hexdigest() * 12
            messages.append({"role": role, "parts": [{"type": "text", "content": text}]})
            # A naive writer: every turn stores the whole state again, piece by piece.
            for value in [system, *tools, *messages]:
                put_bytes += len(canonical_json(value))
                store.put_json(value)
        unique = {canonical_json(v) for v in [system, *tools, *messages]}
        unique_bytes = sum(len(b) for b in unique)
        on_disk = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        assert on_disk == unique_bytes
        assert put_bytes > 20 * on_disk

    def test_a_blob_it_wrote_or_found_is_not_looked_for_again(
        self, store: LocalStore, root: Path
    ) -> None:
        """A put or a has of a blob this store object wrote or found opens nothing (where it
        opens directories to look: by descriptor); another store object looks for itself."""
        written = store.put(b"written")
        found = LocalStore(root).put(b"found")
        assert store.has(found)
        with fs_events() as events:
            assert store.put(b"written") == written
            assert store.has(written)
            assert store.has(found)
        assert events == []
        assert LocalStore(root).has(written)

    def test_what_it_knows_stays_bounded(
        self, store: LocalStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Past its bound the set of known addresses starts over: it never grows past it."""
        monkeypatch.setattr("af_otel.store.local._MAX_KNOWN", 3)
        addresses = [store.put(bytes([n])) for n in range(7)]
        assert len(store._known) <= 3
        assert addresses[-1] in store._known
        assert all(store.has(address) for address in addresses)


class TestReading:
    """`LocalStore.reading`: one pass over many blobs, with the directories above them held open,
    reads as `get` does, error for error."""

    def test_reads_as_get_does(self, store: LocalStore, root: Path) -> None:
        """Every blob, a JSON value, a missing blob and a damaged one read as `get` reads them."""
        addresses = [store.put(bytes([i]) * (i + 1)) for i in range(40)]
        value = store.put_json({"a": [1, 2]})
        damaged = store.put(b"to be edited")
        blob_path(root, damaged).chmod(0o644)
        blob_path(root, damaged).write_bytes(b"edited")
        missing = address_of(b"never stored")
        with store.reading() as held:
            assert [held.get(a) for a in addresses] == [store.get(a) for a in addresses]
            assert [held.get(a) for a in addresses] == [store.get(a) for a in addresses]
            assert held.get_json(value) == {"a": [1, 2]}
            for address, error in ((missing, BlobNotFoundError), (damaged, BlobDamagedError)):
                with pytest.raises(error) as direct:
                    store.get(address)
                with pytest.raises(error) as passed:
                    held.get(address)
                assert str(passed.value) == str(direct.value)
            assert held.url == store.url

    def test_a_shard_made_during_the_pass_is_found(self, store: LocalStore) -> None:
        """A shard absent at one read is looked for again at the next: a put during the pass
        is read."""
        store.put(b"make root")
        with store.reading() as held:
            late = address_of(b"late")
            with pytest.raises(BlobNotFoundError):
                held.get(late)
            assert held.put(b"late") == late
            assert held.get(late) == b"late"

    def test_a_root_made_during_the_pass_is_read(self, store: LocalStore, root: Path) -> None:
        """Begun before the store has a root, the pass reads what is put after, as `get` does."""
        with store.reading() as held:
            address = address_of(b"first")
            with pytest.raises(BlobNotFoundError):
                held.get(address)
            store.put(b"first")
            assert held.get(address) == b"first"
        assert root.is_dir()

    def test_a_shard_linked_outside_is_refused(
        self, store: LocalStore, root: Path, tmp_path: Path
    ) -> None:
        """A shard directory linked outside the root is refused inside the pass too."""
        outside = tmp_path / "outside"
        address = address_of(b"planted")
        outside.mkdir()
        (outside / address.removeprefix("sha256:")[2:]).write_bytes(b"planted")
        store.put(b"make root")
        (root / "sha256" / address.removeprefix("sha256:")[:2]).symlink_to(outside)
        with store.reading() as held, pytest.raises(StoreError, match="symbolic link"):
            held.get(address)

    def test_the_blob_directory_linked_outside_is_refused_at_the_read(
        self, store: LocalStore, root: Path, tmp_path: Path
    ) -> None:
        """The sha256/ directory linked elsewhere: the pass begins, and its first read is refused
        as `get` is (no read, no error)."""
        outside = tmp_path / "outside"
        outside.mkdir()
        root.mkdir()
        (root / "sha256").symlink_to(outside)
        with store.reading() as held, pytest.raises(StoreError, match="symbolic link"):
            held.get(address_of(b"x"))

    def test_descriptors_are_closed_after_the_pass(self, store: LocalStore) -> None:
        """The pass holds directories only while it lasts."""
        addresses = [store.put(bytes([i])) for i in range(64)]
        fds = Path("/proc/self/fd")
        if not fds.is_dir():
            pytest.skip("no /proc/self/fd to count open descriptors on this platform")
        before = len(list(fds.iterdir()))
        with store.reading() as held:
            for address in addresses:
                held.get(address)
        assert len(list(fds.iterdir())) == before

    def test_a_subclass_with_its_own_reads_is_itself(self, root: Path) -> None:
        """A store that reads its own way (a test's watching store) is not read around."""
        seen: list[str] = []

        class Watching(LocalStore):
            def get(self, address: str) -> bytes:
                seen.append(address)
                return super().get(address)

        store = Watching(root)
        address = store.put(b"watched")
        with store.reading() as held:
            assert held is store
            assert held.get(address) == b"watched"
        assert seen == [address]
