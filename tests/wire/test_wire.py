"""Verdicts against the wire: a tool-using agent on the real openai and anthropic clients, under real
instrumentations, talking over real HTTP to a loopback server that logs every request body; every
epoch af_otel's reader calls `verified` must be exactly the request the server received."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest

from af_otel import names
from af_otel.reader.verify import VerdictStatus
from tests.wire.conftest import Outcomes
from tests.wire.convert import differences, from_anthropic, from_openai, from_view
from tests.wire.harness import (
    SCENARIOS,
    Scenario,
    describe,
    disagreements,
    names_field,
    shared_requests,
)


@pytest.mark.instrumentation
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_no_epoch_claims_more_than_its_wire_request(
    scenario: Scenario, wire_outcomes: Outcomes
) -> None:
    """A verified epoch's served view is its wire request on system, messages, tools, model and
    every dial set; any other epoch differs only where one of its gaps names the field. Where the
    wire tap pairs the requests with their spans (the default), every receipt is minted from the
    body sent and every epoch is verified, under the SDK's default span limits too."""
    outcome = wire_outcomes[scenario]
    assert outcome.wire_requests == len(outcome.epochs) == scenario.calls
    account = describe(outcome)
    assert not outcome.overclaims, account
    assert not outcome.unnamed, account
    assert not outcome.collisions, account
    if not scenario.cut:
        assert outcome.minted == scenario.calls, account
    if scenario.wire:
        # Minted from the body the client sent: every epoch verified, the default span limits
        # included (docs/reader.md, span limits on a call minted from the wire): they cut the
        # instrumentation's attributes, which the receipt and the commits were not taken from.
        assert {e.source for e in outcome.epochs} == {names.SOURCE_WIRE}, account
        for epoch in outcome.epochs:
            kinds = {kind for kind, _ in epoch.gaps}
            assert names.GAP_SPAN_LIMITS not in kinds, account
            assert names.GAP_CACHE_TRANSFORM not in kinds, account  # sent to the provider's host
        assert outcome.count(VerdictStatus.VERIFIED) == scenario.calls, account
    else:
        assert {e.source for e in outcome.epochs} == {names.SOURCE_INSTRUMENTATION}, account
    if scenario.control:
        # every field recorded: every epoch verifies, and each names the call it grew from (the
        # fan-in follow-up its branch, not whichever parallel call finished last)
        assert outcome.count(VerdictStatus.VERIFIED) == scenario.calls, account
        assert not outcome.wrong_parents, account


@pytest.mark.instrumentation
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_served_request_rebuilds_the_body_sent(scenario: Scenario, wire_outcomes: Outcomes) -> None:
    """`af-otel served --request` on a verified call minted from the wire is the body the client
    sent, as RFC 8785 JSON with nothing left out (its spelling is in the store); from an
    instrumentation's record it is written in one spelling and says what it leaves out; any
    other call is refused, never guessed."""
    outcome = wire_outcomes[scenario]
    for epoch in outcome.epochs:
        if epoch.status != VerdictStatus.VERIFIED:
            assert epoch.replay.startswith("refused: "), (epoch.epoch, epoch.replay)
        elif scenario.wire:
            assert epoch.replay == "equal", (epoch.epoch, epoch.replay)
        else:
            assert epoch.replay.startswith("not exact: "), (epoch.epoch, epoch.replay)
            assert "not on record" in epoch.replay, (epoch.epoch, epoch.replay)


@pytest.mark.instrumentation
@pytest.mark.parametrize("client", ["openai", "anthropic"])
def test_instrumentations_agree_on_what_both_record(client: str, wire_outcomes: Outcomes) -> None:
    """One wire request through two instrumentations mints the same model, system, tools, messages
    chain and params wherever both record what the field covers."""
    outcomes = [wire_outcomes[s] for s in SCENARIOS if s.client == client]
    pairs = [
        (first, second)
        for index, first in enumerate(outcomes)
        for second in outcomes[index + 1 :]
        if first.scenario.profile == second.scenario.profile
    ]
    # The agent and the server are deterministic: one profile sends the same requests every time.
    for first, second in pairs:
        assert shared_requests(first, second) == first.scenario.calls
    found = [d for first, second in pairs for d in disagreements(first, second)]
    assert not found, "\n".join(d.account for d in found[:40])


_ANTHROPIC_BODY: dict[str, Any] = {
    "model": "claude-sonnet-5-5",
    "max_tokens": 512,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "get_time", "description": "Time now.", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "tool", "name": "get_time"},
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "messages": [
        {"role": "user", "content": "Time?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Look it up.", "signature": "c2ln"},
                {"type": "tool_use", "id": "t1", "name": "get_time", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "down", "is_error": True}
            ],
        },
    ],
}


def _view_of_anthropic_body() -> SimpleNamespace:
    """The body above as a faithful served view would hold it (GenAI part shapes)."""
    return SimpleNamespace(
        system=({"type": "text", "content": "Be brief."},),
        messages=(
            {"role": "user", "parts": ({"type": "text", "content": "Time?"},)},
            {
                "role": "assistant",
                "parts": (
                    {"type": "reasoning", "content": "Look it up.", "signature": "c2ln"},
                    {"type": "tool_call", "id": "t1", "name": "get_time", "arguments": {}},
                ),
            },
            {
                "role": "user",
                "parts": (
                    {
                        "type": "tool_call_response",
                        "id": "t1",
                        "response": "down",
                        "is_error": True,
                    },
                ),
            },
        ),
        tools=(
            {
                "type": "function",
                "name": "get_time",
                "description": "Time now.",
                "parameters": {"type": "object"},
            },
        ),
        params={
            "max_tokens": 512,
            "tool_choice": {"type": "tool", "name": "get_time"},
            "thinking_budget": 1024,
        },
        model="claude-sonnet-5-5",
    )


def test_a_faithful_view_has_no_differences() -> None:
    """The converters agree on a view that holds the whole Anthropic request."""
    assert differences(from_anthropic(_ANTHROPIC_BODY), from_view(_view_of_anthropic_body())) == []


@pytest.mark.parametrize(
    ("change", "field", "aspect"),
    [
        (lambda v: v.messages[2]["parts"][0].pop("is_error"), "messages", "tool result error flag"),
        (lambda v: v.messages[1]["parts"][0].pop("signature"), "messages", "thinking signature"),
        (lambda v: v.messages[0]["parts"][0].update(content="Ti"), "messages", "text cut"),
        (lambda v: setattr(v, "tools", ()), "tools", ""),
        (lambda v: v.params.pop("tool_choice"), "params.tool_choice", ""),
        (lambda v: v.params.pop("thinking_budget"), "params.thinking_budget", ""),
        (lambda v: setattr(v, "system", ()), "system", ""),
    ],
)
def test_each_loss_shows_as_a_difference(change: Any, field: str, aspect: str) -> None:
    """Dropping one thing the wire had from the view is one named difference."""
    view = _view_of_anthropic_body()
    view.messages = copy.deepcopy(view.messages)
    view.params = dict(view.params)
    change(view)
    found = differences(from_anthropic(_ANTHROPIC_BODY), from_view(view))
    assert [(d.field, d.aspect) for d in found] == [(field, aspect)]


def test_openai_tool_messages_and_dials_convert() -> None:
    """OpenAI's system message, tool calls with string arguments, tool results and dials."""
    body = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Time?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": '{"tz": "UTC"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "09:00"},
        ],
        "stream": True,
        "max_completion_tokens": 64,
        "stop": "END",
        "tool_choice": {"type": "function", "function": {"name": "get_time"}},
        "parallel_tool_calls": False,
    }
    wire = from_openai(body)
    assert wire.system == ("Be brief.",)
    assert wire.messages[1] == ("assistant", (("tool_call", "c1", "get_time", {"tz": "UTC"}),))
    assert wire.messages[2] == ("tool", (("tool_result", "c1", "09:00", False),))
    assert wire.params == {
        "max_tokens": 64,
        "stop": ["END"],
        "tool_choice": {"tool": "get_time"},
        "parallel_tool_calls": False,
    }


def test_a_gap_names_a_field_it_covers_and_lists() -> None:
    """A gap that enumerates fields names only those; one that covers a field and lists none
    names it; one that does not cover it never does, nor does provider-defaults."""
    assert not names_field("provider-defaults", "not set: temperature, seed", "params.seed")
    assert names_field("unrecorded-field", "not recorded by x: stop_sequences", "params.stop")
    assert not names_field("unrecorded-field", "not recorded by x: seed", "params.tool_choice")
    listing = "not recorded by some.scope: tool_choice, tool_result.is_error"
    assert names_field("unrecorded-field", listing, "messages", "tool result error flag")
    assert not names_field("unrecorded-field", listing, "messages", "thinking signature")
    assert not names_field("unrecorded-field", listing, "messages", "text cut")
    assert names_field("no-conversation-on-record", "", "messages")
    assert not names_field("thinking-replay", "reasoning withheld or sealed", "params.seed")
