"""A run's log as the reader holds it: each LLM-call span's place and commits (`EpochRecord`), and
the run's base, epochs and keyed fold over them (`Run`).

`af_otel.reader.epochs` reads one span into an `EpochRecord`; `af_otel.reader.runs` checks a run's
log and builds its `Run`; `af_otel.reader.lanes` links the lanes of a run several writers served.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from af_otel.reader.blobs import BlobDamage
from af_otel.reader.fold import Commit, KeyedFold
from af_otel.reader.records import SpanRecord

__all__ = ["EpochRecord", "Run"]


@dataclass(frozen=True, slots=True)
class EpochRecord:
    """One LLM-call span of a run: its place, its own commits, and what is wrong with its record.

    ``problems`` say why this span's own changes are incomplete; ``cut`` names values that were
    cut at the source or by a backend."""

    epoch: int
    parent: int
    span: SpanRecord
    commits: tuple[Commit, ...] = ()
    problems: tuple[str, ...] = ()
    cut: tuple[str, ...] = ()
    # The epoch this one's commits and ``messages.kept`` are relative to (the writer's
    # ``af.epoch.parent``, in the reader's numbers; -1 when that span is not on record). In a run
    # one writer served it is ``parent``; in a run served by several, ``parent`` is the call found
    # from content, which may be another writer's.
    basis: int = 0
    lane: str = ""
    # This span's commits whose stored payload is damaged (the commit holds `UNKNOWN`), and every
    # damaged blob this call's view and its check depend on (`_damage_along`), first found first.
    own_damage: tuple[tuple[Commit, BlobDamage], ...] = ()
    damage: tuple[BlobDamage, ...] = ()

    @property
    def where(self) -> str:
        return self.span.origin or f"span {self.span.span_id}"


@dataclass(frozen=True, slots=True)
class Run:
    """One run: its base, the span that holds each epoch, and the keyed fold over them.

    ``epochs`` holds the first span claiming each epoch number (by start time); ``others`` any
    later claimants. ``broken`` maps each epoch whose path from the base has an incomplete record
    to the first reason found; ``fold_parents`` is the tree the fold walks (a parent whose span is
    missing reads as the base there, under a ``no-run-log`` gap).

    A run served by several writers (``af.epoch.lane``) is one `Run` per lane, each with its own
    base, commits and fold, consecutive in `group_runs`' answer and sharing one numbering: the
    reader numbers the run's calls 1, 2, ... by start time, and each call's ``parent`` is the one
    found from content across the lanes (see `link_by_content`)."""

    run_id: str
    base_address: str | None
    base_problem: str | None
    epochs: Mapping[int, EpochRecord]
    others: tuple[EpochRecord, ...]
    broken: Mapping[int, str]
    fold: KeyedFold
    fold_parents: Mapping[int, int] = field(default_factory=dict)
    lane: str = ""
