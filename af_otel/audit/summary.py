"""What an audit found, counted as results arrive: by status and gap kind, per service and model,
and the worst runs. Bounded whatever the day's size: counts per status, gap kind and (service,
model) pair, and only the `WORST` worst runs kept on a heap.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from af_otel.audit.calls import CallResult
from af_otel.reader.verify import VerdictStatus

__all__ = ["WORST", "RunScore", "Tally"]

# Runs listed as the worst: enough to start from, few enough to read.
WORST: Final = 10
_DAMAGED, _RECONSTRUCTED = VerdictStatus.DAMAGED.value, VerdictStatus.RECONSTRUCTED.value


@dataclass(frozen=True, slots=True, order=True)
class RunScore:
    """A run ranked by its damaged calls, then its reconstructed ones, then its size."""

    damaged: int
    reconstructed: int
    calls: int
    run_id: str = field(compare=False)
    service: str = field(compare=False)


@dataclass(slots=True)
class Tally:
    """The counts of one audit, fed run by run (`add_run`)."""

    statuses: Counter[str] = field(default_factory=Counter)
    gaps: Counter[str] = field(default_factory=Counter)
    by_service_model: dict[tuple[str, str], Counter[str]] = field(default_factory=dict)
    runs: int = 0
    worst: list[RunScore] = field(default_factory=list)

    def add_run(self, results: Iterable[CallResult]) -> None:
        """Count one run's results (calls naming no run are scored as their own runs)."""
        by_run: dict[str, list[CallResult]] = {}
        for result in results:
            self.statuses[result.status] += 1
            self.gaps.update(result.gaps)
            pair = (result.service, result.model)
            self.by_service_model.setdefault(pair, Counter())[result.status] += 1
            by_run.setdefault(result.run_id or f"span {result.span_id}", []).append(result)
        for run_id, calls in by_run.items():
            self.runs += 1
            score = RunScore(
                sum(c.status == _DAMAGED for c in calls),
                sum(c.status == _RECONSTRUCTED for c in calls),
                len(calls),
                run_id,
                calls[0].service,
            )
            if not score.damaged and not score.reconstructed:
                continue
            if len(self.worst) < WORST:
                heapq.heappush(self.worst, score)
            else:
                heapq.heappushpop(self.worst, score)

    @property
    def calls(self) -> int:
        return sum(self.statuses.values())

    def counts(self) -> Mapping[VerdictStatus, int]:
        return {status: self.statuses[status.value] for status in VerdictStatus}

    def worst_runs(self) -> list[RunScore]:
        return sorted(self.worst, reverse=True)

    def lines(self) -> list[str]:
        """The summary as text lines, status first, then gaps, services and models, worst runs."""
        out = ["by status: " + ", ".join(f"{n} {s.value}" for s, n in self.counts().items())]
        if self.gaps:
            out.append("by gap kind:")
            out += [f"  {kind}: {n}" for kind, n in self.gaps.most_common()]
        out.append("by service and model:")
        for (service, model), counts in sorted(self.by_service_model.items()):
            shown = ", ".join(f"{counts[s.value]} {s.value}" for s in VerdictStatus)
            out.append(
                f"  {service or '—'} · {model or '—'}: {sum(counts.values())} call(s): {shown}"
            )
        worst = self.worst_runs()
        if worst:
            out.append(f"worst runs ({len(worst)} of {self.runs}):")
            for score in worst:
                out.append(
                    f"  {score.run_id} ({score.service or '—'}): {score.damaged} damaged, "
                    f"{score.reconstructed} reconstructed of {score.calls} call(s)"
                )
        return out
