"""Hostile requests on the emit path: minting never raises, and what it cannot read it names."""

from __future__ import annotations

import math
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings

from af_otel import ReceiptDigests, canonical_json, mint_receipt, names
from af_otel.receipts import Receipt

from .hostile import Opaque, cyclic, nested, requests


def _check(receipt: Receipt) -> None:
    assert receipt.state in ("minted", "absent")
    if receipt.state == "absent":
        assert receipt.absent_reason == "content-unreadable"
        return
    # A minted receipt reads back exactly as written: nothing half-formed reaches a span.
    attributes = {
        **receipt.to_attributes(),
        names.RUN_ID: receipt.run_id,
        names.EPOCH: receipt.epoch,
        names.EPOCH_PARENT: receipt.parent,
    }
    assert Receipt.from_attributes(attributes) == receipt


class TestMintNeverRaises:
    @given(request=requests())
    @settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
    def test_any_request(self, request: Any) -> None:
        """Any value handed to mint_receipt gives a receipt: minted, or absent with content-unreadable."""
        _check(mint_receipt(request, run_id="run-hostile", epoch=1))

    @given(first=requests(), second=requests())
    @settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
    def test_memo_survives_hostile_calls(self, first: Any, second: Any) -> None:
        """A memo that saw a hostile request mints the next request exactly as a fresh memo does."""
        good = {"messages": [{"role": "user", "content": "hello"}], "model": "m"}
        memo = ReceiptDigests()
        for epoch, request in enumerate((first, second), start=1):
            _check(mint_receipt(request, run_id="r", epoch=epoch, digests=memo))
        assert mint_receipt(good, run_id="r", epoch=3, digests=memo) == mint_receipt(
            good, run_id="r", epoch=3
        )


def _tool_call(arguments: object) -> dict[str, Any]:
    part = {"type": "tool_call", "id": "c1", "name": "f", "arguments": arguments}
    return {"messages": [{"role": "assistant", "parts": [part]}]}


@pytest.mark.parametrize(
    ("name", "request_"),
    [
        ("nan", _tool_call({"x": math.nan})),
        ("infinity", _tool_call([math.inf])),
        ("cycle", _tool_call(cyclic())),
        ("deep-100k", _tool_call(nested(100_000))),
        ("bytes", _tool_call(b"\xff\xfe")),
        ("object", _tool_call(Opaque())),
        ("int-key", _tool_call({1: 2})),
        ("huge-int", _tool_call(2**2000)),
        ("set", _tool_call({1, 2})),
        ("messages-string", {"messages": "hello"}),
        ("not-a-dict", 42),
    ],
)
def test_unreadable_values_are_named(name: str, request_: Any) -> None:
    """Each value JSON cannot hold gives an absent receipt with content-unreadable, never an exception."""
    receipt = mint_receipt(request_, run_id="r", epoch=1)
    assert (receipt.state, receipt.absent_reason) == ("absent", "content-unreadable"), name


def test_lone_surrogates_mint() -> None:
    """Lone surrogates are text (replaced by U+FFFD), so the request mints as if they were U+FFFD."""
    bad = mint_receipt({"messages": [{"role": "user", "content": "a\ud800b"}]}, run_id="r", epoch=1)
    fixed = mint_receipt(
        {"messages": [{"role": "user", "content": "a\ufffdb"}]}, run_id="r", epoch=1
    )
    assert bad.state == "minted"
    assert bad == fixed


@pytest.mark.parametrize(
    "value",
    [
        {"b": None, "a": 1},
        {"temperature": 1.0, "max_tokens": 5},
        {"z": "x\ud800", "a": [1]},
        {"b": {"d": 1e21, "c": 0}, "a": True},
    ],
)
def test_exact_path_sorts_keys(value: dict[str, Any]) -> None:
    """Values that leave orjson's fast path (null, x.0 floats, surrogates) still get sorted keys."""
    repaired = {
        k: (v.replace("\ud800", "\ufffd") if isinstance(v, str) else v) for k, v in value.items()
    }
    assert canonical_json(value) == rfc8785.dumps(repaired)


def test_duplicate_keys_in_argument_strings() -> None:
    """Tool arguments given as a JSON string with a repeated key parse to one value (last wins)."""
    doubled = mint_receipt(_tool_call('{"a": 1, "a": 2}'), run_id="r", epoch=1)
    single = mint_receipt(_tool_call({"a": 2}), run_id="r", epoch=1)
    assert doubled.state == "minted"
    assert doubled == single


def test_fifty_megabyte_message() -> None:
    """One 50 MB message mints a receipt whose attributes stay small."""
    big = "a" * (50 * 1024 * 1024)
    receipt = mint_receipt({"messages": [{"role": "user", "content": big}]}, run_id="r", epoch=1)
    assert receipt.state == "minted"
    assert receipt.bytes > 50 * 1024 * 1024
    assert len(repr(receipt.to_attributes())) < 2048


def test_hundred_thousand_messages() -> None:
    """100,000 messages mint a receipt whose attributes do not grow with the conversation."""
    messages = [{"role": "user", "content": f"m{i}"} for i in range(100_000)]
    # With the parent's receipt, only the new tail is "added".
    memo = ReceiptDigests()
    first = mint_receipt({"messages": messages[:-1]}, run_id="r", epoch=1, digests=memo)
    second = mint_receipt({"messages": messages}, run_id="r", epoch=2, parent=first, digests=memo)
    assert second.state == "minted"
    assert second.messages_count == 100_000
    assert second.messages_kept == 99_999
    assert len(second.messages_added) == 1
    assert len(repr(second.to_attributes())) < 2048
