"""The Starlette application of ``af-otel serve``: two routes onto `Evidence`, answered with the
report's own epoch drawing, and a plain page with the right status for everything else.

Routes (ids as trace UIs put them in links; run ids URL-encoded):

- ``GET /traces/{trace id}/spans/{span id}``: the epoch of that LLM-call span;
- ``GET /runs/{run}/epochs/{n}``, optionally ``?trace={trace id}``: epoch ``n`` of run ``run``;
- ``GET /``: what this server reads and how to link to it.

Statuses: 400 for an id that is not one, 404 for an id that names nothing, 502 when the backend
failed or answered something unreadable, 500 when the store cannot be read or anything else went
wrong. Each is a page that says what happened; no traceback, no key, reaches the browser.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Final
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from af_otel.errors import AfOtelError, ReaderError, SourceError, StoreError
from af_otel.present import render_epoch_page, render_notice
from af_otel.reader.view import ServedView
from af_otel.web.evidence import Evidence, Shown

__all__ = ["create_app", "epoch_path", "span_path"]

_log = logging.getLogger(__name__)
# Pages differ per trace and may hold prompts: no shared cache keeps them, no frame embeds them.
_HEADERS: Final = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
}


def span_path(trace_id: str, span_id: str) -> str:
    return f"/traces/{quote(trace_id, safe='')}/spans/{quote(span_id, safe='')}"


def epoch_path(run_id: str, epoch: int, trace_id: str | None = None) -> str:
    path = f"/runs/{quote(run_id, safe='')}/epochs/{epoch}"
    return f"{path}?trace={quote(trace_id, safe='')}" if trace_id else path


def _page(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers=_HEADERS)


def _notice(status: int, title: str, message: str, *hints: str) -> HTMLResponse:
    return _page(render_notice(title, message, hints=hints), status)


def _epoch_page(shown: Shown) -> HTMLResponse:
    def href(view: ServedView) -> str:
        if view.run_id:
            return epoch_path(view.run_id, view.epoch, view.trace_id)
        return span_path(view.trace_id, view.span_id)

    return _page(
        render_epoch_page(
            shown.view,
            shown.verdict,
            run=shown.run,
            href=href,
            source=shown.source,
            notes=shown.notes,
        )
    )


def create_app(evidence: Evidence) -> Starlette:
    """The application serving ``evidence``."""

    async def answer(call: Callable[..., Shown], *args: str) -> HTMLResponse:
        try:
            shown = await run_in_threadpool(call, *args)
        except ValueError as exc:  # an id that is not one
            return _notice(400, "Not an id", str(exc))
        except ReaderError as exc:
            return _notice(404, "Nothing to show", str(exc))
        except StoreError as exc:
            return _notice(
                500,
                "The store cannot be read",
                str(exc),
                "Start af-otel serve with --store set to the directory or URL your application "
                "wrote its bases to (AF_OTEL_STORE there).",
            )
        except SourceError as exc:
            return _notice(
                502,
                "The trace backend failed",
                str(exc),
                f"Check that {evidence.label} is running and reachable from this server.",
            )
        except AfOtelError as exc:
            return _notice(500, "This call cannot be shown", str(exc))
        return _epoch_page(shown)

    async def span(request: Request) -> HTMLResponse:
        params = request.path_params
        return await answer(evidence.span, params["trace_id"], params["span_id"])

    async def epoch(request: Request) -> HTMLResponse:
        params = request.path_params
        trace = request.query_params.get("trace") or None
        return await answer(partial(evidence.epoch, params["run"], params["epoch"], trace_id=trace))

    async def home(request: Request) -> HTMLResponse:
        return _notice(
            200,
            "af-otel serve",
            f"Reading {evidence.label} with the store {evidence.store or '(default)'}.",
            "Open /traces/<trace id>/spans/<span id> for one LLM-call span, as Grafana's span "
            "link does.",
            "Open /runs/<run id>/epochs/<n>[?trace=<trace id>] for one epoch, as Jaeger's "
            "af.run.id link does.",
        )

    async def not_found(request: Request, exc: Exception) -> HTMLResponse:
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        if status == 405:
            return _notice(405, "Method not allowed", "This server only answers GET.")
        return _notice(
            404,
            "Nothing to show",
            f"No page at {request.url.path}.",
            "Pages live at /traces/<trace id>/spans/<span id> and /runs/<run>/epochs/<n>.",
        )

    async def failed(request: Request, exc: Exception) -> HTMLResponse:
        _log.error("af-otel serve: %s failed", request.url.path, exc_info=exc)
        return _notice(
            500,
            "Something went wrong",
            f"This server could not answer {request.url.path}; its log says why.",
        )

    return Starlette(
        routes=[
            Route("/", home),
            Route("/traces/{trace_id}/spans/{span_id}", span),
            Route("/runs/{run:path}/epochs/{epoch:int}", epoch),
        ],
        exception_handlers={HTTPException: not_found, Exception: failed},
    )
