"""What the engine reads about one call and hands back (`af_otel.processor.engine`): the call's
facts, whatever form it came through; a request handed over instead of read; what a receipt is
minted from; and the attributes and commit events an LLM-call span gets."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from af_otel import names
from af_otel.model import Request
from af_otel.processor import commits
from af_otel.processor.settings import WriteMode
from af_otel.semconv import Call, Limits, Recorded

SpanKey = tuple[int, int]


@dataclass(frozen=True, slots=True)
class CallFacts:
    """What the engine reads about one call's span, whatever form it came through."""

    key: SpanKey
    name: str
    start_time: int
    end_time: int
    attributes: Mapping[str, Any]
    scope: str | None = None
    scope_version: str | None = None
    # Where the request was read: `wire` (a tap on the HTTP request) or None (an instrumentation's
    # record), bound by the receipt as af.receipt.source.
    source: str | None = None
    dropped: bool = False
    run_unknown: bool = False  # the exporter cannot tell which `af_otel.run` the call was in
    # The span limits the attributes were recorded under (None: the request does not come from
    # them, or they are unknown and the environment's are used).
    limits: Limits | None = None
    parent: SpanKey | None = None  # the span's parent span, when it has one
    # The attributes read once (`record_of`), when the caller read them to tell an LLM call:
    # the request is read from it, not from ``attributes`` again.
    recorded: Recorded | None = None
    # The wire tap saw attempts under the call whose bodies differ (wire-attempts-differ).
    attempts_differ: bool = False
    # The tap dropped a body sent under the call before the call took it (wire-body-evicted).
    body_evicted: bool = False
    # The latest time the span records of its call (its last event; 0: none): a streamed span
    # may record its end before its request went out (`wire_source.window_of`).
    seen_until: int = 0


@dataclass(frozen=True, slots=True)
class Enrichment:
    """What to add to an LLM-call span, and which instrumentation content keys it holds."""

    attributes: dict[str, Any]
    events: tuple[tuple[str, dict[str, Any]], ...] = ()
    content_keys: tuple[str, ...] = ()
    state: str = names.STATE_ERROR


@dataclass(frozen=True, slots=True)
class Supplied:
    """A request handed over directly (hook, explicit API) instead of read off the span's
    attributes: the request itself (the explicit API), or the ``call`` semconv read from the
    record the hook wrote for it (its instrumentation's ledger then applies)."""

    request: Mapping[str, Any] | Request | None = None
    direct: bool = False  # nothing but the provider SDK stands between (see export_gaps.py)
    on_span: bool = False  # the span itself already carries this request's content
    call: Call | None = None
    # Read incrementally by the caller (the explicit API, explicit_memo.py): whether a message
    # replays sealed reasoning, the Responses scan, and the tuple the request's messages were
    # built to start with.
    sealed: bool | None = None
    scan: Any = None
    prefix: tuple[Any, ...] | None = None


@dataclass(frozen=True, slots=True)
class Minting:
    """What one call's receipt is minted from (`Engine._finish`): its facts, the call as read,
    and how its commits are written."""

    facts: CallFacts
    call: Call
    # Nothing but the provider SDK stood between (the wire's or the form's word); None: the
    # record's, decided with the gaps (`export_gaps.minting_gaps`).
    direct: bool | None
    mode: WriteMode  # how its commits are written (`Settings.write_mode`)
    # A wire request's commit goes inline only where the record held it too (wire_source.py).
    keep_inline: Callable[[commits.Change], bool] | None = None


def error_enrichment(reason: str = names.REASON_INTERNAL_ERROR) -> Enrichment:
    """What an LLM-call span carries when af_otel's own work on it failed."""
    return Enrichment(
        {
            names.RECEIPT_STATE: names.STATE_ERROR,
            names.RECEIPT_ABSENT_REASON: reason,
            names.GAPS: [names.GAP_NO_RECEIPT],
            names.GAP_NO_RECEIPT_ON_CHART: True,
        }
    )
