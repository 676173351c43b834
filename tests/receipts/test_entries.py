"""Entries: raw entry digests end to end read as the hex entry hashes of the receipt spec, and
two runs of them are compared exactly as their hex tuples would be."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from af_otel import Request, mint_receipt
from af_otel.receipts import ReceiptDigests
from af_otel.receipts.entries import Entries, common_entries

from .reference import entries_of, requests

_digests = st.lists(st.binary(min_size=32, max_size=32), max_size=8)


def _naive(before: tuple[str, ...], now: tuple[str, ...]) -> int:
    count = 0
    for old, new in zip(before, now, strict=False):
        if old != new:
            break
        count += 1
    return count


@given(before=_digests, now=_digests, shared=st.integers(0, 8))
def test_common_entries_counts_as_the_hex_tuples_do(
    before: list[bytes], now: list[bytes], shared: int
) -> None:
    """The leading entries two runs share, counted on their bytes, equal the count on hex texts."""
    now = before[:shared] + now
    old, new = Entries(b"".join(before)), Entries(b"".join(now))
    texts = tuple(d.hex() for d in before), tuple(d.hex() for d in now)
    assert common_entries(old, new) == _naive(*texts)
    assert common_entries(texts[0], new) == _naive(*texts)
    assert tuple(new) == texts[1]
    assert new.texts(min(shared, len(now))) == texts[1][min(shared, len(now)) :]
    assert new.first(shared) == texts[1][:shared]


@given(request=requests(), digits=st.sampled_from([16, 64]), key=st.sampled_from([None, b"k"]))
@settings(max_examples=60, deadline=None)
def test_a_receipt_s_entries_are_the_spec_s_entry_hashes(
    request: dict[str, Any], digits: int, key: bytes | None
) -> None:
    """A minted receipt's entries read as the reference entry hashes, at either scheme's width."""
    scheme = "af-2" if digits == 64 else "af-1"
    receipt = mint_receipt(
        request, run_id="run", epoch=1, digests=ReceiptDigests(), key=key, scheme=scheme
    )
    assert receipt.minted
    assert receipt.entries is not None
    normalized = Request.from_dict(request).to_dict()
    assert tuple(receipt.entries) == tuple(entries_of(normalized, "run", key, digits))
