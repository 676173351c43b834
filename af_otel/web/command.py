"""``af-otel serve``: the subcommand that starts the evidence pages on a local address.

Importing this module needs nothing beyond af_otel itself, so ``af-otel`` lists ``serve`` whether
or not the ``serve`` extra is installed; running it without Starlette and Uvicorn says how to get
them. The key of keyed receipts comes from the same options and variables as ``af-otel verify``.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from typing import Any, Final

from af_otel.cli.loading import BACKENDS, backend_source
from af_otel.cli.options import (
    add_backend_options,
    add_key_options,
    add_store_options,
    add_upload_option,
    key_from_args,
)
from af_otel.errors import AfOtelError
from af_otel.web.evidence import TRACES_KEPT, Evidence

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "evidence_from", "register"]

DEFAULT_HOST: Final = "127.0.0.1"  # the pages show prompts: nobody else's to read by default
DEFAULT_PORT: Final = 8770
EXIT_ERROR: Final = 2


def register(subparsers: Any) -> None:
    """Add ``serve`` to the ``af-otel`` command."""
    serve = subparsers.add_parser(
        "serve",
        help="serve each LLM call's evidence as a local web page (trace UIs link to it)",
        description=(
            "Answer /traces/<trace id>/spans/<span id> and /runs/<run>/epochs/<n> with the "
            "served view, verdict, receipt and gaps of that LLM call. Needs the serve extra: "
            "pip install 'af-otel[serve]'."
        ),
    )
    serve.add_argument("file", nargs="?", metavar="FILE", help="a trace file to serve from")
    add_backend_options(serve, serve)
    add_store_options(serve)
    add_key_options(serve)
    add_upload_option(serve)
    serve.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})"
    )
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    serve.add_argument(
        "--traces-kept",
        type=int,
        default=TRACES_KEPT,
        metavar="N",
        help=f"fetched traces kept in memory (default {TRACES_KEPT})",
    )
    serve.set_defaults(func=serve_command)


def evidence_from(args: argparse.Namespace) -> Evidence:
    """The `Evidence` the arguments name; `AfOtelError` when they name no single backend."""
    chosen = [name for name in ("file", *BACKENDS) if getattr(args, name, None)]
    if len(chosen) != 1:
        raise AfOtelError(
            "give one of: a trace FILE, --tempo URL, --jaeger URL, --phoenix URL, --clickhouse URL"
        )
    if args.project and not args.phoenix:
        raise AfOtelError("--project names a Phoenix project: add --phoenix URL")
    for option in ("database", "table"):
        if getattr(args, option) is not None and not args.clickhouse:
            raise AfOtelError(
                f"--{option} names where ClickHouse keeps spans: add --clickhouse URL"
            )
    options: dict[str, Any] = {
        "store": args.store,
        "key": key_from_args(args),
        "lenient": args.lenient,
        "traces_kept": max(1, args.traces_kept),
        "upload_base": args.upload_base,
    }
    if args.file:
        return Evidence(file=args.file, **options)
    return Evidence(source=backend_source(args, chosen[0]), **options)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def serve_command(args: argparse.Namespace) -> int:
    try:
        import uvicorn  # noqa: PLC0415 - the optional serve extra

        from af_otel.web.app import create_app  # noqa: PLC0415 - imports Starlette
    except ImportError:
        print(
            "af-otel serve: needs Starlette and Uvicorn: pip install 'af-otel[serve]'",
            file=sys.stderr,
        )
        return EXIT_ERROR
    try:
        evidence = evidence_from(args)
    except (AfOtelError, OSError) as exc:
        print(f"af-otel serve: {exc}", file=sys.stderr)
        return EXIT_ERROR
    where = f"http://{args.host}:{args.port}/"
    print(f"af-otel serve: {where} reading {evidence.label}, store {args.store or '(default)'}")
    if not _loopback(args.host):
        print(
            f"af-otel serve: listening on {args.host}: pages show prompts to anyone who can "
            "reach this address",
            file=sys.stderr,
        )
    uvicorn.run(create_app(evidence), host=args.host, port=args.port, log_level="warning")
    return 0
