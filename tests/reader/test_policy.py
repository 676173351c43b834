"""The gate's policy: `judge` holds verdicts to a `Policy`; damage always fails with 1 and wins,
a broken rule fails with 4, and the outcome only gets worse as the calls or the policy do. A
`Gate` fed one call at a time is `judge`, keeping only a few calls per rule."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from af_otel import names
from af_otel.reader import SERVED_GAPS, Verdict, VerdictStatus
from af_otel.reader.policy import (
    EXIT_DAMAGED,
    EXIT_PASSED,
    EXIT_POLICY,
    NAMED,
    Gate,
    Outcome,
    Policy,
    judge,
    parse_fail_on,
    parse_percent,
)

KINDS = list(SERVED_GAPS)
WORSE = {
    VerdictStatus.VERIFIED: (
        VerdictStatus.VERIFIED,
        VerdictStatus.RECONSTRUCTED,
        VerdictStatus.DAMAGED,
    ),
    VerdictStatus.RECONSTRUCTED: (VerdictStatus.RECONSTRUCTED, VerdictStatus.DAMAGED),
    VerdictStatus.DAMAGED: (VerdictStatus.DAMAGED,),
}


def call(
    status: VerdictStatus, epoch: int = 1, kinds: tuple[str, ...] = (), run: str = "r"
) -> Verdict:
    return Verdict(status, run, epoch, f"{epoch:016x}", "test", gap_kinds=kinds)


verdicts = st.builds(
    call,
    st.sampled_from(list(VerdictStatus)),
    st.integers(1, 50),
    st.lists(st.sampled_from(KINDS), unique=True, max_size=3).map(tuple),
)
calls = st.lists(verdicts, max_size=12)
policies = st.builds(
    Policy,
    require=st.sampled_from([VerdictStatus.VERIFIED, VerdictStatus.RECONSTRUCTED]),
    fail_on=st.frozensets(st.sampled_from(KINDS), max_size=3),
    max_reconstructed=st.none() | st.integers(0, 100).map(float) | st.sampled_from([12.5, 33.3]),
)


def fails(outcome: Outcome) -> bool:
    return outcome.exit_code != EXIT_PASSED


@given(calls, policies)
def test_damage_alone_makes_exit_1_whatever_the_policy(
    found: list[Verdict], policy: Policy
) -> None:
    """The exit code is 1 exactly when a call is damaged; else 4 exactly when a rule is broken."""
    outcome = judge(found, policy)
    damaged = any(v.status is VerdictStatus.DAMAGED for v in found)
    assert (outcome.exit_code == EXIT_DAMAGED) == damaged
    if not damaged:
        assert outcome.exit_code == (EXIT_POLICY if outcome.breaches else EXIT_PASSED)
    assert outcome.calls == len(found)


@given(calls)
def test_the_default_policy_asks_only_that_nothing_is_damaged(found: list[Verdict]) -> None:
    """Without a policy a read passes exactly when no call is damaged (today's gate)."""
    outcome = judge(found)
    assert outcome.passed == all(v.status is not VerdictStatus.DAMAGED for v in found)
    assert judge(found, Policy(require=VerdictStatus.RECONSTRUCTED)) == dataclasses.replace(
        outcome, policy=Policy(require=VerdictStatus.RECONSTRUCTED)
    )


@given(calls, verdicts, policies, st.data())
def test_adding_or_worsening_a_call_never_turns_fail_into_pass(
    found: list[Verdict], extra: Verdict, policy: Policy, data: st.DataObject
) -> None:
    """A damaged call added fails with 1; a call made worse (a lower verdict, more gap kinds)
    keeps a failing read failing; any call added keeps a failure of every rule but the share."""
    before = judge(found, policy)
    damaged = dataclasses.replace(extra, status=VerdictStatus.DAMAGED)
    assert judge([*found, damaged], policy).exit_code == EXIT_DAMAGED
    if found:
        index = data.draw(st.integers(0, len(found) - 1))
        old = found[index]
        status = data.draw(st.sampled_from(WORSE[old.status]))
        more = data.draw(st.lists(st.sampled_from(KINDS), max_size=2))
        worse = dataclasses.replace(
            old, status=status, gap_kinds=tuple(dict.fromkeys((*old.gap_kinds, *more)))
        )
        after = judge([*found[:index], worse, *found[index + 1 :]], policy)
        if fails(before):
            assert fails(after)
        assert after.exit_code >= before.exit_code or after.exit_code == EXIT_DAMAGED
    if fails(before) and policy.max_reconstructed is None:
        assert fails(judge([*found, extra], policy))


@given(calls, policies, policies)
def test_a_stricter_policy_never_passes_what_a_laxer_one_fails(
    found: list[Verdict], one: Policy, other: Policy
) -> None:
    """The union of two policies' demands fails whenever either of them does."""
    limits = [p.max_reconstructed for p in (one, other) if p.max_reconstructed is not None]
    both = Policy(
        require=VerdictStatus.VERIFIED
        if VerdictStatus.VERIFIED in (one.require, other.require)
        else VerdictStatus.RECONSTRUCTED,
        fail_on=one.fail_on | other.fail_on,
        max_reconstructed=min(limits) if limits else None,
    )
    strict = judge(found, both)
    for lax in (one, other):
        if fails(judge(found, lax)):
            assert fails(strict)


@given(calls, policies)
def test_each_breach_names_exactly_the_calls_that_break_its_rule(
    found: list[Verdict], policy: Policy
) -> None:
    """Every rule broken is listed once with the calls breaking it, and no rule is listed that
    holds; the order of the calls changes nothing but the order inside a breach."""
    outcome = judge(found, policy)
    listed = {(b.rule, b.value): b.calls for b in outcome.breaches}
    damaged = tuple(v for v in found if v.status is VerdictStatus.DAMAGED)
    assert listed.get(("damaged", ""), ()) == damaged
    if policy.require is VerdictStatus.VERIFIED:
        unverified = tuple(v for v in found if v.status is not VerdictStatus.VERIFIED)
        assert listed.get(("require", "verified"), ()) == unverified
    else:
        assert not any(rule == "require" for rule, _ in listed)
    for kind in KINDS:
        carrying = tuple(v for v in found if kind in v.gap_kinds)
        expected = carrying if kind in policy.fail_on else ()
        assert listed.get(("fail-on", kind), ()) == expected
    for breach in outcome.breaches:
        assert breach.calls
        assert breach.judged == len(found)
        assert f"{len(breach.calls)} of {len(found)} call(s)" in breach.text
    backwards = judge(list(reversed(found)), policy)
    assert backwards.exit_code == outcome.exit_code
    assert [(b.rule, b.value, len(b.calls)) for b in backwards.breaches] == [
        (b.rule, b.value, len(b.calls)) for b in outcome.breaches
    ]


def test_the_share_of_reconstructed_calls_is_compared_exactly() -> None:
    """1 call of 10 reconstructed is 10%, which --max-reconstructed 10% allows and 9.9% does
    not; 1 of 3 is more than 33.3%."""
    ten = [call(VerdictStatus.RECONSTRUCTED, 1)] + [
        call(VerdictStatus.VERIFIED, k) for k in range(2, 11)
    ]
    assert judge(ten, Policy(max_reconstructed=10)).passed
    over = judge(ten, Policy(max_reconstructed=9.9))
    assert over.exit_code == EXIT_POLICY
    assert [b.option for b in over.breaches] == ["--max-reconstructed 9.9%"]
    assert (
        over.breaches[0].text
        == "1 of 10 call(s) are reconstructed (10%), more than 9.9%: r epoch 1"
    )
    three = [
        call(VerdictStatus.RECONSTRUCTED, 1),
        call(VerdictStatus.VERIFIED, 2),
        call(VerdictStatus.VERIFIED, 3),
    ]
    assert not judge(three, Policy(max_reconstructed=33.3)).passed
    assert judge(three, Policy(max_reconstructed=33.4)).passed


def test_a_breach_names_three_calls_and_counts_the_rest() -> None:
    """The sentence names the first three calls and says how many more there are."""
    found = [call(VerdictStatus.RECONSTRUCTED, k, (names.GAP_NO_FOLD_BASE,)) for k in range(1, 6)]
    outcome = judge(
        found, Policy(require=VerdictStatus.VERIFIED, fail_on=frozenset({names.GAP_NO_FOLD_BASE}))
    )
    assert [b.option for b in outcome.breaches] == ["--require verified", "--fail-on no-fold-base"]
    assert outcome.breaches[1].text == (
        "5 of 5 call(s) carry no-fold-base: r epoch 1, r epoch 2, r epoch 3, and 2 more"
    )


def test_damage_wins_and_is_listed_first() -> None:
    """A damaged call makes exit 1 even when a rule is broken too; both are reported."""
    found = [call(VerdictStatus.DAMAGED, 1), call(VerdictStatus.RECONSTRUCTED, 2)]
    outcome = judge(found, Policy(require=VerdictStatus.VERIFIED))
    assert outcome.exit_code == EXIT_DAMAGED
    assert [b.option for b in outcome.breaches] == ["damaged", "--require verified"]
    assert outcome.breaches[0].text == "1 of 2 call(s) are damaged: r epoch 1"


def test_options_parse_or_name_what_is_wrong() -> None:
    """Gap kinds and percentages parse from their option spelling; an unknown kind is refused
    naming it and every known kind, a bad share naming the value."""
    assert parse_fail_on("no-fold-base, no-receipt-on-chart") == {
        names.GAP_NO_FOLD_BASE,
        names.GAP_NO_RECEIPT,
    }
    with pytest.raises(ValueError, match="unknown gap kind 'no-such'") as raised:
        parse_fail_on("no-fold-base,no-such")
    assert all(kind in str(raised.value) for kind in KINDS)
    assert parse_percent("12.5%") == 12.5
    assert parse_percent(" 7 ") == 7.0
    for bad in ("", "ten%", "101%", "-1", "nan", "inf%"):
        with pytest.raises(ValueError, match="%"):
            parse_percent(bad)


def test_a_policy_refuses_what_no_gate_can_mean() -> None:
    """Requiring only "damaged", an unknown kind and a share past 100% are refused."""
    with pytest.raises(ValueError, match="verified or reconstructed"):
        Policy(require=VerdictStatus.DAMAGED)
    with pytest.raises(ValueError, match="unknown gap kind"):
        Policy(fail_on=frozenset({"made-up"}))
    with pytest.raises(ValueError, match="between"):
        Policy(max_reconstructed=150)


@given(calls, policies, st.none() | st.integers(NAMED, 6))
def test_a_gate_fed_one_call_at_a_time_is_judge(
    found: list[Verdict], policy: Policy, keep: int | None
) -> None:
    """A `Gate` given the calls one by one gives judge's outcome: the same counts, rules,
    counts per rule, sentences and exit code; each breach holds the first ``keep`` calls judge's
    holds, in order (every one when keep is None)."""
    gate: Gate[Verdict] = Gate(policy, keep=keep)
    for verdict in found:
        gate.add(verdict, verdict.status, verdict.gap_kinds)
    fed = gate.outcome()
    whole = judge(found, policy)
    assert (fed.verified, fed.reconstructed, fed.damaged) == (
        whole.verified,
        whole.reconstructed,
        whole.damaged,
    )
    assert fed.exit_code == whole.exit_code
    assert [(b.rule, b.value, b.count, b.judged, b.text) for b in fed.breaches] == [
        (b.rule, b.value, b.count, b.judged, b.text) for b in whole.breaches
    ]
    for kept, every in zip(fed.breaches, whole.breaches, strict=True):
        assert every.count == len(every.calls)
        assert kept.calls == every.calls[:keep]
    if keep is None:
        assert fed == whole


def test_a_gate_keeps_no_more_than_asked_however_many_calls() -> None:
    """A thousand damaged calls: counted, three kept; a gate cannot keep fewer than it names."""
    gate: Gate[Verdict] = Gate(Policy(require=VerdictStatus.VERIFIED))
    for epoch in range(1, 1001):
        gate.add(call(VerdictStatus.DAMAGED, epoch), VerdictStatus.DAMAGED, ())
    outcome = gate.outcome()
    assert [(b.option, b.count, len(b.calls)) for b in outcome.breaches] == [
        ("damaged", 1000, NAMED),
        ("--require verified", 1000, NAMED),
    ]
    assert outcome.breaches[0].text == (
        "1000 of 1000 call(s) are damaged: r epoch 1, r epoch 2, r epoch 3, and 997 more"
    )
    with pytest.raises(ValueError, match="at least 3"):
        Gate(keep=NAMED - 1)
