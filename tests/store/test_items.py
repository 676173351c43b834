"""Message lists stored message by message: they read back whole, a list that extends a stored
one writes only what is new, and a chunk that is not what it claims is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from af_otel.errors import StoreError
from af_otel.store import LocalStore
from af_otel.store.items import CHUNK, CHUNK_REF, ITEM_REF, StoredItems, is_item_ref, load_items


def _messages(count: int, tag: str = "") -> list[dict[str, object]]:
    return [
        {"role": "user", "parts": [{"type": "text", "content": f"m{i}{tag}"}]} for i in range(count)
    ]


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(count=st.integers(0, 3 * CHUNK + 3))
def test_a_list_reads_back_whole(tmp_path: Path, count: int) -> None:
    """Whatever its length, the references stand for exactly the list: full chunks first, then
    one reference per message."""
    store = LocalStore(tmp_path / f"store-{count}")
    messages = _messages(count)
    refs = StoredItems().put(store, messages)
    assert len(refs) == count // CHUNK + count % CHUNK
    assert all(is_item_ref(ref) for ref in refs)
    assert [CHUNK_REF in ref for ref in refs] == [True] * (count // CHUNK) + [False] * (
        count % CHUNK
    )
    assert load_items(store, refs) == messages
    assert load_items(store, store.get_json(store.put_json(refs))) == messages  # type: ignore[arg-type]


class _CountingStore(LocalStore):
    """A local store that counts the blobs handed to `put`."""

    puts = 0

    def put(self, data: bytes) -> str:
        self.puts += 1
        return super().put(data)


def test_a_writer_joining_late_writes_only_what_is_new(tmp_path: Path) -> None:
    """A second writer storing the same history plus two messages finds the full chunks in the
    store and hands it only the messages after them; asked again, nothing new reaches the disk."""
    store = _CountingStore(tmp_path / "store")
    history = _messages(2 * CHUNK + 5)
    StoredItems().put(store, history)
    late = StoredItems()
    store.puts = 0
    refs = late.put(store, [*history, *_messages(2, "new")])
    assert store.puts == 5 + 2  # the 5 after the chunks (already there) and the 2 new ones
    assert load_items(store, refs) == [*history, *_messages(2, "new")]
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "store").rglob("*") if p.is_file()}
    late.put(store, [*history, *_messages(2, "new")])
    after = {p: p.stat().st_mtime_ns for p in (tmp_path / "store").rglob("*") if p.is_file()}
    assert after == before


def test_bytes_on_disk_hold_each_message_once(tmp_path: Path) -> None:
    """Forty lists, each the one before plus one message, cost the messages once plus small
    lists of references."""
    store = LocalStore(tmp_path / "store")
    writer = StoredItems()
    messages = _messages(40, "x" * 500)
    for end in range(1, 41):
        StoredItems().put(store, messages[:end])  # every list by a writer that knows nothing
    writer.put(store, messages)
    on_disk = sum(p.stat().st_size for p in (tmp_path / "store").rglob("*") if p.is_file())
    content = sum(len(str(m)) for m in messages)
    assert on_disk < 1.5 * content


def test_a_chunk_that_is_not_a_list_of_message_references_is_refused(tmp_path: Path) -> None:
    """A chunk reference naming anything but message references raises StoreError naming it."""
    store = LocalStore(tmp_path / "store")
    bad = store.put_json([{"role": "user", "parts": []}])
    with pytest.raises(StoreError, match=bad):
        load_items(store, [{CHUNK_REF: bad}])
    nested = store.put_json([{CHUNK_REF: bad}])
    with pytest.raises(StoreError, match=nested):
        load_items(store, [{CHUNK_REF: nested}])


def test_a_message_is_never_read_as_a_reference() -> None:
    """A reference has exactly one key; a message has a role."""
    assert not is_item_ref({"role": "user", ITEM_REF: "sha256:" + "0" * 64})
    assert not is_item_ref({ITEM_REF: 3})
    assert is_item_ref({ITEM_REF: "sha256:" + "0" * 64})
