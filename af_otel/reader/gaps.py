"""The reader's gaps (docs/reader.md): a gap of a catalogued kind on one view, and the fields no gap
needs to cover.

The kinds themselves (their order, relation, covered fields and sentence) are the one table in
`af_otel.model.gap_kinds`; `verify` lets excuses, and only excuses, explain mismatches. Every field
of `Receipt` and of `ServedView` is either covered by some kind or listed in `UNGAPPED_FIELDS` with
the reason it needs none; a test walks both shapes to keep it so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal, Protocol

from af_otel import names
from af_otel.model.gap_kinds import GAP_RANK, SERVED_GAPS

__all__ = [
    "CAUSE_NOT_COMMITTED",
    "CAUSE_SHAPE_REJECTED",
    "UNGAPPED_FIELDS",
    "Gap",
    "covers",
    "gap",
    "gap_why",
    "order_gaps",
]

GapCause = Literal["no-receipt-committed", "receipt-shape-rejected"]
CAUSE_NOT_COMMITTED: Final[GapCause] = "no-receipt-committed"
CAUSE_SHAPE_REJECTED: Final[GapCause] = "receipt-shape-rejected"


@dataclass(frozen=True, slots=True)
class Gap:
    """One gap on one view: its kind, the catalogue's account of it, and what was found."""

    kind: str
    cause: GapCause | None = None
    detail: str = ""  # what the reader found on this view (a seq number, a store error, ...)

    @property
    def why(self) -> str:
        return SERVED_GAPS[self.kind].why

    @property
    def fields(self) -> tuple[str, ...]:
        return SERVED_GAPS[self.kind].fields

    @property
    def view_fields(self) -> tuple[str, ...]:
        return SERVED_GAPS[self.kind].view_fields

    @property
    def excuses(self) -> bool:
        return SERVED_GAPS[self.kind].relation == "excuse"

    @property
    def partial(self) -> bool:
        return SERVED_GAPS[self.kind].partial

    def holds_back(self, source: str) -> bool:
        """Whether this gap keeps a call whose receipt came from ``source`` from `verified`."""
        return SERVED_GAPS[self.kind].holds_back(source)


UNGAPPED_FIELDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        # receipt fields
        "receipt.state": "says whether fingerprints were made at all; when they were not, the "
        "no-receipt gap is raised from it.",
        "receipt.absent_reason": "explains a missing receipt; it is carried into that gap's detail.",
        "receipt.run_id": "read from the same span attribute as the view's run id; it salts every "
        "hash, so a wrong one shows as a mismatch on every fingerprint.",
        "receipt.epoch": "read from the same span attribute as the view's epoch; it enters the "
        "digest, so a receipt moved to another call fails there.",
        "receipt.parent": "read from the same span attribute as the view's parent; it enters the "
        "digest like the epoch.",
        "receipt.lane": "read from the span's af.epoch.lane, the writer that numbered the call; it "
        "enters the digest like the epoch.",
        "receipt.entries": "held in memory by the writer only and never exported; the chain, "
        "kept and added fields stand for it on the record.",
        # what an af-2 digest binds besides the request (docs/receipt-spec.md section 12)
        "receipt.gaps": "the gap kinds the writer set (af.gaps), bound by the af-2 digest: a "
        "claim about the record, checked as a whole, not a fact about the request.",
        "receipt.unrecorded": "the fields the writer's instrumentation does not record, bound by "
        "the af-2 digest; the unrecorded-field gap is raised from it.",
        "receipt.source": "where the writer read the request (wire or instrumentation), bound by "
        "the af-2 digest; it says who saw the request, not what was sent.",
        "receipt.scope_name": "the instrumentation scope the writer saw, bound by the af-2 digest "
        "and compared with the span's own scope.",
        "receipt.scope_version": "the version of that scope, bound by the af-2 digest.",
        "receipt.parent_digest": "the digest of the epoch this one grew from, bound by the af-2 "
        "digest and compared with that epoch's when it is on record.",
        "receipt.key_id": "the id of the key of a keyed af-2 receipt, bound by its digest; it "
        "picks the key from a key ring.",
        "receipt.base": "the run's base address (af.run.base), bound by the af-2 digest; the "
        "no-fold-base gap is raised when that base is not in the store.",
        "receipt.held": "the held-history note (af.held_history), bound by the af-2 digest; the "
        "server-held-history gap is raised from it.",
        # view fields
        "view.run_id": "read straight off the span; the salt every recomputed hash uses.",
        "view.epoch": "read straight off the span; it enters the digest. In a run several writers "
        "served, the call's rank by start time (the writer's own number enters the digest).",
        "view.parent": "read straight off the span; it enters the digest. In a run several writers "
        "served, the call found from content, or 0 with a no-run-log gap when it cannot be proven.",
        "view.basis": "the writer's own parent (af.epoch.parent) in the reader's numbers; it enters "
        "the digest.",
        "view.span_id": "the span's own identity, as exported.",
        "view.trace_id": "the span's own identity, as exported.",
        "view.service": "the resource that exported the span; it says where to look, not what "
        "was sent.",
        "view.name": "the span's name, for finding the call; not part of the request.",
        "view.recorded_by": "the instrumentation scope that wrote the span; it says who recorded "
        "the call, not what was sent.",
        "view.same_call": "other spans that record this same model call, merged into it by the "
        "writer (af.epoch.same_as); they say who else recorded the call, not what was sent.",
        "view.record_differs": "the fields on which the instrumentation's own record says "
        "otherwise than the body the client sent (af.record.differs); the request shown is the "
        "body's, so they say how far to trust that instrumentation elsewhere, not what was sent.",
        "view.spelling": "the store address of how a wire call's body spelled what its request "
        "does not say (af.wire.spelling); it lets a replay give the very body back, and says "
        "nothing the request shown does not.",
        "view.origin": "where this reader found the span (file and line, URL); not a recorded fact.",
        "view.lane": "read straight off the span's af.epoch.lane, the writer that numbered the "
        "call; it says where to look, and the receipt's own lane enters the digest.",
        "view.scope_version": "the version of the instrumentation scope that wrote the span; it "
        "says who recorded the call, not what was sent.",
        "view.source": "read straight off the span's af.receipt.source (wire or instrumentation, "
        "the latter when absent); it says where the recorded request was taken from, not what "
        "was sent.",
        "view.gaps": "the account itself, not a fact about the request.",
        "view.closed_with": "the digest the run's close record states for this call as its "
        "lane's last; verify makes the view damaged when the receipt on the span differs.",
        "view.damaged": "damage, not a gap: the stored blobs the view depends on whose bytes do "
        "not hash to their address or are not what their reference promised; verify makes the "
        "view damaged, naming the blob and the field it feeds.",
        "view.context": "the reader's working memory for the run (other epochs' views, "
        "recomputed digests); holds no fact of its own.",
        "view.from_uploads": "the request parts read from the upload hook's files because the "
        "record lacks them; the parts themselves are checked against the receipt like any rebuild.",
        "view.agent": "the call's place in the agent tree, read from the agent and tool spans "
        "around it (the agent that made it, the tools run after it, a handoff); it says who "
        "asked and what ran next, not what was sent.",
    }
)


def covers(names_: Iterable[str], field: str) -> bool:
    """Whether any of ``names_`` names ``field`` (itself or a dotted parent of it)."""
    return any(field == n or field.startswith(n + ".") for n in names_)


def gap(kind: str, detail: str = "", cause: GapCause | None = None) -> Gap:
    """A gap of a catalogued kind; an unknown kind raises (gaps are a closed set)."""
    if kind not in SERVED_GAPS:
        raise ValueError(f"unknown gap kind {kind!r}")
    if (cause is not None) != (kind == names.GAP_NO_RECEIPT):
        raise ValueError("only no-receipt-on-chart carries a cause, and it always does")
    return Gap(kind, cause, detail)


def order_gaps(found: Iterable[Gap]) -> tuple[Gap, ...]:
    """One gap per kind, most suspicious first (the first found of a kind keeps its detail)."""
    by_kind: dict[str, Gap] = {}
    for item in found:
        by_kind.setdefault(item.kind, item)
    return tuple(sorted(by_kind.values(), key=lambda g: GAP_RANK[g.kind]))


class BackendNote(Protocol):
    """What a source reported about its own answer (``SourceNote``), as the gap sentences use it."""

    @property
    def text(self) -> str: ...

    @property
    def missing_spans(self) -> bool: ...


def gap_why(item: Gap, notes: Iterable[BackendNote] = ()) -> str:
    """The gap's sentence for one read: when spans are missing and the backend said its answer
    was cut (a partial trace, a search at its limit, an error), that is named as the cause
    instead of sampling."""
    if item.kind != names.GAP_NO_RUN_LOG:
        return item.why
    cut = next((note.text for note in notes if note.missing_spans), None)
    if cut is None:
        return item.why
    return (
        "Part of the record of changes leading to this call is missing, and the backend said "
        f"its answer was incomplete: {cut}. Fetch the trace again, or raise the limit that cut "
        "it, before concluding the content is stale."
    )
