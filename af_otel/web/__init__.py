"""``af-otel serve``: the evidence of one LLM call as a local web page, one click from a span.

A trace UI (Grafana's Tempo view, Jaeger) links a span to ``/traces/<trace id>/spans/<span id>`` or
``/runs/<run>/epochs/<n>``; the page shows what that call was served, its receipt and verdict, its
gaps and what changed since its parent, drawn by the report's own epoch renderer. ``evidence``
fetches and caches (no HTTP serving, no Starlette); ``app`` is the Starlette application;
``command`` adds the subcommand to ``af-otel``. Starlette and Uvicorn are the optional ``serve``
extra: ``pip install 'af-otel[serve]'``.
"""

from __future__ import annotations

from af_otel.web.evidence import Evidence, Shown

__all__ = ["Evidence", "Shown"]
