"""Receipt attributes: written and read back unchanged, and malformed or truncated attributes are
refused with a reason, never with an exception and never as a receipt that still checks out."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from af_otel import names
from af_otel.receipts import MalformedReceipt, Receipt, mint_receipt, receipt_digest

REQUEST: dict[str, Any] = {
    "system": "be brief",
    "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "weather?"},
    ],
    "tools": [{"name": "weather"}, {"name": "search"}],
    "params": {"temperature": 0.5, "tool_choice": "weather"},
    "model": "m",
    "provider": "p",
}


def _span_attributes(receipt: Receipt) -> dict[str, Any]:
    """What the processor puts on a span: the receipt plus the run id and the call's place."""
    return {
        **receipt.to_attributes(),
        names.RUN_ID: receipt.run_id,
        names.EPOCH: receipt.epoch,
        names.EPOCH_PARENT: receipt.parent,
    }


def _minted() -> Receipt:
    parent = mint_receipt({"messages": REQUEST["messages"][:2]}, run_id="run-9", epoch=1)
    return mint_receipt(REQUEST, run_id="run-9", epoch=2, parent=parent)


class TestRoundTrip:
    def test_minted(self) -> None:
        """A minted receipt reads back equal from its span attributes."""
        receipt = _minted()
        assert receipt.messages_kept == 2
        assert Receipt.from_attributes(_span_attributes(receipt)) == receipt

    def test_minted_with_tuples_as_a_backend_returns_them(self) -> None:
        """Lists read back as tuples, ints given as decimal strings, are the same receipt."""
        attributes = {
            key: (tuple(value) if isinstance(value, list) else value)
            for key, value in _span_attributes(_minted()).items()
        }
        attributes[names.RECEIPT_BYTES] = str(attributes[names.RECEIPT_BYTES])
        assert Receipt.from_attributes(attributes) == _minted()

    @pytest.mark.parametrize(
        "receipt",
        [
            mint_receipt({"messages": "x"}, run_id="r", epoch=3, parent=2),
            mint_receipt(REQUEST, run_id="", epoch=3, parent=2),
            Receipt("error", "r", 3, 2, names.REASON_INTERNAL_ERROR),
        ],
        ids=["unreadable", "no-run-id", "error"],
    )
    def test_not_minted(self, receipt: Receipt) -> None:
        """Absent and error receipts read back with their reason."""
        assert Receipt.from_attributes(_span_attributes(receipt)) == receipt

    def test_no_receipt_attributes_is_none(self) -> None:
        """A span without af.receipt.* attributes has no receipt (None), not a rejection."""
        assert Receipt.from_attributes({names.RUN_ID: "r", "gen_ai.system": "openai"}) is None


def _drop(key: str) -> Any:
    return lambda attrs: {k: v for k, v in attrs.items() if k != key}


def _set(key: str, value: object) -> Any:
    return lambda attrs: {**attrs, key: value}


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (_set(names.RECEIPT_STATE, "maybe"), "af.receipt.state"),
        (_drop(names.RECEIPT_STATE), "af.receipt.state"),
        (_set(names.RECEIPT_SCHEME, "af-9"), "af.receipt.scheme"),
        (_set(names.RECEIPT_SCHEME, "af-1"), "not a hash"),  # af-2's hashes read as af-1
        (_set(names.RECEIPT_SCHEME, "af-2-hmac"), "af.receipt.key_id"),  # keyed, names no key
        (_set(names.RECEIPT_KEY_ID, "nothex"), "af.receipt.key_id"),
        (_set(names.RECEIPT_PARENT_DIGEST, "0123"), "af.receipt.parent_digest"),
        (_set(names.GAPS, [1]), "af.gaps"),
        (_drop(names.RECEIPT_SCHEME), "af.receipt.scheme"),
        (_drop(names.RECEIPT_DIGEST), "af.receipt.digest"),
        (_set(names.RECEIPT_DIGEST, "0123456789abcde"), "af.receipt.digest"),
        (_set(names.RECEIPT_DIGEST, "0123456789ABCDEF"), "af.receipt.digest"),
        (_set(names.RECEIPT_SYSTEM_HASH, 5), "af.receipt.system.hash"),
        (_set(names.RECEIPT_SYSTEM_PIECES, "abcdefabcdefabcd"), "af.receipt.system.pieces"),
        (_set(names.RECEIPT_SYSTEM_PIECES, ["nothex"]), "af.receipt.system.pieces"),
        (_set(names.RECEIPT_MESSAGES_COUNT, -1), "af.receipt.messages.count"),
        (_set(names.RECEIPT_MESSAGES_COUNT, True), "af.receipt.messages.count"),
        (_set(names.RECEIPT_MESSAGES_COUNT, 2.0), "af.receipt.messages.count"),
        (_drop(names.RECEIPT_MESSAGES_COUNT), "af.receipt.messages.count"),
        (_set(names.RECEIPT_MESSAGES_COUNT, 9), "messages.kept + len(messages.added)"),
        (_set(names.RECEIPT_MESSAGES_ADDED, []), "messages.kept + len(messages.added)"),
        (_set(names.RECEIPT_MESSAGES_CHAIN, "x" * 16), "af.receipt.messages.chain"),
        (_set(names.RECEIPT_TOOLS_NAMES, ["weather"]), "tools.names and tools.hashes"),
        (_set(names.RECEIPT_TOOLS_NAMES, [1, 2]), "af.receipt.tools.names"),
        (_set(names.RECEIPT_TOOLS_HASHES, b"abcdef"), "af.receipt.tools.hashes"),
        (_set(names.RECEIPT_PARAMS, {"temperature": 0.5}), "af.receipt.params"),
        (_set(names.RECEIPT_BYTES, "12x"), "af.receipt.bytes"),
        (_set(names.RECEIPT_BYTES, "²"), "af.receipt.bytes"),
        (_set(names.RECEIPT_MODEL, 3), "af.receipt.model"),
        (_set(names.EPOCH, "two"), "af.epoch"),
        (_set(names.EPOCH_PARENT, -1), "af.epoch.parent"),
    ],
)
def test_malformed_attributes_are_rejected_with_a_reason(mutate: Any, reason: str) -> None:
    """Each malformed or missing attribute gives MalformedReceipt whose reason names it."""
    result = Receipt.from_attributes(mutate(_span_attributes(_minted())))
    assert isinstance(result, MalformedReceipt)
    assert reason in result.reason


@pytest.mark.parametrize("scheme", ["af-1", "af-2"])
def test_a_rejected_af2_receipt_says_so(scheme: str) -> None:
    """A rejected receipt is marked af-2 when its attributes carry af-2's marks, even with the
    scheme stripped (a reader then calls it damaged); an af-1 one is not."""
    attributes = _span_attributes(mint_receipt(REQUEST, run_id="r", epoch=1, scheme=scheme))
    for mutate in (_drop(names.RECEIPT_SCHEME), _set(names.RECEIPT_BYTES, "x")):
        result = Receipt.from_attributes(mutate(attributes))
        assert isinstance(result, MalformedReceipt)
        assert result.af2 is (scheme == "af-2")


class _Exploding(dict[str, Any]):
    def get(self, key: str, default: Any = None) -> Any:
        raise RuntimeError("backend bug")


def test_an_exploding_mapping_is_rejected_not_raised() -> None:
    """Even a mapping that raises on read gives MalformedReceipt, never an exception."""
    result = Receipt.from_attributes(_Exploding({names.RECEIPT_STATE: "minted"}))
    assert isinstance(result, MalformedReceipt)


_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 2**64),
    st.floats(),
    st.text(max_size=20),
    st.binary(max_size=4),
    st.lists(st.one_of(st.text(max_size=17), st.integers()), max_size=4),
)


@st.composite
def _mutations(draw: st.DrawFn) -> dict[str, Any]:
    attributes = _span_attributes(_minted())
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(sorted(attributes)))
        action = draw(st.sampled_from(["drop", "replace", "truncate", "truncate-list", "swap"]))
        value = attributes.get(key)
        if action == "drop":
            attributes.pop(key, None)
        elif action == "replace":
            attributes[key] = draw(_junk)
        elif action == "truncate" and isinstance(value, str):
            attributes[key] = value[: draw(st.integers(0, max(0, len(value) - 1)))]
        elif action == "truncate-list" and isinstance(value, list):
            attributes[key] = value[: draw(st.integers(0, len(value)))]
        elif action == "swap":
            other = draw(st.sampled_from(sorted(attributes)))
            attributes[key], attributes[other] = attributes.get(other), value
    return attributes


@given(attributes=_mutations())
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_attributes_never_raise_and_never_pass_as_the_original(
    attributes: dict[str, Any],
) -> None:
    """Random drops, replacements, truncations and swaps give the original receipt, a rejection,
    or a receipt whose own digest no longer checks out: never an exception, never a changed
    receipt that verifies."""
    original = _minted()
    result = Receipt.from_attributes(attributes)
    assert result is None or isinstance(result, Receipt | MalformedReceipt)
    if isinstance(result, Receipt) and result.minted and result != original:
        assert receipt_digest(result) != result.digest
