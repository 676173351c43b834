"""The reader's gap catalogue (docs/reader.md): every way a served view can fall short of evidence.

Each kind names the receipt fields and view fields it covers and says, in one or two sentences a
reader of a report can act on, what may and may not be concluded. Two relations live here: an
*excuse* means the rebuild cannot be trusted to produce the covered fields, so a mismatch there is
explained rather than damage; a *caveat* means the rebuild and the receipt may well agree and still
not show what the model got. `verify` lets excuses, and only excuses, explain mismatches.

Every field of `Receipt` and of `ServedView` is either covered by some kind or listed in
`UNGAPPED_FIELDS` with the reason it needs none; a test walks both shapes to keep it so.
Field names: receipt fields are spelled as their ``af.receipt.*`` suffix (``messages.chain``), view
fields as the view's attribute; a name covers itself and every dotted name below it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal, Protocol

from af_otel import names
from af_otel.model.gap_rules import GAP_RANK

__all__ = [
    "CAUSE_NOT_COMMITTED",
    "CAUSE_SHAPE_REJECTED",
    "SERVED_GAPS",
    "UNGAPPED_FIELDS",
    "Gap",
    "GapKind",
    "covers",
    "gap",
    "gap_why",
    "order_gaps",
]

Relation = Literal["excuse", "caveat"]
GapCause = Literal["no-receipt-committed", "receipt-shape-rejected"]
CAUSE_NOT_COMMITTED: Final[GapCause] = "no-receipt-committed"
CAUSE_SHAPE_REJECTED: Final[GapCause] = "receipt-shape-rejected"

# Receipt fields that depend on the request's content (everything the rebuild recomputes).
_CONTENT: Final = ("system", "messages", "tools", "params", "model", "provider", "bytes", "digest")
_VIEW_CONTENT: Final = ("system", "messages", "tools", "params", "model", "provider")


@dataclass(frozen=True, slots=True)
class GapKind:
    """One entry of the catalogue."""

    kind: str
    fields: tuple[str, ...]  # receipt fields covered
    view_fields: tuple[str, ...]  # view fields covered
    relation: Relation
    why: str
    # The record itself is partial: a match proves only the part recorded, so `verify` never says
    # `verified` while a gap of such a kind is on the view.
    partial: bool = False


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


# Declared in the order gaps are listed on a view (`af_otel.model.gap_rules.GAP_ORDER`, most
# suspicious first); the catalogue is listed in that order whatever the declaration.
_CATALOGUE: Final = (
    GapKind(
        names.GAP_NO_FOLD_BASE,
        _CONTENT,
        (*_VIEW_CONTENT, "base"),
        "excuse",
        "The state this run started from is not in the store: it is absent there, which is "
        "not damage, as altered bytes make the call damaged instead. Anything only that starting "
        "state held is "
        "missing here: instructions, earlier turns and tools may all read short. Do not take "
        "the request shown as complete; restore the store and read again.",
    ),
    GapKind(
        names.GAP_NO_RUN_LOG,
        _CONTENT,
        _VIEW_CONTENT,
        "excuse",
        "Part of the record of changes leading to this call is missing: a span of the run was "
        "not found, a change is absent from the numbered sequence or from the store, or one on "
        "the span cannot be read. The request shown may lack content or hold stale content; "
        "look for the missing spans in the trace backend and its sampling settings.",
    ),
    GapKind(
        names.GAP_NO_CONVERSATION,
        _CONTENT,
        _VIEW_CONTENT,
        "excuse",
        "The content of this request is not on record: what shows as unknown was never "
        "captured, or was withheld on purpose. Unknown is not empty; nothing here says what the "
        "model read in those parts. Turn content capture on to keep it.",
    ),
    GapKind(
        names.GAP_SPAN_LIMITS,
        _CONTENT,
        (*_VIEW_CONTENT, "receipt", "base"),
        "excuse",
        "The span itself reports that attributes or events were dropped before export, or a "
        "value stops exactly at a size limit, so part of this call's record was cut. "
        "Treat every value here as possibly partial, and raise the limits that cut it.",
        partial=True,
    ),
    GapKind(
        names.GAP_NO_RECEIPT,
        (
            "scheme",
            "digest",
            "model",
            "provider",
            "system",
            "messages",
            "tools",
            "params",
            "bytes",
        ),
        ("receipt",),
        "excuse",
        "This call carries no usable fingerprint of its request: none was made, or what arrived "
        "is malformed or cut. Nothing shown can be checked against what was sent; the request "
        "is the best rebuild available, not evidence.",
    ),
    GapKind(
        names.GAP_UNRECORDED_CALL,
        ("messages",),
        ("messages",),
        "caveat",
        "The history this call carries holds a model answer that no call on this run's record "
        "gave: a model call in between left no span, as some instrumentations do for an "
        "incomplete or failed response, or the application wrote that model turn itself. That "
        "call's request and receipt are not on record and the epoch numbers close over it; "
        "look for it in the application's own logs.",
        partial=True,
    ),
    GapKind(
        names.GAP_RUN_CUT_AT_END,
        ("messages",),
        ("run_end",),
        "caveat",
        "The run's own record of where it ended names later calls than this one, and they are "
        "not here: the run was cut at the end, by calls never exported, lost on the way or "
        "deleted. This call may read as it was sent; what came after it is missing. Look for "
        "the later calls in the trace backend.",
        partial=True,
    ),
    GapKind(
        names.GAP_UNRECORDED,
        ("tools", "tools.forced", "params", "messages", "bytes", "digest"),
        ("tools", "params", "messages", "unrecorded"),
        "caveat",
        "The instrumentation that recorded this call does not record the fields named here, so "
        "what the model got in them is not on record: an empty or missing value there is not "
        "proof the request had none. The fingerprints cover only what was recorded; use an "
        "instrumentation that records these fields to check them.",
        partial=True,
    ),
    GapKind(
        names.GAP_WIRE_ATTEMPTS_DIFFER,
        ("system", "messages", "tools", "params", "model", "bytes"),
        ("system", "messages", "tools", "params", "model"),
        "caveat",
        "The client sent this call more than once and the bodies of its attempts differ, as "
        "when a retry changes the request. The request shown is the last attempt's; an earlier "
        "attempt may be the one the model answered or also ran, so a match proves only that "
        "the last body was sent.",
        partial=True,
    ),
    GapKind(
        names.GAP_CACHE_TRANSFORM,
        ("system", "messages", "tools", "bytes"),
        ("system", "messages", "tools"),
        "caveat",
        "Something between the recording and the provider may have changed the request, such "
        "as a caching layer, a proxy or the provider's own client library, and the record does "
        "not say that nothing did. A match proves what was recorded, not the bytes the provider "
        "received.",
    ),
    GapKind(
        names.GAP_THINKING_REPLAY,
        ("messages", "bytes"),
        ("messages",),
        "caveat",
        "Reasoning in this request was withheld or travelled sealed, so the record holds a "
        "placeholder where the model read its earlier reasoning. A match says the placeholder "
        "is intact, not what the reasoning said.",
    ),
    GapKind(
        names.GAP_FORCED_TOOL_SCHEMA,
        ("tools.hashes", "tools.forced"),
        ("tools",),
        "caveat",
        "The request forces the model to use a tool whose definition is not on record, so the "
        "schema the model was held to can be neither shown nor checked.",
    ),
    GapKind(
        names.GAP_PROVIDER_DEFAULTS,
        ("params",),
        ("params",),
        "caveat",
        "Only the sampling settings the caller set are on record. A setting that does not "
        "appear was not recorded, which is not proof the model ran without one: the provider "
        "may have applied its own default.",
    ),
    GapKind(
        names.GAP_HELD_HISTORY,
        ("messages", "bytes"),
        ("messages", "held"),
        "caveat",
        "This call continues history the provider's server holds, such as a previous response "
        "or a conversation, so the model saw earlier turns this request does not carry and no "
        "record here fingerprints. The turns shown are only the new ones; read the earlier "
        "call named here for the rest.",
        partial=True,
    ),
)

SERVED_GAPS: Final[Mapping[str, GapKind]] = MappingProxyType(
    {g.kind: g for g in sorted(_CATALOGUE, key=lambda g: GAP_RANK[g.kind])}
)

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
        "view.same_call": "other spans that record this same model call, folded into it by the "
        "writer (af.epoch.same_as); they say who else recorded the call, not what was sent.",
        "view.record_differs": "the fields on which the instrumentation's own record says "
        "otherwise than the body the client sent (af.record.differs); the request shown is the "
        "body's, so they say how far to trust that instrumentation elsewhere, not what was sent.",
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
