"""ReceiptDigests: a receipt minted with the memo is byte-identical to one minted without, over any
sequence of calls, and what the memo keeps stays within the bound its docstring states."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from af_otel import Request, mint_receipt
from af_otel.model import FrozenDict
from af_otel.model.conversation import frozen
from af_otel.receipts import Receipt, ReceiptDigests, same_json
from af_otel.receipts import memo as memo_module

# Scalars that Python calls equal while JCS writes them differently, or the reverse.
_tricky = st.sampled_from([True, 1, 1.0, False, 0, 0.0, -0.0, None, "1", "true", 2**53, 2.0**53])
_values = st.recursive(
    st.one_of(_tricky, st.integers(-5, 5), st.text(max_size=3)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
        st.lists(
            st.sampled_from([1, True, 1.0, "x"]), min_size=65, max_size=70
        ),  # compared as bytes
    ),
    max_leaves=6,
)


def _message(index: int, value: Any) -> dict[str, Any]:
    kind = index % 3
    if kind == 0:
        return {"role": "user", "parts": [{"type": "text", "content": f"q{index}"}]}
    if kind == 1:
        call = {"type": "tool_call", "id": f"c{index}", "name": "f", "arguments": {"v": value}}
        return {"role": "assistant", "parts": [call]}
    return {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": f"c{index}", "response": value}],
    }


_ops = st.one_of(
    st.tuples(st.just("append"), _values),
    st.tuples(st.just("append"), _values),
    st.tuples(st.just("rewrite"), st.integers(0, 50), _values),
    st.tuples(st.just("remove"), st.integers(0, 50)),
    st.tuples(st.just("flip"), st.integers(0, 50)),
    st.tuples(st.just("flip"), st.integers(0, 50)),
    st.tuples(st.just("system"), st.sampled_from(["", "be brief", "be verbose", "x" * 5000])),
    st.tuples(st.just("tools"), st.lists(st.sampled_from(["f", "g", "h"]), max_size=3)),
    st.tuples(st.just("nan"), st.sampled_from([math.nan, math.inf])),
    st.tuples(st.just("run"), st.sampled_from(["run-a", "run-b"])),
    st.tuples(st.just("key"), st.sampled_from([None, b"k1", "k2", ""])),
    st.tuples(st.just("copy"), st.booleans()),
)


_FLIPS: dict[Any, Any] = {True: 1, False: 0}


def _flip(value: Any) -> Any:
    """The same value with bools and numbers swapped where Python calls them equal."""
    if isinstance(value, dict):
        return {key: _flip(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_flip(item) for item in value]
    if type(value) is bool:
        return _FLIPS[value]
    if type(value) in (int, float) and value in (0, 1):
        return bool(value)
    return value


def _bound(request: Request) -> int:
    s, m, t = len(request.system), len(request.messages), len(request.tools)
    return s + t + 2 * m + 3


class TestSameResults:
    @given(ops=st.lists(_ops, min_size=1, max_size=25))
    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    def test_memo_changes_no_receipt(self, ops: list[tuple[Any, ...]]) -> None:
        """Over appends, rewrites, removals, system/tools changes, NaN, bool/int swaps, run and key
        switches and fresh copies, receipts with one memo equal receipts without, byte for byte,
        and the memo stays within its bound."""
        memo = ReceiptDigests()
        run, key, fresh = "run-a", None, False
        system, tools = "be brief", ["f"]
        messages: list[dict[str, Any]] = []
        values: list[Any] = []
        parent: Receipt | int = 0
        last_bound: dict[tuple[str, Any], int] = {}
        for epoch, (op, *args) in enumerate(ops, start=1):
            if op == "append":
                messages.append(_message(len(messages), args[0]))
                values.append(args[0])
            elif op == "rewrite" and messages:
                index = args[0] % len(messages)
                messages[index] = _message(index, args[1])
                values[index] = args[1]
            elif op == "flip" and messages:
                index = args[0] % len(messages)
                values[index] = _flip(values[index])
                messages[index] = _message(index, values[index])
            elif op == "remove" and messages:
                index = args[0] % len(messages)
                del messages[index], values[index]
            elif op == "system":
                system = args[0]
            elif op == "tools":
                tools = args[0]
            elif op == "nan":
                messages.append(_message(1, {"deep": [args[0]]}))
                values.append({"deep": [args[0]]})
            elif op == "run":
                run = args[0]
            elif op == "key":
                key = args[0]
            elif op == "copy":
                fresh = args[0]
            raw = {"system": system, "messages": messages, "tools": [{"name": t} for t in tools]}
            request = copy.deepcopy(raw) if fresh else raw
            with_memo = mint_receipt(
                request, run_id=run, epoch=epoch, parent=parent, digests=memo, key=key
            )
            without = mint_receipt(request, run_id=run, epoch=epoch, parent=parent, key=key)
            assert with_memo == without
            assert with_memo.to_attributes() == without.to_attributes()
            assert with_memo.entries == without.entries
            identity = (run, key or None)
            if with_memo.minted:
                last_bound[identity] = _bound(Request.from_dict(request))
            assert memo.retained() <= last_bound.get(identity, 2)
            parent = with_memo if epoch % 2 else epoch

    def test_bool_after_int_at_the_same_position(self) -> None:
        """A message whose 1 became True (equal in Python) is hashed again, not taken from the memo."""
        memo = ReceiptDigests()
        for epoch, value in enumerate([1, True, 1.0, 1, False, 0, -0.0], start=1):
            request = {"messages": [_message(1, {"x": [value]})]}
            assert mint_receipt(request, run_id="r", epoch=epoch, digests=memo) == mint_receipt(
                request, run_id="r", epoch=epoch
            )

    def test_a_memo_reused_across_runs_and_keys(self) -> None:
        """One memo serving interleaved runs and keys gives each the receipts a fresh memo gives."""
        memo = ReceiptDigests()
        request = {"system": "s", "messages": [_message(0, 1), _message(1, True)]}
        for epoch, (run, key) in enumerate(
            [("a", None), ("b", None), ("a", b"k"), ("a", None), ("b", b"k")], start=1
        ):
            assert (
                mint_receipt(
                    request, run_id=run, epoch=epoch, key=key, digests=memo
                ).to_attributes()
                == mint_receipt(request, run_id=run, epoch=epoch, key=key).to_attributes()
            )

    def test_an_unreadable_call_leaves_the_memo_as_it_was(self) -> None:
        """A mint that fails half-way (NaN in the last message) commits nothing to the memo."""
        memo = ReceiptDigests()
        good = {"system": "s", "messages": [_message(0, 1), _message(1, 2)]}
        mint_receipt(good, run_id="r", epoch=1, digests=memo)
        before = memo.retained()
        bad = {"system": "other", "messages": [*good["messages"], _message(1, math.nan)]}
        receipt = mint_receipt(bad, run_id="r", epoch=2, digests=memo)
        assert receipt.absent_reason == "content-unreadable"
        assert memo.retained() <= before
        assert mint_receipt(good, run_id="r", epoch=3, digests=memo) == mint_receipt(
            good, run_id="r", epoch=3
        )


class TestBounds:
    def test_retained_stays_within_the_bound_over_200_calls(self) -> None:
        """Over 200 calls with a growing history, retained() never exceeds S + T + 2M + 3."""
        memo = ReceiptDigests()
        messages: list[dict[str, Any]] = []
        parent: Receipt | int = 0
        for epoch in range(1, 201):
            messages.append(_message(epoch, {"rows": list(range(epoch % 7))}))
            if epoch % 10 == 0:
                del messages[0]  # a window that drops the oldest turn
            request = Request.from_dict(
                {"system": ["a", "b"], "messages": messages, "tools": [{"name": "f"}]}
            )
            parent = mint_receipt(request, run_id="r", epoch=epoch, parent=parent, digests=memo)
            assert parent.minted
            assert memo.retained() <= _bound(request)
        assert memo.retained() >= len(messages)  # it does keep the history's pieces

    def test_work_is_proportional_to_new_content(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """With the memo, a call that appends one message hashes a constant number of preimages."""
        calls = [0]

        def counting(real: Callable[..., Callable[[bytes], Any]]) -> Callable[..., Any]:
            def made(
                salt: str, *, key: bytes | str | None = None, digits: int = 16
            ) -> Callable[[bytes], Any]:
                hash_bytes = real(salt, key=key, digits=digits)

                def counted(data: bytes) -> Any:
                    calls[0] += 1
                    return hash_bytes(data)

                return counted

            return made

        # The hex hashes and the raw entry digests (`Entries`) alike.
        for name in ("salted_hash", "salted_digest"):
            monkeypatch.setattr(memo_module, name, counting(getattr(memo_module, name)))
        memo = ReceiptDigests()
        messages: list[dict[str, Any]] = []
        hashes: list[int] = []
        for epoch in range(1, 60):
            messages.append(_message(epoch, [epoch]))
            before = calls[0]
            mint_receipt(
                {"system": "s", "messages": messages}, run_id="r", epoch=epoch, digests=memo
            )
            hashes.append(calls[0] - before)
        assert set(hashes[2:]) == {3}  # the new entry, its chain link, the digest

    @given(length=st.integers(1, 70), edit=st.integers(0, 69), added=st.integers(0, 3))
    @settings(max_examples=60, deadline=None)
    def test_an_edit_rehashes_the_chain_from_the_checkpoint_before_it(
        self, length: int, edit: int, added: int
    ) -> None:
        """The memo keeps every 16th chain link: an edited message at index i costs the links
        from the checkpoint before it, and the receipt is the one minted without the memo."""
        memo = ReceiptDigests()
        messages = [_message(i, [i]) for i in range(length)]
        mint_receipt({"messages": messages}, run_id="r", epoch=1, digests=memo)
        at = edit % length
        messages[at] = _message(at, ["edited"])
        messages += [_message(length + i, [i]) for i in range(added)]
        with_memo = mint_receipt({"messages": messages}, run_id="r", epoch=2, digests=memo)
        without = mint_receipt({"messages": messages}, run_id="r", epoch=2)
        assert with_memo == without
        assert with_memo.messages_chain == without.messages_chain
        # its pieces, the checkpoints and the last link, two generations of the system hash
        assert memo.retained() <= len(messages) + len(messages) // 16 + 4


# (old, new, whether they write the same canonical JSON)
_SAME_CASES: list[tuple[Any, Any, bool]] = [
    ({"a": [1, "x"]}, {"a": [1, "x"]}, True),
    ({"a": (1, 2)}, {"a": [1, 2]}, True),
    (1, True, False),
    (True, 1, False),
    (0, False, False),
    (1, 1.0, False),  # JCS writes both as 1, but recomputing is always safe
    (0.0, -0.0, True),
    (None, math.nan, False),
    ([None], [math.nan], False),
    ([1] * 70, [True] * 70, False),
    ([1] * 70, [1] * 70, True),
    ({"k": [1] * 70}, {"k": [1.0] * 70}, False),
    ({"a": 1}, {"a": 1, "b": 2}, False),
    ({"a": 1}, {"b": 1}, False),
    ("x", "x", True),
]


class TestSameJson:
    @pytest.mark.parametrize(("old", "new", "same"), _SAME_CASES)
    def test_cases(self, old: Any, new: Any, same: bool) -> None:
        """same_json is true only when both values write the same canonical JSON."""
        assert same_json(old, new) is same

    @pytest.mark.parametrize(("old", "new", "same"), _SAME_CASES)
    def test_cases_inside_a_normalized_message(self, old: Any, new: Any, same: bool) -> None:
        """Inside a frozen message's part, in its tuple of parts, the same values are the same
        JSON and the others are not."""

        def message(value: Any) -> Any:
            return frozen({"role": "user", "parts": [{"type": "text", "value": value}]})

        assert same_json(message(old), message(new)) is same

    def test_permissive_eq_is_not_the_same(self) -> None:
        """An object that claims equality with everything is not the same JSON as anything."""

        class Anything:
            def __eq__(self, other: object) -> bool:
                return True

            __hash__ = object.__hash__

        assert not same_json({"a": 1}, {"a": Anything()})
        assert not same_json([1] * 70, [Anything()] * 70)
        part = {"type": "tool_call", "id": "c", "name": "f", "arguments": {"v": 1}}
        claimed = {**part, "arguments": {"v": Anything()}}
        assert not same_json(frozen({"parts": [part]}), frozen({"parts": [claimed]}))
        assert not same_json(frozen({"parts": [part]}), {"parts": (FrozenDict(claimed),)})

    @given(old=_values, new=_values)
    @settings(max_examples=200)
    def test_same_implies_equal_canonical_json(self, old: Any, new: Any) -> None:
        """Whenever same_json says two values are the same, their canonical JSON is equal."""
        from af_otel import canonical_json

        if same_json(old, new):
            assert canonical_json(old) == canonical_json(new)
