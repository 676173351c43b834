"""``af-otel serve``: the web pages of `af_otel.web`, registered like the other command groups."""

from __future__ import annotations

from af_otel.web.command import register

__all__ = ["register"]
