"""`judge`: whether the verdicts of a read meet a gate's `Policy`, and which rule fails if not.

Damage always fails a gate (`EXIT_DAMAGED`). A policy adds what a record may lack without being
damaged: every call verified, no call carrying a named gap kind, at most a share of the calls
reconstructed; breaking one of them is `EXIT_POLICY`, so that a pipeline tells "someone edited
this" from "this is not the evidence we asked for". Pure and free of any command line: every gate
parses its options into a `Policy` here and prints the `Outcome`. The rules live in one place,
`Gate`, which takes one call at a time and keeps counts and a few calls to name, so that
``af-otel audit`` judges a day in bounded memory by the rules ``af-otel verify`` judges a file by
(`judge`: a gate fed a whole list).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final, Generic, Literal, Protocol, TypeVar

from af_otel.model.gap_kinds import SERVED_GAPS
from af_otel.reader.verify import Verdict, VerdictStatus

__all__ = [
    "EXIT_DAMAGED",
    "EXIT_PASSED",
    "EXIT_POLICY",
    "NAMED",
    "Breach",
    "Gate",
    "NamedCall",
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


class NamedCall(Protocol):
    """What a gate needs to name a call in a breach: its run, its epoch, its span (a `Verdict`,
    an audit's result)."""

    @property
    def run_id(self) -> str | None: ...

    @property
    def epoch(self) -> int: ...

    @property
    def span_id(self) -> str: ...


C = TypeVar("C", bound=NamedCall)


def _named(calls: Sequence[NamedCall], count: int) -> str:
    shown = ", ".join(f"{v.run_id or '(no run)'} epoch {v.epoch}" for v in calls[:NAMED])
    more = count - min(NAMED, len(calls))
    return f"{shown}, and {more} more" if more > 0 else shown


def _percent(value: float) -> str:
    return f"{value:g}%"


@dataclass(frozen=True, slots=True)
class Breach(Generic[C]):
    """One rule the read breaks: the rule (``damaged`` is always a rule), its value as given
    (``verified``, a gap kind, ``10%``), the calls kept that break it (every one when `judge`
    held the verdicts, the first few when a `Gate` was told to keep few), how many calls break
    it (``count``) and how many calls were judged."""

    rule: Rule
    value: str
    calls: tuple[C, ...]
    judged: int
    count: int

    @property
    def option(self) -> str:
        """The rule as a gate's option spells it (``--fail-on no-fold-base``), or ``damaged``."""
        return "damaged" if self.rule == "damaged" else f"--{self.rule} {self.value}"

    @property
    def text(self) -> str:
        """One sentence: how many calls break the rule, naming the first few."""
        count = f"{self.count} of {self.judged} call(s)"
        if self.rule == "damaged":
            what = "are damaged"
        elif self.rule == "require":
            what = f"are not {self.value}"
        elif self.rule == "fail-on":
            what = f"carry {self.value}"
        else:
            share = _percent(100 * self.count / self.judged)
            what = f"are reconstructed ({share}), more than {self.value}"
        return f"{count} {what}: {_named(self.calls, self.count)}"


@dataclass(frozen=True, slots=True)
class Outcome(Generic[C]):
    """What `judge` (or a `Gate`) found: the counts of each verdict and every rule broken, in a
    fixed order (damage first, then ``require``, each ``fail-on`` kind in catalogue order, the
    share)."""

    policy: Policy
    verified: int
    reconstructed: int
    damaged: int
    breaches: tuple[Breach[C], ...] = ()

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


@dataclass(slots=True)
class _Broken(Generic[C]):
    """The calls breaking one rule so far: how many, and the first ``keep`` of them."""

    keep: int | None
    count: int = 0
    kept: list[C] = field(default_factory=list)

    def add(self, call: C) -> None:
        self.count += 1
        if self.keep is None or len(self.kept) < self.keep:
            self.kept.append(call)


class Gate(Generic[C]):
    """A `Policy` held to calls one at a time (`add`), for reads too large to hold their verdicts
    (``af-otel audit`` over a day): it keeps the counts of each verdict and of each rule, and
    only the first ``keep`` calls breaking each rule (None: every one; at least `NAMED`, the
    calls a breach's sentence names), so its memory is bounded
    by the policy, never by the read. `outcome` is what `judge` gives on the same calls in the
    same order, but for the calls a breach holds beyond the first ``keep``.

    Every rule is here, once: `judge` is a gate that keeps every call, fed a whole list."""

    __slots__ = ("_by_status", "_fail_on", "_floor", "_require", "policy")

    def __init__(self, policy: Policy | None = None, keep: int | None = NAMED) -> None:
        if keep is not None and keep < NAMED:  # a breach's sentence names NAMED calls
            raise ValueError(f"keep must be None or at least {NAMED}, got {keep}")
        self.policy = policy if policy is not None else Policy()
        self._by_status: dict[VerdictStatus, _Broken[C]] = {s: _Broken(keep) for s in VerdictStatus}
        self._floor = _RANK[self.policy.require]
        # "nothing damaged" is the damage rule; only a higher floor is a rule of its own.
        self._require: _Broken[C] | None = (
            _Broken(keep) if self.policy.require is not VerdictStatus.RECONSTRUCTED else None
        )
        self._fail_on: dict[str, _Broken[C]] = {
            kind: _Broken(keep) for kind in SERVED_GAPS if kind in self.policy.fail_on
        }

    def add(self, call: C, status: VerdictStatus, gap_kinds: Collection[str]) -> None:
        """Judge one call: its verdict's status and gap kinds, and the call to name if it breaks
        a rule."""
        self._by_status[status].add(call)
        if self._require is not None and _RANK[status] < self._floor:
            self._require.add(call)
        for kind, broken in self._fail_on.items():
            if kind in gap_kinds:
                broken.add(call)

    def outcome(self) -> Outcome[C]:
        """The `Outcome` of the calls added so far."""
        counts = {status: broken.count for status, broken in self._by_status.items()}
        judged = sum(counts.values())
        breaches: list[Breach[C]] = []

        def breach(rule: Rule, value: str, broken: _Broken[C]) -> None:
            if broken.count:
                breaches.append(Breach(rule, value, tuple(broken.kept), judged, broken.count))

        breach("damaged", "", self._by_status[VerdictStatus.DAMAGED])
        if self._require is not None:
            breach("require", self.policy.require.value, self._require)
        for kind, broken in self._fail_on.items():
            breach("fail-on", kind, broken)
        limit = self.policy.max_reconstructed
        reconstructed = self._by_status[VerdictStatus.RECONSTRUCTED]
        # Exact decimal arithmetic: 1 call of 10 is 10%, which "at most 10%" allows.
        if limit is not None and reconstructed.count * 100 > Fraction(str(limit)) * judged:
            breach("max-reconstructed", _percent(limit), reconstructed)
        return Outcome(
            self.policy,
            counts[VerdictStatus.VERIFIED],
            counts[VerdictStatus.RECONSTRUCTED],
            counts[VerdictStatus.DAMAGED],
            tuple(breaches),
        )


def judge(verdicts: Iterable[Verdict], policy: Policy | None = None) -> Outcome[Verdict]:
    """The `Outcome` of holding ``verdicts`` (each carrying its call's gap kinds, as `verify`
    gives them) to ``policy`` (default: nothing damaged); each breach holds every call that
    breaks it."""
    gate: Gate[Verdict] = Gate(policy, keep=None)
    for verdict in verdicts:
        gate.add(verdict, verdict.status, verdict.gap_kinds)
    return gate.outcome()
