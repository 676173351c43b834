"""mint_receipt: every docs/receipt-spec.md §4 field as an independent implementation computes it, kept/added
against a parent, the absent and error states, and receipts that stay small at turn 1,000."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from af_otel import Request, canonical_json, mint_receipt, names
from af_otel.canonical import key_id
from af_otel.model import FrozenDict
from af_otel.model.gap_kinds import SERVED_GAPS
from af_otel.receipts import (
    Receipt,
    ReceiptContext,
    ReceiptDigests,
    digest_preimage,
    receipt_digest,
)

from .reference import entries_of, expected_attributes, plain, requests

FULL: dict[str, Any] = {
    "system": [
        {"type": "text", "content": "You are terse."},
        {"type": "text", "content": "No emoji."},
    ],
    "messages": [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "c1",
                    "name": "weather",
                    "arguments": '{"city":"Paris"}',
                }
            ],
        },
        {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": "c1", "result": {"temp": 21.5, "rain": None}}
            ],
        },
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "Current weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        },
        {"name": "search"},
    ],
    "params": {"temperature": 0.0, "max_tokens": 100, "tool_choice": "required", "top_p": None},
    "model": "gpt-4o",
    "provider": "openai",
}


def _normalized(request: dict[str, Any]) -> dict[str, Any]:
    normalized: dict[str, Any] = plain(Request.from_dict(request).to_dict())
    return normalized


def _with_place(receipt: Receipt) -> dict[str, Any]:
    return {
        **receipt.to_attributes(),
        names.RUN_ID: receipt.run_id,
        names.EPOCH: receipt.epoch,
        names.EPOCH_PARENT: receipt.parent,
    }


class TestFields:
    @pytest.mark.parametrize("scheme", ["af-1", "af-2"])
    def test_every_field_of_a_full_request(self, scheme: str) -> None:
        """Each af.receipt.* attribute equals what an independent implementation computes."""
        receipt = mint_receipt(FULL, run_id="run-1", epoch=3, parent=2, scheme=scheme)
        assert receipt.to_attributes() == expected_attributes(
            _normalized(FULL), run_id="run-1", epoch=3, parent=2, scheme=scheme
        )
        assert receipt.tools_forced == "required"
        assert receipt.tools_names == ("weather", "search")
        assert receipt.params == '{"max_tokens":100,"temperature":0,"tool_choice":"required"}'
        assert (receipt.model, receipt.provider) == ("gpt-4o", "openai")

    def test_contract_attribute_names(self) -> None:
        """A minted receipt writes exactly the docs/receipt-spec.md §4 (af-1) and §12 (af-2)
        receipt keys, with their types."""
        attributes = mint_receipt(FULL, run_id="run-1", epoch=1, scheme="af-1").to_attributes()
        types: dict[str, type] = {
            names.RECEIPT_STATE: str,
            names.RECEIPT_SCHEME: str,
            names.RECEIPT_DIGEST: str,
            names.RECEIPT_MODEL: str,
            names.RECEIPT_PROVIDER: str,
            names.RECEIPT_SYSTEM_HASH: str,
            names.RECEIPT_SYSTEM_PIECES: list,
            names.RECEIPT_MESSAGES_COUNT: int,
            names.RECEIPT_MESSAGES_CHAIN: str,
            names.RECEIPT_MESSAGES_KEPT: int,
            names.RECEIPT_MESSAGES_ADDED: list,
            names.RECEIPT_TOOLS_NAMES: list,
            names.RECEIPT_TOOLS_HASHES: list,
            names.RECEIPT_TOOLS_FORCED: str,
            names.RECEIPT_PARAMS: str,
            names.RECEIPT_BYTES: int,
        }
        assert {key: type(value) for key, value in attributes.items()} == types
        context = ReceiptContext(scope_name="s", scope_version="1")
        parent = mint_receipt(FULL, run_id="run-1", epoch=1)
        af2 = mint_receipt(
            FULL, run_id="run-1", epoch=2, parent=parent, key="k", context=context
        ).to_attributes()
        types |= {
            names.RECEIPT_UNRECORDED: list,
            names.RECEIPT_SOURCE: str,
            names.RECEIPT_SCOPE_NAME: str,
            names.RECEIPT_SCOPE_VERSION: str,
            names.RECEIPT_PARENT_DIGEST: str,
            names.RECEIPT_KEY_ID: str,
        }
        assert {key: type(value) for key, value in af2.items()} == types

    @given(
        request=requests(),
        epoch=st.integers(1, 50),
        keyed=st.booleans(),
        scheme=st.sampled_from(["af-1", "af-2"]),
    )
    @settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
    def test_any_request_matches_the_reference(
        self, request: dict[str, Any], epoch: int, keyed: bool, scheme: str
    ) -> None:
        """For any readable request, plain or keyed, af-1 or af-2, the receipt equals the
        reference minter's."""
        key = b"secret" if keyed else None
        receipt = mint_receipt(
            request, run_id="run-x", epoch=epoch, parent=epoch - 1, key=key, scheme=scheme
        )
        expected = expected_attributes(
            _normalized(request),
            run_id="run-x",
            epoch=epoch,
            parent=epoch - 1,
            key=key,
            scheme=scheme,
        )
        assert receipt.to_attributes() == expected

    @given(
        request=requests(),
        gaps=st.lists(st.sampled_from(sorted(SERVED_GAPS)), max_size=3, unique=True),
        unrecorded=st.lists(st.sampled_from(["tools", "params", "system"]), max_size=2),
        source=st.sampled_from(names.RECEIPT_SOURCES),
        scope=st.sampled_from([None, "opentelemetry.instrumentation.openai_v2"]),
        version=st.sampled_from([None, "2.1b0"]),
        lane=st.sampled_from([None, "0123456789abcdef"]),
        base=st.sampled_from([None, "sha256:" + "ab" * 32]),
        keyed=st.booleans(),
    )
    @settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
    def test_af2_context_matches_the_reference(
        self,
        request: dict[str, Any],
        gaps: list[str],
        unrecorded: list[str],
        source: str,
        scope: str | None,
        version: str | None,
        lane: str | None,
        base: str | None,
        keyed: bool,
    ) -> None:
        """Whatever the span's gaps, unrecorded fields, source, scope, lane, base and parent,
        the af-2 receipt and its digest equal the reference minter's."""
        key = b"secret" if keyed else None
        context = ReceiptContext(tuple(gaps), tuple(unrecorded), source, scope, version, base)
        parent = mint_receipt({"messages": []}, run_id="run-x", epoch=1, key=key)
        receipt = mint_receipt(
            request, run_id="run-x", epoch=2, parent=parent, key=key, lane=lane, context=context
        )
        span = {
            names.GAPS: gaps,
            names.RECEIPT_UNRECORDED: unrecorded,
            names.RECEIPT_SOURCE: source,
            names.RECEIPT_SCOPE_NAME: scope or "",
            names.RECEIPT_SCOPE_VERSION: version or "",
            names.RECEIPT_PARENT_DIGEST: parent.digest,
            names.EPOCH_LANE: lane or "",
            names.RUN_BASE: base or "",
        }
        expected = expected_attributes(
            _normalized(request),
            run_id="run-x",
            epoch=2,
            parent=1,
            parent_entries=[],
            key=key,
            scheme="af-2",
            span=span,
        )
        assert receipt.to_attributes() == expected

    @given(request=requests())
    @settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
    def test_bytes_is_the_size_of_the_canonical_request(self, request: dict[str, Any]) -> None:
        """af.receipt.bytes == len(canonical_json(request.to_dict())), without re-serializing."""
        normalized = Request.from_dict(request)
        receipt = mint_receipt(normalized, run_id="r", epoch=1)
        assert receipt.bytes == len(canonical_json(normalized.to_dict()))

    def test_dict_and_request_mint_the_same(self) -> None:
        """A plain dict and its Request mint the same receipt."""
        assert mint_receipt(FULL, run_id="r", epoch=1) == mint_receipt(
            Request.from_dict(FULL), run_id="r", epoch=1
        )

    def test_the_digest_binds_the_place_in_the_run(self) -> None:
        """The same request at another epoch or parent has another digest, same fingerprints."""
        first = mint_receipt(FULL, run_id="r", epoch=1)
        moved = mint_receipt(FULL, run_id="r", epoch=2)
        reparented = mint_receipt(FULL, run_id="r", epoch=1, parent=5)
        assert first.fingerprint_attributes() == moved.fingerprint_attributes()
        assert len({first.digest, moved.digest, reparented.digest}) == 3
        assert digest_preimage(first) != digest_preimage(moved)

    def test_receipt_digest_recomputes_the_digest(self) -> None:
        """receipt_digest gives back the digest from the fields; a changed field changes it."""
        plain_receipt = mint_receipt(FULL, run_id="r", epoch=1)
        keyed = mint_receipt(FULL, run_id="r", epoch=1, key="k")
        assert receipt_digest(plain_receipt) == plain_receipt.digest
        assert receipt_digest(keyed, key="k") == keyed.digest
        assert receipt_digest(keyed) is None
        assert receipt_digest(keyed, key="other") != keyed.digest
        edited = Receipt(**{**_fields(plain_receipt), "messages_count": 4, "messages_kept": 1})
        assert receipt_digest(edited) != plain_receipt.digest
        assert receipt_digest(mint_receipt(FULL, run_id="", epoch=1)) is None


def _fields(receipt: Receipt) -> dict[str, Any]:
    return {name: getattr(receipt, name) for name in Receipt.__slots__}  # type: ignore[attr-defined]


class TestParent:
    def test_kept_and_added_against_a_parent_receipt(self) -> None:
        """kept counts leading entries equal to the parent's; added holds the entries after them."""
        first = {"messages": [{"role": "user", "content": f"m{i}"} for i in range(3)]}
        grown = {"messages": [*first["messages"], {"role": "assistant", "content": "a"}]}
        parent = mint_receipt(first, run_id="r", epoch=1)
        child = mint_receipt(grown, run_id="r", epoch=2, parent=parent)
        assert (child.parent, child.messages_kept, child.messages_count) == (1, 3, 4)
        assert child.messages_added == tuple(entries_of(_normalized(grown), "r", digits=64)[3:])
        assert child.parent_digest == parent.digest
        assert child.to_attributes() == expected_attributes(
            _normalized(grown),
            run_id="r",
            epoch=2,
            parent=1,
            parent_entries=entries_of(_normalized(first), "r", digits=64),
            scheme="af-2",
            span={names.RECEIPT_PARENT_DIGEST: parent.digest},
        )

    def test_rewritten_history_keeps_only_the_common_prefix(self) -> None:
        """A rewrite of message 1 keeps only message 0; everything after is added again."""
        first = {"messages": [{"role": "user", "content": f"m{i}"} for i in range(4)]}
        rewritten = {"messages": [dict(m) for m in first["messages"]]}
        rewritten["messages"][1]["content"] = "changed"
        parent = mint_receipt(first, run_id="r", epoch=1)
        child = mint_receipt(rewritten, run_id="r", epoch=2, parent=parent)
        assert (child.messages_kept, len(child.messages_added)) == (1, 3)

    def test_parent_number_or_unminted_parent_keeps_nothing(self) -> None:
        """With a parent epoch number, or a parent without a receipt, every entry is added."""
        request = {"messages": [{"role": "user", "content": "hi"}]}
        absent = mint_receipt({"messages": "bad"}, run_id="r", epoch=1)
        for parent in (1, absent):
            child = mint_receipt(request, run_id="r", epoch=2, parent=parent)
            assert (child.parent, child.messages_kept, len(child.messages_added)) == (1, 0, 1)

    def test_attributes_stay_small_at_turn_1000(self) -> None:
        """At turn 1,000, each call's parent the previous call, every attribute is under 2,048 bytes."""
        memo = ReceiptDigests()
        base = Request.from_dict({"system": "be brief", "tools": [{"name": "f"}], "model": "m"})
        messages: list[FrozenDict] = []
        parent: Receipt | int = 0
        receipt: Receipt | None = None
        for turn in range(1, 1001):
            # Normalized once per message, as an agent's history holds them (O(n) per run, not n²).
            turn_request = Request.from_dict(
                {
                    "messages": [
                        {"role": "user", "content": f"question {turn} " + "x" * 200},
                        {"role": "assistant", "content": f"answer {turn}"},
                    ]
                }
            )
            messages.extend(turn_request.messages)
            request = replace(base, messages=tuple(messages))
            receipt = mint_receipt(
                request, run_id="run-long", epoch=turn, parent=parent, digests=memo
            )
            parent = receipt
        assert receipt is not None
        assert receipt.minted
        assert receipt.messages_count == 2000
        assert receipt.messages_kept == 1998
        for key, value in _with_place(receipt).items():
            size = len(canonical_json(value)) if not isinstance(value, str) else len(value.encode())
            assert size < 2048, key


class TestNotMinted:
    @pytest.mark.parametrize(
        "request_",
        [
            {
                "messages": [
                    {
                        "role": "assistant",
                        "parts": [
                            {
                                "type": "tool_call",
                                "id": "1",
                                "name": "f",
                                "arguments": {"x": math.nan},
                            }
                        ],
                    }
                ]
            },
            {
                "messages": [
                    {
                        "role": "tool",
                        "parts": [
                            {"type": "tool_call_response", "id": "1", "response": [math.inf]}
                        ],
                    }
                ]
            },
            {"messages": [{"role": "user", "parts": [{"type": "blob", "content": b"\x00"}]}]},
            {"params": {"temperature": math.nan}},
            {"tools": [{"name": "f", "parameters": {"default": object()}}]},
            {"system": [{"type": "text", "content": "s", "extra": {1: 2}}]},
            {"messages": "not a list"},
            {"messages": [{"content": "no role"}]},
            "not a mapping",
        ],
    )
    def test_unreadable_content(self, request_: Any) -> None:
        """Content that cannot be canonicalized or is not GenAI-shaped gives content-unreadable."""
        receipt = mint_receipt(request_, run_id="r", epoch=4, parent=3)
        assert (receipt.state, receipt.absent_reason) == ("absent", "content-unreadable")
        assert (receipt.run_id, receipt.epoch, receipt.parent) == ("r", 4, 3)
        assert receipt.to_attributes() == {
            names.RECEIPT_STATE: "absent",
            names.RECEIPT_ABSENT_REASON: "content-unreadable",
        }

    @pytest.mark.parametrize("run_id", ["", None, 5])
    def test_no_run_id(self, run_id: Any) -> None:
        """An empty (or non-string) run id mints nothing: no-run-id."""
        receipt = mint_receipt(FULL, run_id=run_id, epoch=1)
        assert (receipt.state, receipt.absent_reason) == ("absent", "no-run-id")

    @pytest.mark.parametrize("scheme", ["af-1", "af-2"])
    def test_empty_key_is_the_plain_scheme(self, scheme: str) -> None:
        """An empty key is no key: the receipt is plain and equals the unkeyed one."""
        assert mint_receipt(FULL, run_id="r", epoch=1, key="", scheme=scheme) == mint_receipt(
            FULL, run_id="r", epoch=1, scheme=scheme
        )
        keyed = mint_receipt(FULL, run_id="r", epoch=1, key=b"k", scheme=scheme)
        assert keyed.scheme == scheme + "-hmac"

    def test_new_receipts_are_af2(self) -> None:
        """Without a scheme, receipts are af-2: 64 hex digits, keyed ones with their key id."""
        plain_receipt = mint_receipt(FULL, run_id="r", epoch=1)
        keyed = mint_receipt(FULL, run_id="r", epoch=1, key=b"k")
        assert (plain_receipt.scheme, keyed.scheme) == ("af-2", "af-2-hmac")
        assert len(plain_receipt.digest or "") == 64
        assert keyed.key_id == key_id(b"k")
        assert plain_receipt.key_id is None

    def test_internal_failure_is_state_error(self) -> None:
        """A Request that breaks af_otel's own assumptions gives state error, never an exception."""
        broken = Request(tools=(FrozenDict(type="function"),))  # built directly: no tool name
        receipt = mint_receipt(broken, run_id="r", epoch=1)
        assert (receipt.state, receipt.absent_reason) == ("error", "internal-error")

    def test_bad_parent_value_does_not_raise(self) -> None:
        """A parent that is neither an int nor a Receipt reads as the base."""
        receipt = mint_receipt(FULL, run_id="r", epoch=1, parent="x")  # type: ignore[arg-type]
        assert (receipt.state, receipt.parent) == ("minted", 0)


def test_what_steers_the_model_changes_the_receipt() -> None:
    """Requests that differ only in a setting or flag that changes what the model does (a forced
    or forbidden tool, parallel calls, a response schema, a thinking budget, a tool error, a
    reasoning signature) mint pairwise different digests."""
    result = {"type": "tool_call_response", "id": "t1", "response": "upstream timeout"}
    thought = {"type": "reasoning", "content": "Weighing it."}
    base: dict[str, Any] = {
        "messages": [
            {"role": "user", "parts": [{"type": "text", "content": "weather?"}]},
            {"role": "assistant", "parts": [thought]},
            {"role": "user", "parts": [result]},
        ],
        "tools": [{"type": "function", "name": "get_time"}],
        "provider": "anthropic",
    }

    def with_params(**params: Any) -> dict[str, Any]:
        return {**base, "params": params}

    def with_parts(reasoning: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
        messages = [
            base["messages"][0],
            {"role": "assistant", "parts": [reasoning]},
            {"role": "user", "parts": [answer]},
        ]
        return {**base, "messages": messages}

    variants = [
        base,
        with_params(tool_choice={"type": "tool", "name": "get_time"}),
        with_params(tool_choice={"type": "none"}),
        with_params(tool_choice={"type": "auto", "disable_parallel_tool_use": True}),
        with_params(parallel_tool_calls=False),
        with_params(response_format={"type": "json_schema", "json_schema": {"schema": {}}}),
        with_params(thinking={"type": "enabled", "budget_tokens": 1024}),
        with_params(reasoning_effort="high"),
        with_parts(thought, {**result, "is_error": True}),
        with_parts({**thought, "signature": "sig-a"}, result),
        with_parts({**thought, "signature": "sig-b"}, result),
    ]
    digests = [mint_receipt(v, run_id="r", epoch=1).digest for v in variants]
    assert len(set(digests)) == len(variants)
    assert mint_receipt(
        with_parts(thought, {**result, "is_error": False}), run_id="r", epoch=1
    ) == (mint_receipt(base, run_id="r", epoch=1))
