"""How a run ends on the record: its close records (``af.run.close``, written when an
`af_otel.run` block exits) against the epochs on record.

Sequence numbers and parents find a hole in the middle of a run; only a record of where the run
ended can find one at the end. A run whose close records name, per lane, a last epoch that is on
record (with the digest they state) is ``closed``; one whose close record names an epoch that is
not on record is ``cut`` at the end (its last call on record carries ``run-cut-at-end``); a run
with no close record, or with a lane no close record names, is ``open``: its record cannot say
whether its last calls are all there. Open is not complete, and not a gap: runs written before
close records existed, and runs not made with `af_otel.run`, have none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

from af_otel import names
from af_otel.reader.records import SpanRecord

__all__ = ["RunEnd", "close_records", "is_run_close", "run_end"]

RunEndState = Literal["closed", "open", "cut"]
LaneEpoch = tuple[str, int]  # a lane and the writer's own epoch number in it
_NO_CLOSE: Final = (
    f"no close record ({names.RUN_CLOSE}): the record cannot say whether the run's last calls "
    "are all here"
)


@dataclass(frozen=True, slots=True)
class RunEnd:
    """How one run ends on the record (module doc). ``named`` maps each (lane, epoch) a close
    record names as its lane's last to the digest it states ("" for a call without a receipt);
    ``missing`` lists those not on record; ``marked`` the calls on record that carry
    ``run-cut-at-end`` (the last on record of each cut lane)."""

    run_id: str
    state: RunEndState
    detail: str
    named: Mapping[LaneEpoch, str] = field(default_factory=lambda: MappingProxyType({}))
    missing: tuple[LaneEpoch, ...] = ()
    marked: tuple[LaneEpoch, ...] = ()


def is_run_close(span: SpanRecord) -> bool:
    """A close record: named ``af.run.close``, naming a run and no epoch."""
    attrs = span.attributes
    return span.name == names.RUN_CLOSE and names.RUN_ID in attrs and names.EPOCH not in attrs


def _array(value: object) -> tuple[object, ...]:
    if isinstance(value, tuple):
        return value
    return () if value is None else (value,)  # a backend that flattened a one-item array


def close_records(spans: Iterable[SpanRecord]) -> dict[str, list[dict[LaneEpoch, str] | None]]:
    """Each run's close records, by run id: what each names, or None for one that does not parse
    (its three arrays differ in length, or an epoch is not a positive number)."""
    out: dict[str, list[dict[LaneEpoch, str] | None]] = {}
    for span in spans:
        if not is_run_close(span):
            continue
        run_id = span.attributes[names.RUN_ID]
        if not isinstance(run_id, str) or not run_id:
            continue
        lanes = _array(span.attributes.get(names.RUN_CLOSE_LANES))
        epochs = _array(span.attributes.get(names.RUN_CLOSE_EPOCHS))
        digests = _array(span.attributes.get(names.RUN_CLOSE_DIGESTS))
        parsed: dict[LaneEpoch, str] = {}
        whole = len(lanes) == len(epochs) == len(digests)
        for lane, epoch, digest in zip(lanes, epochs, digests, strict=False) if whole else ():
            number = int(epoch) if isinstance(epoch, int | str) and str(epoch).isdigit() else 0
            if not isinstance(lane, str) or not isinstance(digest, str) or number < 1:
                whole = False
                break
            parsed[(lane, number)] = digest
        out.setdefault(run_id, []).append(parsed if whole else None)
    return out


def run_end(
    run_id: str,
    on_record: Sequence[LaneEpoch],
    closes: Sequence[dict[LaneEpoch, str] | None],
) -> RunEnd:
    """How run ``run_id`` ends, given the (lane, writer's epoch) of each of its calls on record
    and its close records."""
    if not closes:
        return RunEnd(run_id, "open", _NO_CLOSE)
    named: dict[LaneEpoch, str] = {}
    for close in closes:
        named.update(close or {})
    held = set(on_record)
    missing = tuple(sorted(key for key in named if key not in held))
    if missing:
        marked: list[LaneEpoch] = []
        parts = []
        for lane, epoch in missing:
            mine = [e for found, e in on_record if found == lane and e < epoch]
            last = max(mine, default=0)
            parts.append(
                f"epoch {epoch} of lane {lane} is its last, and "
                + (f"the lane's record ends at epoch {last}" if last else "none of it is here")
            )
            if last:
                marked.append((lane, last))
        if not marked and on_record:
            marked.append(max(on_record, key=lambda key: key[1]))
        detail = f"cut at the end: the run's close record says {'; '.join(parts)}"
        return RunEnd(
            run_id, "cut", detail, MappingProxyType(named), missing, tuple(dict.fromkeys(marked))
        )
    if any(close is None for close in closes):
        detail = "a close record of the run does not parse"
        return RunEnd(run_id, "open", detail, MappingProxyType(named))
    unnamed = sorted({lane for lane, _ in on_record} - {lane for lane, _ in named})
    if unnamed:
        detail = f"no close record names lane(s) {', '.join(unnamed)}"
        return RunEnd(run_id, "open", detail, MappingProxyType(named))
    ends = ", ".join(f"epoch {e} of lane {lane}" for lane, e in sorted(named))
    return RunEnd(run_id, "closed", f"its last call(s) on record: {ends}", named)
