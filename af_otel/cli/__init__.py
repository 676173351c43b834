"""The ``af-otel`` command: a thin layer over the public API, one module per group of subcommands.

Each module here that exists (``demo``, ``read``) exposes ``register(subparsers)``, which adds its
subcommands with ``set_defaults(func=...)``; ``func(args)`` returns the exit code. A module that is
not installed yet is skipped, so the groups can land independently.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import Final

from af_otel.errors import AfOtelError

COMMAND_MODULES: Final = ("demo", "read", "serve")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="af-otel",
        description="Receipts for LLM calls on OpenTelemetry spans, and the evidence read back.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        qualified = f"{__name__}.{name}"
        try:
            module = import_module(qualified)
        except ModuleNotFoundError as exc:
            if exc.name == qualified:
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``af-otel``; read-path errors print one line naming what failed and exit 1."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except AfOtelError as exc:
        print(f"af-otel {args.command}: {exc}", file=sys.stderr)
        return 1
