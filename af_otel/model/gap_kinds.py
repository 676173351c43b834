"""The gap kinds: one table, in the order gaps are listed, that every side reads.

A gap says how a call's record falls short of evidence (docs/reader.md, the gap catalogue). Each
row here is one kind: its wire name (as on ``af.gaps``), its relation, the receipt fields and view
fields it covers, whether it marks the record partial, and the sentence a reader of a report can
act on. The writer lists ``af.gaps`` in this order, the reader's views list their gaps in it, the
report and ``af-otel gaps`` print kinds in it, and the docs test holds docs/reader.md to it.

A kind's rank is its place in the table: most suspicious first, what makes the whole request
unknown or partial before what leaves one field unprovable, and that before caveats about what
lay beyond the record, so a renderer that shows only the first gap shows the one that matters.
Adding a kind is one row here (in its rank) and its wire name in `af_otel.names`.

Two relations: an *excuse* means the rebuild cannot be trusted to produce the covered fields, so a
mismatch there is explained rather than damage; a *caveat* means the rebuild and the receipt may
well agree and still not show what the model got. Field names: receipt fields are spelled as their
``af.receipt.*`` suffix (``messages.chain``), view fields as the view's attribute; a name covers
itself and every dotted name below it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

from af_otel import names

__all__ = ["GAP_ORDER", "GAP_RANK", "SERVED_GAPS", "GapKind", "Relation", "in_order"]

Relation = Literal["excuse", "caveat"]

# Receipt fields that depend on the request's content (everything the rebuild recomputes).
_CONTENT: Final = ("system", "messages", "tools", "params", "model", "provider", "bytes", "digest")
_VIEW_CONTENT: Final = ("system", "messages", "tools", "params", "model", "provider")


@dataclass(frozen=True, slots=True)
class GapKind:
    """One row of the table: a kind of gap and what it covers."""

    kind: str  # the wire name, as on af.gaps
    fields: tuple[str, ...]  # receipt fields covered
    view_fields: tuple[str, ...]  # view fields covered
    relation: Relation
    why: str
    # The record itself is partial: a match proves only the part recorded, so `verify` never says
    # `verified` while a gap of such a kind is on the view.
    partial: bool = False
    # The gap is about other calls than this one (a call that left no span, calls after it): a
    # call minted from the wire has its whole request on record without them, so there the gap
    # stays a caveat and does not hold `verified` back (`holds_back`).
    of_other_calls: bool = False

    def holds_back(self, source: str) -> bool:
        """Whether a gap of this kind keeps a call whose receipt came from ``source`` (the
        span's ``af.receipt.source``) from `verified`."""
        return self.partial and not (self.of_other_calls and source == names.SOURCE_WIRE)

    @property
    def rank(self) -> int:
        """The kind's place in the order gaps are listed (0: the most suspicious)."""
        return GAP_RANK[self.kind]


# The table, in rank order.
_ROWS: Final = (
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
        of_other_calls=True,
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
        of_other_calls=True,
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
        names.GAP_WIRE_BODY_EVICTED,
        ("system", "messages", "tools", "params", "model", "bytes"),
        ("system", "messages", "tools", "params", "model"),
        "caveat",
        "The body the client sent for this call was seen on the wire but dropped before the "
        "call ended, as more calls were waiting at once than bodies are kept for. The request "
        "shown is the instrumentation's record, which nothing checked against what was sent, "
        "so a match proves only what was recorded. Fewer calls waiting at once keep their "
        "bodies.",
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
    GapKind(
        names.GAP_UPLOAD_REF,
        ("system", "messages", "tools"),
        ("system", "messages", "tools", "output"),
        "caveat",
        "The copy of this call's content that the upload hook names is missing, unreadable or "
        "not what the record holds; the hook names its files even when it dropped the upload. "
        "The view shows what the record proves; do not read the uploaded copy in its place.",
    ),
)

SERVED_GAPS: Final[Mapping[str, GapKind]] = MappingProxyType({row.kind: row for row in _ROWS})
GAP_ORDER: Final = tuple(SERVED_GAPS)
GAP_RANK: Final[Mapping[str, int]] = MappingProxyType(
    {kind: rank for rank, kind in enumerate(GAP_ORDER)}
)


def in_order(kinds: Iterable[str]) -> list[str]:
    """The kinds of the table among ``kinds``, each once, most suspicious first."""
    found = set(kinds)
    return [kind for kind in GAP_ORDER if kind in found]
