"""The ``af-otel`` command: a thin layer over the public API, one module per group of subcommands.

Each module named in `COMMAND_MODULES` (``af-otel serve`` lives with the web pages it serves, in
`af_otel.web.command`, ``af-otel audit`` with the audit, in `af_otel.audit.command`) exposes ``register(subparsers)``, which adds its
subcommands with ``set_defaults(func=...)``; ``func(args)`` returns the exit code. They are
imported when the parser is built, not with this package, because they import `EXIT_PIPE` from it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import Final

from af_otel.errors import AfOtelError

COMMAND_MODULES: Final = (
    "af_otel.cli.demo",
    "af_otel.cli.read",
    "af_otel.audit.command",
    "af_otel.web.command",
)
# What a shell reports for a process ended by SIGPIPE (128 + 13): a closed output pipe.
EXIT_PIPE: Final = 141


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="af-otel",
        description="Receipts for LLM calls on OpenTelemetry spans, and the evidence read back.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``af-otel``; read-path errors print one line naming what failed and exit 1. A closed
    output pipe (``af-otel served | head -1``) ends any command quietly with `EXIT_PIPE`, 141,
    the status a shell reports for a process SIGPIPE ended; never a traceback, never 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        try:
            code = int(args.func(args) or 0)
        except AfOtelError as exc:
            print(f"af-otel {args.command}: {exc}", file=sys.stderr)
            code = 1
        # Flushed here, not at exit, so that a reader gone away is seen while it can be handled.
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
        return EXIT_PIPE
    return code


def _drop_stdout() -> None:
    """Point stdout at the null device, so that nothing more (the interpreter's own flush at
    exit included) is written to the closed pipe."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a file descriptor (a captured stream): nothing is flushed to a pipe at exit
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)
