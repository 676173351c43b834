"""The gap kinds the emit path already knows when a span is exported (docs/processor.md, gaps known at export).

Ordered most suspicious first, in the one table's order (`af_otel.model.gap_kinds`).

Rules decided here (docs/processor.md restates them):

* ``span-limits``: the span dropped attributes or events, or its request may have been cut by the
  span limits (the receipt is then absent with ``content-cut``).
* ``unrecorded-field``: the instrumentation cannot record a field that matters for this request
  at its provider (`af_otel.semconv.ledger`); the fields are listed on ``af.receipt.unrecorded``.
* ``provider-defaults``, ``thinking-replay``, ``forced-tool-schema``: decided from the request by
  `af_otel.model.gap_rules`, the rules the reader applies too; the writer records them only for a
  call with a receipt.
* ``cache-transform``: raised unless the request was captured at the provider SDK's own call by an
  instrumentation of that SDK (each family's `Convention.sdk_scopes`) *and* the span names the
  provider's own API host (`PROVIDER_HOSTS`): then only the SDK's serializer stands between the
  record and the wire. A proxy, gateway or caching layer (any other host), an unknown
  instrumentation, a span without ``server.address`` and af_otel's own explicit API (which sees
  what the caller says it sends) all raise it.
* ``server-held-history``: the call continues state the provider's server holds (the Responses
  API's ``previous_response_id``), or the request shows a tell-tale of history it does not carry
  (`af_otel.semconv.responses`): the model saw more than the record.
* ``wire-attempts-differ``, ``wire-body-evicted``: the wire tap's word on the call (attempts
  whose bodies differ; a body it dropped by its bounds before the call took it, so the call is
  minted from its record with nothing checked against the wire).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from af_otel import names
from af_otel.model import Request
from af_otel.model.gap_kinds import in_order
from af_otel.model.gap_rules import request_gaps, sealed_messages
from af_otel.processor.facts import Minting
from af_otel.receipts import Receipt
from af_otel.semconv import SDK_SCOPES, sdk_scopes

__all__ = ["PROVIDER_HOSTS", "SDK_SCOPES", "captured_at_sdk", "gaps_of", "minting_gaps"]

PROVIDER_HOSTS: Final[Mapping[str, frozenset[str]]] = {
    "openai": frozenset({"api.openai.com"}),
    "anthropic": frozenset({"api.anthropic.com"}),
}


def gaps_of(
    *,
    receipt: Receipt | None,
    request: Request | None,
    dropped: bool,
    direct_capture: bool,
    order_unknown: bool,
    unrecorded: Sequence[str] = (),
    cut: bool = False,
    sealed: bool | None = None,
    held: bool = False,
    attempts_differ: bool = False,
    body_evicted: bool = False,
) -> list[str]:
    """The gap kinds for one LLM-call span, most suspicious first (``sealed``: whether a message
    replays sealed reasoning, when the caller already knows)."""
    found: set[str] = set()
    if order_unknown:
        found.add(names.GAP_NO_RUN_LOG)
    minted = receipt is not None and receipt.minted
    if not minted:
        found.add(names.GAP_NO_RECEIPT)
    if dropped or cut:
        found.add(names.GAP_SPAN_LIMITS)
    if unrecorded:
        found.add(names.GAP_UNRECORDED)
    if held:
        found.add(names.GAP_HELD_HISTORY)
    if attempts_differ:
        found.add(names.GAP_WIRE_ATTEMPTS_DIFFER)
    if body_evicted:
        found.add(names.GAP_WIRE_BODY_EVICTED)
    if not direct_capture:
        found.add(names.GAP_CACHE_TRANSFORM)
    if minted and request is not None:
        if sealed is None:
            sealed = sealed_messages(request.messages)
        found.update(
            kind
            for kind, _ in request_gaps(
                request.params,
                request.tools,
                provider=request.provider,
                model=request.model,
                sealed=sealed,
                minted=True,
                unrecorded=unrecorded,
            )
        )
    return in_order(found)


def minting_gaps(
    minting: Minting,
    receipt: Receipt,
    unrecorded: Sequence[str],
    order_unknown: bool,
    trusted_hosts: frozenset[str] = frozenset(),
) -> list[str]:
    """`gaps_of` one call as the engine mints it (`Minting`): what its record, the wire or the
    form it was handed through says of it. Whether nothing but the provider SDK stood between is
    the wire's or the form's word where it gave one, else the record's (`captured_at_sdk`)."""
    facts, call = minting.facts, minting.call
    direct = minting.direct
    if direct is None:
        direct = captured_at_sdk(facts.scope, facts.attributes, call.provider, trusted_hosts)
    return gaps_of(
        receipt=receipt,
        request=call.request,
        dropped=facts.dropped,
        direct_capture=direct,
        order_unknown=order_unknown,
        unrecorded=unrecorded,
        cut=call.absent_reason == names.REASON_CUT,
        held=call.held is not None,
        sealed=call.sealed,
        attempts_differ=facts.attempts_differ,
        body_evicted=facts.body_evicted,
    )


def captured_at_sdk(
    scope: str | None,
    attributes: Mapping[str, object],
    provider: object,
    trusted_hosts: frozenset[str] = frozenset(),
) -> bool:
    """Nothing but the provider SDK stood between the record and the provider (module rule);
    ``provider`` as the request names it (anything but a string names none).

    ``trusted_hosts`` (setting ``trusted_hosts``, ``AF_OTEL_TRUSTED_HOSTS``): gateways the user
    declares pass requests to the provider unchanged; they count as the provider's own host."""
    if scope not in sdk_scopes() or not isinstance(provider, str):
        return False
    host = attributes.get("server.address")
    if not isinstance(host, str):
        return False
    return host in PROVIDER_HOSTS.get(provider, frozenset()) or host.lower() in trusted_hosts
