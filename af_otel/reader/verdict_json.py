"""The JSON form of verdicts (``af-otel verify --json``): one object per call and a closing summary
(which ``af-otel audit --json`` ends on too).

The shape is a contract, versioned by `SCHEMA` and written down as a JSON Schema in
docs/verdict.schema.json (and as a table in docs/reader.md); tests hold the output, the schema
and the table to one another. A field added or changed is a new version. Every value comes from
the `Verdict` (which carries its call's facts, `verify`) or the gate's `Outcome`.
"""

from __future__ import annotations

from typing import Any, Final

from af_otel.model.gap_kinds import SERVED_GAPS
from af_otel.reader.policy import Outcome
from af_otel.reader.verify import Mismatch, Verdict

__all__ = ["SCHEMA", "mismatch_text", "summary_json", "verdict_json"]

SCHEMA: Final = "af-verdict/1"


def mismatch_text(mismatch: Mismatch) -> str:
    """One sentence on a differing field: where it differs, how the rebuild looks, what explains it."""
    where = ""
    if mismatch.index is not None:
        what = "message" if mismatch.field.startswith("messages") else "item"
        where = f" at {what} {mismatch.index}"
    why = f"explained by {mismatch.excused_by}" if mismatch.excused_by else "no gap explains it"
    return f"{mismatch.field} differs{where}, the rebuild looks {mismatch.looks}; {why}"


def _mismatch(mismatch: Mismatch) -> dict[str, Any]:
    about_messages = mismatch.field.startswith("messages")
    return {
        "field": mismatch.field,
        "index": mismatch.index,
        "message_index": mismatch.index if about_messages else None,
        "looks": mismatch.looks,
        "excused_by": mismatch.excused_by,
        "message": mismatch_text(mismatch),
    }


def verdict_json(verdict: Verdict) -> dict[str, Any]:
    """The JSON object of one call's verdict (``type`` ``verdict``)."""
    return {
        "schema": SCHEMA,
        "type": "verdict",
        "status": verdict.status.value,
        "run_id": verdict.run_id,
        "lane": verdict.lane,
        "epoch": verdict.epoch,
        "parent": verdict.parent,
        "trace_id": verdict.trace_id,
        "span_id": verdict.span_id,
        "scope": {"name": verdict.scope, "version": verdict.scope_version},
        "source": verdict.source,
        "model": verdict.model,
        "gaps": list(verdict.gap_kinds),
        "reason": verdict.reason,
        "field": verdict.field,
        "index": verdict.index,
        "message_index": verdict.message_index,
        "looks": verdict.looks,
        "mismatches": [_mismatch(m) for m in verdict.mismatches],
    }


def summary_json(outcome: Outcome[Any], *, read: str, store: str) -> dict[str, Any]:
    """The closing JSON object of a read (``type`` ``summary``): the counts, what was read with
    which store, the policy held to, every rule broken (with the span ids of the calls the
    outcome kept: all of them from `judge`, the first few from an audit's `Gate`), and the exit
    code it makes."""
    policy = outcome.policy
    return {
        "schema": SCHEMA,
        "type": "summary",
        "calls": outcome.calls,
        "verified": outcome.verified,
        "reconstructed": outcome.reconstructed,
        "damaged": outcome.damaged,
        "read": read,
        "store": store,
        "policy": {
            "require": policy.require.value,
            "fail_on": [kind for kind in SERVED_GAPS if kind in policy.fail_on],
            "max_reconstructed": policy.max_reconstructed,
        },
        "passed": outcome.passed,
        "failed": [
            {
                "rule": breach.rule,
                "value": breach.value,
                "option": breach.option,
                "calls": breach.count,
                "span_ids": [v.span_id for v in breach.calls],
                "text": breach.text,
            }
            for breach in outcome.breaches
        ],
        "exit": outcome.exit_code,
    }
