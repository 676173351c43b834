"""Spans merged into another's epoch: a second record of one model call (``af.epoch.same_as``).

The emit side writes such a span with its run, lane and the epoch it is the same call as, and no
epoch of its own (af_otel/processor/dedupe.py). The reader does not count it as a call: it lists it
on the view of that epoch (`ServedView.same_call`), with its span name and instrumentation scope.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from af_otel import names
from af_otel.reader.records import SpanRecord

MergeKey = tuple[str, str, int]  # run id, lane, epoch


@dataclass(frozen=True, slots=True)
class SameCall:
    """A span recording the same model call as the view it is listed on."""

    span_id: str
    trace_id: str
    name: str
    scope: str | None


def merge_key(attributes: Mapping[str, object], epoch: object) -> MergeKey | None:
    run_id = attributes.get(names.RUN_ID)
    lane = attributes.get(names.EPOCH_LANE, "")
    if not isinstance(run_id, str) or not isinstance(lane, str):
        return None
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 1:
        return None
    return run_id, lane, epoch


def split_merged(
    spans: Iterable[SpanRecord],
) -> tuple[list[SpanRecord], dict[MergeKey, tuple[SameCall, ...]]]:
    """The spans that are calls, and the merged ones by the epoch they name. A span whose
    ``af.epoch.same_as`` names no epoch it could be stays among the calls (read as loose)."""
    rest: list[SpanRecord] = []
    merged: dict[MergeKey, list[SameCall]] = {}
    for span in spans:
        same = span.attributes.get(names.EPOCH_SAME_AS)
        key = merge_key(span.attributes, same) if same is not None else None
        if key is None or names.EPOCH in span.attributes:
            rest.append(span)
            continue
        found = merged.setdefault(key, [])
        call = SameCall(span.span_id, span.trace_id, span.name, span.scope or None)
        if call not in found:
            found.append(call)
    return rest, {key: tuple(calls) for key, calls in merged.items()}
