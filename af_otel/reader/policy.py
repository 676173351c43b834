"""`judge`: whether the verdicts of a read meet a gate's `Policy`, and which rule fails if not.

Damage always fails a gate (`EXIT_DAMAGED`). A policy adds what a record may lack without being
damaged: every call verified, no call carrying a named gap kind, at most a share of the calls
reconstructed; breaking one of them is `EXIT_POLICY`, so that a pipeline tells "someone edited
this" from "this is not the evidence we asked for". Pure and free of any command line: every gate
(``af-otel verify``, an audit over stored verdicts) parses its options into a `Policy` here and
prints the `Outcome`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final, Literal

from af_otel.reader.gaps import SERVED_GAPS
from af_otel.reader.verify import Verdict, VerdictStatus

__all__ = [
    "EXIT_DAMAGED",
    "EXIT_PASSED",
    "EXIT_POLICY",
    "Breach",
    "Outcome",
    "Policy",
    "judge",
    "parse_fail_on",
    "parse_percent",
]

EXIT_PASSED: Final = 0
EXIT_DAMAGED: Final = 1
# 2 and 3 are the reading commands' (unreadable input, nothing to verify); 4 is the first free.
EXIT_POLICY: Final = 4

Rule = Literal["damaged", "require", "fail-on", "max-reconstructed"]
# Better first: a call meets ``require`` when its status ranks at least as high.
_RANK: Final = {
    VerdictStatus.VERIFIED: 2,
    VerdictStatus.RECONSTRUCTED: 1,
    VerdictStatus.DAMAGED: 0,
}
# How many calls a breach names in its sentence; the rest are counted.
NAMED: Final = 3


def parse_fail_on(text: str) -> frozenset[str]:
    """The gap kinds of a ``KIND,KIND`` list; an unknown or empty kind raises ValueError
    naming it and every known kind."""
    kinds = [kind.strip() for kind in text.split(",")]
    unknown = [kind for kind in kinds if kind not in SERVED_GAPS]
    if unknown:
        raise ValueError(
            f"unknown gap kind {unknown[0]!r}; the known kinds are {', '.join(SERVED_GAPS)}"
        )
    return frozenset(kinds)


def parse_percent(text: str) -> float:
    """``N%`` or ``N`` (0 to 100, decimals allowed) as a number; anything else raises ValueError."""
    number = text.strip().removesuffix("%").strip()
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"{text!r} is not a percentage (give N% with 0 <= N <= 100)") from None
    if not (math.isfinite(value) and 0 <= value <= 100):
        raise ValueError(f"{text!r} is not between 0% and 100%")
    return value


@dataclass(frozen=True, slots=True)
class Policy:
    """What a gate asks of a read beyond "nothing damaged" (the default asks nothing more).

    ``require``: the least verdict every call must have (``reconstructed``, the default, says
    only "nothing damaged"); ``fail_on``: gap kinds no call may carry; ``max_reconstructed``:
    the most calls, in percent of all, that may be reconstructed (None: no limit). A value
    outside these raises ValueError."""

    require: VerdictStatus = VerdictStatus.RECONSTRUCTED
    fail_on: frozenset[str] = field(default_factory=frozenset)
    max_reconstructed: float | None = None

    def __post_init__(self) -> None:
        if self.require is VerdictStatus.DAMAGED:
            raise ValueError(
                "require must be verified or reconstructed: every call is at least damaged, "
                "so requiring that asks nothing"
            )
        if not isinstance(self.fail_on, frozenset):
            object.__setattr__(self, "fail_on", frozenset(self.fail_on))
        if self.fail_on:
            parse_fail_on(",".join(sorted(self.fail_on)))
        if self.max_reconstructed is not None:
            parse_percent(str(self.max_reconstructed))

    @property
    def options(self) -> tuple[str, ...]:
        """The policy as a gate's options spell it (the default policy: none)."""
        given = (
            [f"--require {self.require.value}"] if self.require is VerdictStatus.VERIFIED else []
        )
        given += [f"--fail-on {kind}" for kind in SERVED_GAPS if kind in self.fail_on]
        if self.max_reconstructed is not None:
            given.append(f"--max-reconstructed {_percent(self.max_reconstructed)}")
        return tuple(given)


def _named(calls: tuple[Verdict, ...]) -> str:
    shown = ", ".join(f"{v.run_id or '(no run)'} epoch {v.epoch}" for v in calls[:NAMED])
    more = len(calls) - NAMED
    return f"{shown}, and {more} more" if more > 0 else shown


def _percent(value: float) -> str:
    return f"{value:g}%"


@dataclass(frozen=True, slots=True)
class Breach:
    """One rule the read breaks: the rule (``damaged`` is always a rule), its value as given
    (``verified``, a gap kind, ``10%``), the calls that break it, and how many calls were judged."""

    rule: Rule
    value: str
    calls: tuple[Verdict, ...]
    judged: int

    @property
    def option(self) -> str:
        """The rule as a gate's option spells it (``--fail-on no-fold-base``), or ``damaged``."""
        return "damaged" if self.rule == "damaged" else f"--{self.rule} {self.value}"

    @property
    def text(self) -> str:
        """One sentence: how many calls break the rule, naming the first few."""
        count = f"{len(self.calls)} of {self.judged} call(s)"
        if self.rule == "damaged":
            what = "are damaged"
        elif self.rule == "require":
            what = f"are not {self.value}"
        elif self.rule == "fail-on":
            what = f"carry {self.value}"
        else:
            share = _percent(100 * len(self.calls) / self.judged)
            what = f"are reconstructed ({share}), more than {self.value}"
        return f"{count} {what}: {_named(self.calls)}"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What `judge` found: the counts of each verdict and every rule broken, in a fixed order
    (damage first, then ``require``, each ``fail-on`` kind in catalogue order, the share)."""

    policy: Policy
    verified: int
    reconstructed: int
    damaged: int
    breaches: tuple[Breach, ...] = ()

    @property
    def calls(self) -> int:
        return self.verified + self.reconstructed + self.damaged

    @property
    def exit_code(self) -> int:
        """`EXIT_DAMAGED` when any call is damaged (damage wins), else `EXIT_POLICY` when a rule
        is broken, else `EXIT_PASSED`."""
        if self.damaged:
            return EXIT_DAMAGED
        return EXIT_POLICY if self.breaches else EXIT_PASSED

    @property
    def passed(self) -> bool:
        return not self.breaches


def judge(verdicts: Iterable[Verdict], policy: Policy | None = None) -> Outcome:
    """The `Outcome` of holding ``verdicts`` (each carrying its call's gap kinds, as `verify`
    gives them) to ``policy`` (default: nothing damaged)."""
    policy = policy if policy is not None else Policy()
    calls = tuple(verdicts)
    by_status = {status: tuple(v for v in calls if v.status is status) for status in VerdictStatus}
    breaches: list[Breach] = []

    def breach(rule: Rule, value: str, broken: tuple[Verdict, ...]) -> None:
        if broken:
            breaches.append(Breach(rule, value, broken, len(calls)))

    breach("damaged", "", by_status[VerdictStatus.DAMAGED])
    floor = _RANK[policy.require]
    if policy.require is not VerdictStatus.RECONSTRUCTED:  # "nothing damaged" is the rule above
        breach("require", policy.require.value, tuple(v for v in calls if _RANK[v.status] < floor))
    for kind in (k for k in SERVED_GAPS if k in policy.fail_on):
        breach("fail-on", kind, tuple(v for v in calls if kind in v.gap_kinds))
    limit = policy.max_reconstructed
    reconstructed = by_status[VerdictStatus.RECONSTRUCTED]
    # Exact decimal arithmetic: 1 call of 10 is 10%, which "at most 10%" allows.
    if limit is not None and len(reconstructed) * 100 > Fraction(str(limit)) * len(calls):
        breach("max-reconstructed", _percent(limit), reconstructed)
    return Outcome(
        policy,
        len(by_status[VerdictStatus.VERIFIED]),
        len(reconstructed),
        len(by_status[VerdictStatus.DAMAGED]),
        tuple(breaches),
    )
