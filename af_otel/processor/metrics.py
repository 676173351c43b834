"""af_otel's own counters, fetched lazily from the global MeterProvider so that a provider set
after the processor was built is the one counted on: ``af_otel.receipts`` (each call's receipt
state) and ``af_otel.wire.dropped`` (bodies the wire tap dropped by its bounds, read from the
tap's own count when metrics are collected: nothing is paid per request)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry import metrics

from af_otel import forksafe, names
from af_otel.wire import SENT

_lock = forksafe.lock()
_counter: tuple[Any, Any] | None = None  # (meter provider it came from, counter)


def count_receipt(state: str, reason: str | None) -> None:
    """Add one call with its receipt ``state`` and absent ``reason`` (``none`` when minted)."""
    global _counter
    provider = metrics.get_meter_provider()
    found = _counter
    if found is None or found[0] is not provider:
        with _lock:
            meter = provider.get_meter("af_otel")
            counter = meter.create_counter(
                names.METRIC_RECEIPTS,
                unit="{call}",
                description="LLM calls seen by af_otel, by receipt state and absent reason",
            )
            meter.create_observable_counter(
                names.METRIC_WIRE_DROPPED,
                callbacks=[_dropped],
                unit="{body}",
                description="request bodies the wire tap dropped by its bounds before their call",
            )
            found = _counter = (provider, counter)
    found[1].add(1, {names.METRIC_ATTR_STATE: state, names.METRIC_ATTR_REASON: reason or "none"})


def _dropped(_: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
    return (metrics.Observation(SENT.dropped),)
