"""Frozen values of the normalized request; no OpenTelemetry import here."""

from af_otel.model.request import FrozenDict, Request, forced_tool, sealed_reasoning

__all__ = ["FrozenDict", "Request", "forced_tool", "sealed_reasoning"]
