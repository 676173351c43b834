"""The run table is bounded by bytes (``run_table_bytes``, ``AF_OTEL_RUN_TABLE_BYTES``): least
recently used runs go first, and a run that comes back after eviction still gets exact receipts,
in a lane of its own, numbered from 1 with no parent it cannot know."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from af_otel import names
from af_otel.model import Request
from af_otel.processor.engine import CallFacts, Engine
from af_otel.processor.run_table import STATE_DEPTH
from af_otel.processor.settings import DEFAULT_RUN_TABLE_BYTES, resolve_settings
from af_otel.receipts import ReceiptContext, mint_receipt
from af_otel.semconv import Limits

DOC = "Billing settings are per workspace; admins can change plans. " * 8


def history(run: str, turns: int) -> list[dict[str, Any]]:
    out = []
    for turn in range(turns):
        out.append({"role": "user", "parts": [{"type": "text", "content": f"{run} {turn} {DOC}"}]})
        out.append({"role": "assistant", "parts": [{"type": "text", "content": f"a{turn}"}]})
    return out[:-1]


def facts(run: str, turns: int, serial: int) -> CallFacts:
    return CallFacts(
        key=(1, serial),
        name="chat m",
        start_time=serial * 10,
        end_time=serial * 10 + 5,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "m",
            "gen_ai.input.messages": json.dumps(history(run, turns)),
            names.RUN_ID: run,
        },
        limits=Limits(),
    )


def test_the_setting_comes_from_argument_environment_or_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert resolve_settings(store=None).run_table_bytes == DEFAULT_RUN_TABLE_BYTES
    monkeypatch.setenv("AF_OTEL_RUN_TABLE_BYTES", "123456")
    assert resolve_settings(store=None).run_table_bytes == 123456
    assert resolve_settings(store=None, run_table_bytes=99).run_table_bytes == 99
    assert Engine(resolve_settings(store=None)).runs.max_bytes == 123456
    with pytest.raises(ValueError, match="run_table_bytes"):
        resolve_settings(store=None, run_table_bytes=-1)


def test_a_bad_environment_value_falls_back_to_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AF_OTEL_RUN_TABLE_BYTES", "lots")
    assert resolve_settings(store=None).run_table_bytes == DEFAULT_RUN_TABLE_BYTES


def test_many_runs_stay_within_the_byte_budget_least_recently_used_first() -> None:
    budget = 120_000
    engine = Engine(resolve_settings(store=None, content="none", run_table_bytes=budget))
    serial = 0
    lanes: dict[str, str] = {}
    for turns in range(1, 6):
        for run in range(40):
            serial += 1
            lanes[f"run-{run}"] = engine.enrich(facts(f"run-{run}", turns, serial)).attributes[
                names.EPOCH_LANE
            ]
            assert engine.runs.bytes <= budget
    assert engine.runs.evicted > 0
    assert engine.runs.get("run-39").lane == lanes["run-39"]  # the most recent stays
    assert engine.runs.get("run-0").lane != lanes["run-0"]  # the least recently used went first


def test_one_run_larger_than_the_budget_is_kept_while_it_is_the_only_one() -> None:
    engine = Engine(resolve_settings(store=None, content="none", run_table_bytes=1000))
    lane = engine.enrich(facts("big", 3, 1)).attributes[names.EPOCH_LANE]
    assert engine.runs.get("big").lane == lane
    engine.enrich(facts("other", 1, 2))
    assert engine.runs.get("big").lane != lane


def test_an_evicted_run_comes_back_with_an_exact_receipt_in_a_lane_of_its_own() -> None:
    engine = Engine(resolve_settings(store=None, content="none", run_table_bytes=30_000))
    first = engine.enrich(facts("r", 1, 1)).attributes
    second = engine.enrich(facts("r", 2, 2)).attributes
    assert second[names.EPOCH_PARENT] == 1
    for run in range(20):  # other conversations push "r" out
        engine.enrich(facts(f"x{run}", 2, 100 + run))
    back = engine.enrich(facts("r", 3, 3)).attributes
    assert back[names.RECEIPT_STATE] == names.STATE_MINTED
    assert back[names.EPOCH_LANE] != first[names.EPOCH_LANE]
    assert back[names.EPOCH] == 1  # numbered afresh in its new lane, never as epoch 3 of the old
    assert back[names.EPOCH_PARENT] == 0  # no parent it cannot know
    request = Request.from_dict({"messages": history("r", 3), "model": "m", "provider": "openai"})
    # The same context the span binds (af-2): its gap kinds and unrecorded fields, no scope.
    context = ReceiptContext(
        gaps=tuple(back[names.GAPS]), unrecorded=tuple(back[names.RECEIPT_UNRECORDED])
    )
    fresh = mint_receipt(request, run_id="r", epoch=1, lane=back[names.EPOCH_LANE], context=context)
    assert back[names.RECEIPT_DIGEST] == fresh.digest
    assert back[names.RECEIPT_MESSAGES_CHAIN] == fresh.messages_chain


def test_a_parent_past_the_state_depth_is_still_bound_by_its_digest() -> None:
    """A call whose parent finished more than STATE_DEPTH calls before it ended (its request and
    receipt forgotten by then) still binds the parent's af-2 digest: the record keeps it."""
    engine = Engine(resolve_settings(store=None, content="none"))
    first = engine.enrich(facts("r", 1, 1)).attributes
    # Starts after the first call ended; ends after STATE_DEPTH + 2 more calls of the run.
    slow = dataclasses.replace(facts("r", 2, 2), start_time=16, end_time=100_000)
    for serial in range(3, 5 + STATE_DEPTH):
        engine.enrich(facts("r", 1, serial))
    late = engine.enrich(slow).attributes
    assert late[names.EPOCH_PARENT] == first[names.EPOCH]
    assert late[names.RECEIPT_MESSAGES_KEPT] == 0  # the parent's entries are forgotten
    assert late[names.RECEIPT_PARENT_DIGEST] == first[names.RECEIPT_DIGEST]
