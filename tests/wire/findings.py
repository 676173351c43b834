"""Run every wire scenario and print what it found, as Markdown: a table of verdict counts, then
each kind of overclaim grouped by field with the epochs it hit and one example; then the
differences that gaps do name on epochs that are not verified (what the record lacks, by design).

    python -m tests.wire.findings [scenario ...] > findings.md
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from af_otel.reader.verify import VerdictStatus
from tests.wire.harness import SCENARIOS, Outcome, disagreements, run_scenario


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _section(outcome: Outcome) -> list[str]:
    lines = [f"### {outcome.scenario.name}", ""]
    versions = ", ".join(f"{k} {v}" for k, v in sorted(outcome.versions.items()))
    lines.append(f"{outcome.scenario.instrumentation}; {versions}")
    groups: dict[tuple[str, str], list[Any]] = defaultdict(list)
    named = [
        (e, d)
        for e in outcome.epochs
        if e.status != "verified"
        for d in e.differences
        if d not in e.unnamed
    ]
    kinds = (("overclaim", outcome.overclaims), ("unnamed", outcome.unnamed), ("named", named))
    for label, items in kinds:
        for epoch, diff in items:
            groups[(label, diff.field + (f": {diff.aspect}" if diff.aspect else ""))].append(
                (epoch, diff)
            )
    for (label, field), items in sorted(groups.items()):
        epoch, diff = items[0]
        where = f" at index {diff.where}" if diff.where is not None else ""
        lines.append(
            f"- **{label}** `{field}` on {len(items)} epochs "
            f"({', '.join(str(e.epoch) for e, _ in items)}); e.g. epoch {epoch.epoch}{where}: "
            f"wire `{_short(diff.wire)}` / served `{_short(diff.served)}`; "
            f"gaps on it: {[k for k, _ in epoch.gaps] or 'none'}"
        )
    for epoch in outcome.wrong_parents:
        lines.append(
            f"- **parent** epoch {epoch.epoch} names epoch {epoch.parent} as its parent; its wire "
            f"request grew from epoch {epoch.expected_parent}"
        )
    for first, second in outcome.collisions:
        lines.append(
            f"- **collision**: epochs {first} and {second} share a receipt fingerprint, not a wire request"
        )
    return [*lines, ""]


def main(names: list[str]) -> None:
    outcomes = []
    started = time.monotonic()
    for scenario in SCENARIOS:
        if names and scenario.name not in names:
            continue
        with tempfile.TemporaryDirectory() as directory:
            outcomes.append(run_scenario(scenario, Path(directory)))
    seconds = time.monotonic() - started
    print(
        "| scenario | calls | minted | verified | reconstructed | damaged "
        "| overclaiming epochs (differences) | unnamed "
        "| collisions | wrong parents |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for o in outcomes:
        counts = " | ".join(str(o.count(status)) for status in VerdictStatus)
        print(
            f"| {o.scenario.name} | {o.wire_requests} | {o.minted} | {counts} | {len({e.epoch for e, _ in o.overclaims})} ({len(o.overclaims)}) "
            f"| {len(o.unnamed)} | {len(o.collisions)} | {len(o.wrong_parents)} |"
        )
    print(f"\n({len(outcomes)} scenarios in {seconds:.0f} s)\n")
    for o in outcomes:
        print("\n".join(_section(o)))
    print("### Receipts of one wire request through two instrumentations\n")
    for index, first in enumerate(outcomes):
        for second in outcomes[index + 1 :]:
            if first.scenario.client != second.scenario.client:
                continue
            found = disagreements(first, second)
            kinds = sorted({d.field for d in found})
            if found:
                print(
                    f"- {first.scenario.name} vs {second.scenario.name}: {len(found)} "
                    f"(fields: {', '.join(kinds)}); e.g. {found[0].account}"
                )


if __name__ == "__main__":
    main(sys.argv[1:])
