"""The public attribute, event and metric names of docs/receipt-spec.md — written once, imported everywhere.

Users build alerts, dashboards and verifiers on these strings; a rename here is a breaking change
and the collector-config structural tests import these constants so that a rename breaks them too.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

RUN_ID: Final = "af.run.id"
RUN_BASE: Final = "af.run.base"
EPOCH: Final = "af.epoch"
EPOCH_PARENT: Final = "af.epoch.parent"

RECEIPT_STATE: Final = "af.receipt.state"
RECEIPT_ABSENT_REASON: Final = "af.receipt.absent_reason"
RECEIPT_SCHEME: Final = "af.receipt.scheme"
RECEIPT_DIGEST: Final = "af.receipt.digest"
RECEIPT_MODEL: Final = "af.receipt.model"
RECEIPT_PROVIDER: Final = "af.receipt.provider"
RECEIPT_SYSTEM_HASH: Final = "af.receipt.system.hash"
RECEIPT_SYSTEM_PIECES: Final = "af.receipt.system.pieces"
RECEIPT_MESSAGES_COUNT: Final = "af.receipt.messages.count"
RECEIPT_MESSAGES_CHAIN: Final = "af.receipt.messages.chain"
RECEIPT_MESSAGES_KEPT: Final = "af.receipt.messages.kept"
RECEIPT_MESSAGES_ADDED: Final = "af.receipt.messages.added"
RECEIPT_TOOLS_NAMES: Final = "af.receipt.tools.names"
RECEIPT_TOOLS_HASHES: Final = "af.receipt.tools.hashes"
RECEIPT_TOOLS_FORCED: Final = "af.receipt.tools.forced"
RECEIPT_PARAMS: Final = "af.receipt.params"
RECEIPT_BYTES: Final = "af.receipt.bytes"
# The request fields the instrumentation could not record (bound by the af-2 digest, as af.gaps
# is; af-1's digest binds neither).
RECEIPT_UNRECORDED: Final = "af.receipt.unrecorded"
# af-2 (docs/receipt-spec.md section 12): where the request was read (`wire`: the HTTP bytes
# af_otel saw leave; `instrumentation`: what an instrumentation recorded; a span without it reads
# as the latter, and an af-2 digest binds it), the instrumentation scope that
# wrote the span as the writer saw it, the digest of the epoch this one grew from (its parent in
# its lane; left out when there is none), and the id of the key of a keyed receipt.
RECEIPT_SOURCE: Final = "af.receipt.source"
RECEIPT_SCOPE_NAME: Final = "af.receipt.scope.name"
RECEIPT_SCOPE_VERSION: Final = "af.receipt.scope.version"
RECEIPT_PARENT_DIGEST: Final = "af.receipt.parent_digest"
RECEIPT_KEY_ID: Final = "af.receipt.key_id"
SOURCE_WIRE: Final = "wire"
SOURCE_INSTRUMENTATION: Final = "instrumentation"
RECEIPT_SOURCES: Final = (SOURCE_WIRE, SOURCE_INSTRUMENTATION)
# On a call minted from the wire: the fields the instrumentation's own record says otherwise.
RECORD_DIFFERS: Final = "af.record.differs"

GAPS: Final = "af.gaps"
GAP_NO_RECEIPT_ON_CHART: Final = "af.gap.no_receipt_on_chart"

COMMIT_EVENT: Final = "af.commit"
COMMIT_SEQ: Final = "af.commit.seq"
COMMIT_KEY: Final = "af.commit.key"
COMMIT_VERB: Final = "af.commit.verb"
COMMIT_VALUE: Final = "af.commit.value"
COMMIT_REF: Final = "af.commit.ref"
COMMIT_BYTES: Final = "af.commit.bytes"

# Receipt states (the scalar `af.receipt.state`).
STATE_MINTED: Final = "minted"
STATE_ABSENT: Final = "absent"
STATE_ERROR: Final = "error"

# Absent reasons (`af.receipt.absent_reason`); the list is open, these are the ones af_otel emits.
REASON_NOT_CAPTURED: Final = "content-not-captured"
REASON_REDACTED: Final = "content-redacted"
REASON_EXTERNAL: Final = "content-external"
REASON_UNREADABLE: Final = "content-unreadable"
REASON_NO_RUN_ID: Final = "no-run-id"
REASON_INTERNAL_ERROR: Final = "internal-error"
# The span limits may have evicted or cut an attribute the request is read from.
REASON_CUT: Final = "content-cut"

# Gap kinds (docs/reader.md, the gap catalogue), as strings on `af.gaps`.
GAP_NO_RECEIPT: Final = "no-receipt-on-chart"
GAP_NO_FOLD_BASE: Final = "no-fold-base"
GAP_NO_CONVERSATION: Final = "no-conversation-on-record"
GAP_NO_RUN_LOG: Final = "no-run-log"
GAP_SPAN_LIMITS: Final = "span-limits"
GAP_CACHE_TRANSFORM: Final = "cache-transform"
GAP_PROVIDER_DEFAULTS: Final = "provider-defaults"
GAP_FORCED_TOOL_SCHEMA: Final = "forced-tool-schema"
GAP_THINKING_REPLAY: Final = "thinking-replay"
GAP_UNRECORDED: Final = "unrecorded-field"

# Receipt schemes: af-1 (64-bit hashes; read and verified forever) and af-2 (256-bit hashes, a
# digest that binds the verdict's inputs and the parent epoch's digest), each plain or keyed.
SCHEME_PLAIN: Final = "af-1"
SCHEME_HMAC: Final = "af-1-hmac"
SCHEME_2: Final = "af-2"
SCHEME_2_HMAC: Final = "af-2-hmac"
SCHEMES: Final = (SCHEME_PLAIN, SCHEME_HMAC, SCHEME_2, SCHEME_2_HMAC)
KEYED_SCHEMES: Final = frozenset({SCHEME_HMAC, SCHEME_2_HMAC})

# The metric for alerting without span metrics: OTel counter, exported to Prometheus as
# `af_otel_receipts_total` with labels `state` and `reason`.
METRIC_RECEIPTS: Final = "af_otel.receipts"
METRIC_ATTR_STATE: Final = "state"
METRIC_ATTR_REASON: Final = "reason"
# Bodies the wire tap dropped by its bounds before their call took them (a cumulative count,
# read when metrics are collected): `af_otel_wire_dropped_total` in Prometheus.
METRIC_WIRE_DROPPED: Final = "af_otel.wire.dropped"
# The reader's verdicts: `af-otel verify` adds each epoch's verdict to this counter through the
# global MeterProvider (run it under `opentelemetry-instrument` or any configured SDK to export it);
# in Prometheus `af_otel_verdicts_total{verdict="verified"|"reconstructed"|"damaged"}`.
METRIC_VERDICTS: Final = "af_otel.verdicts"
METRIC_ATTR_VERDICT: Final = "verdict"

# Environment variables (argument > environment > default; a bad value warns and falls back).
ENV_STORE: Final = "AF_OTEL_STORE"  # store URL or directory; default ./.af_otel/store
ENV_KEY: Final = "AF_OTEL_KEY"  # HMAC secret for keyed receipts
ENV_KEY_FILE: Final = "AF_OTEL_KEY_FILE"  # file holding the HMAC secret
# A key ring for verifying (rotation): a file of secrets, one a line; each key's id is derived.
ENV_KEY_RING: Final = "AF_OTEL_KEY_RING"
DEFAULT_STORE: Final = "./.af_otel/store"
DEFAULT_INLINE_LIMIT: Final = 1024

# The writer (one engine: a process, or a forked or restarted one) that numbered a call: epochs
# count per run and lane, so workers serving one run never need to agree on a number.
EPOCH_LANE: Final = "af.epoch.lane"
# A span that records the same model call as another span of its run (a framework span around
# the SDK's, or a provider SDK's own span): the epoch it is the same call as; it has no epoch.
EPOCH_SAME_AS: Final = "af.epoch.same_as"

# The Responses API: a call that continues state the provider's server holds
# (`previous_response_id`, a conversation), or shows a tell-tale of history it does not carry.
GAP_HELD_HISTORY: Final = "server-held-history"
# util-genai's upload hook stamped a content ref the reader cannot resolve to the call's request.
GAP_UPLOAD_REF: Final = "upload-ref-unresolved"
# On the span: the earlier response (or conversation) id where recorded, else the tell-tale.
HELD_HISTORY: Final = "af.held_history"

# Commit verbs (`af.commit.verb`, docs/receipt-spec.md section 10): how one commit changes its key.
CommitVerb = Literal["set", "append", "delete"]
COMMIT_VERBS: Final[tuple[CommitVerb, ...]] = get_args(CommitVerb)
# A model call the record does not hold: the history a call carries shows more model answers since
# its parent than the calls on record gave, or it continues a response no call on record answered.
GAP_UNRECORDED_CALL: Final = "unrecorded-call"

# The close record `af_otel.run` writes when its block exits: a span of its own (the run's last
# LLM span may have ended long before), named `RUN_CLOSE`, carrying `RUN_ID` and, per lane the
# block's writers numbered calls in, the lane, its last epoch and that epoch's `af.receipt.digest`
# ("" when it has none), as three arrays of one length. The reader names a run whose close record
# names an epoch that is not on record as cut at the end (`GAP_RUN_CUT_AT_END`).
RUN_CLOSE: Final = "af.run.close"
RUN_CLOSE_LANES: Final = "af.run.close.lanes"
RUN_CLOSE_EPOCHS: Final = "af.run.close.epochs"
RUN_CLOSE_DIGESTS: Final = "af.run.close.digests"
GAP_RUN_CUT_AT_END: Final = "run-cut-at-end"
# The wire tap saw several HTTP attempts under one call whose bodies differ (a retry that changed
# the request): the receipt is the last attempt's, and the model may have been served another.
# The span says how many attempts were sent (`WIRE_ATTEMPTS`, only when more than one).
GAP_WIRE_ATTEMPTS_DIFFER: Final = "wire-attempts-differ"
WIRE_ATTEMPTS: Final = "af.wire.attempts"
# The wire tap saw a body under the call but its bounds dropped it before the call ended: the
# receipt is the instrumentation's record's, which nothing checked against the wire.
GAP_WIRE_BODY_EVICTED: Final = "wire-body-evicted"
# The store address of how a wire call's body spelled what its request does not say
# (af_otel.wire.spelling): what an exact replay needs (docs/receipt-spec.md §14).
WIRE_SPELLING: Final = "af.wire.spelling"
