"""The options of the reading commands, and what they give: where spans come from, the store, the
keys of keyed receipts and a gate's policy. ``audit`` and ``serve`` reuse them, so that every
command spells an option once, with one meaning."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeVar

from af_otel import names
from af_otel.errors import ReaderError
from af_otel.keys import KeyProblem, KeyRing, find_keys
from af_otel.reader.policy import Policy, parse_fail_on, parse_percent
from af_otel.reader.sources.clickhouse import DEFAULT_DATABASE, DEFAULT_TABLE
from af_otel.reader.sources.tempo import DEFAULT_QUERY as TEMPO_QUERY
from af_otel.reader.sources.window import DEFAULT_SEARCH_LIMIT as SEARCH_LIMIT
from af_otel.reader.verify import VerdictStatus

__all__ = [
    "add_backend_options",
    "add_key_options",
    "add_policy_options",
    "add_source_options",
    "add_store_options",
    "add_table_options",
    "key_from_args",
    "policy_from_args",
]

_T = TypeVar("_T")


def add_source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", nargs="?", help="spans to read (OTLP JSON lines, JSON, protobuf, ...)"
    )
    add_backend_options(parser, parser.add_mutually_exclusive_group())
    parser.add_argument("--trace", metavar="ID", help="one trace id to fetch from the backend")
    parser.add_argument(
        "--since", metavar="DURATION", help="every trace of the last DURATION (90s, 15m, 1h, 2d)"
    )
    parser.add_argument(
        "--start", metavar="TIME", help="window start, ISO 8601 or Unix seconds (with --end)"
    )
    parser.add_argument("--end", metavar="TIME", help="window end (default now; with --start)")
    parser.add_argument(
        "--service", metavar="NAME", help="the service whose traces a --jaeger window searches"
    )
    parser.add_argument(
        "--query",
        metavar="TRACEQL",
        help=f"the TraceQL a --tempo window searches (default {TEMPO_QUERY})",
    )
    parser.add_argument(
        "--limit",
        metavar="N",
        type=int,
        help=f"most traces one --tempo/--jaeger/--clickhouse window reads (default {SEARCH_LIMIT})",
    )
    add_upload_option(parser)
    parser.set_defaults(source_parser=parser)
    add_store_options(parser)
    parser.add_argument("--run", metavar="R", help="only this run")
    parser.add_argument("--epoch", metavar="K", type=int, help="only this epoch (with --run)")


def add_upload_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--upload-base",
        metavar="URL",
        help="where util-genai's upload hook wrote content (an fsspec URL): a call whose record "
        "lacks its content is rebuilt from its uploads and verified, the others are checked "
        "against them (upload-ref-unresolved)",
    )


def add_backend_options(parser: argparse.ArgumentParser, urls: Any) -> None:
    """``--tempo``, ``--jaeger``, ``--phoenix``, ``--clickhouse`` (added to ``urls``: the parser
    or a group of options that exclude each other), ``--project``, ``--database`` and
    ``--table``, as `backend_source` reads them."""
    for flag, backend in (("--tempo", "Tempo"), ("--jaeger", "Jaeger"), ("--phoenix", "Phoenix")):
        urls.add_argument(flag, metavar="URL", help=f"read traces from {backend} at URL")
    urls.add_argument(
        "--clickhouse",
        metavar="URL",
        help="read spans from the Collector ClickHouse exporter's table: chdb:///dir (embedded "
        "chDB) or http(s)://host:8123 (needs the audit extra)",
    )
    parser.add_argument(
        "--project", metavar="NAME", help="the Phoenix project (default 'default'; --phoenix)"
    )
    add_table_options(parser)


def add_table_options(parser: argparse.ArgumentParser) -> None:
    """``--database`` and ``--table``: where the exporter's spans are in ClickHouse (None when
    not given: `DEFAULT_DATABASE`, `DEFAULT_TABLE`; ``audit`` sets them as its defaults)."""
    parser.add_argument(
        "--database",
        metavar="NAME",
        help=f"the ClickHouse database (default {DEFAULT_DATABASE}; --clickhouse)",
    )
    parser.add_argument(
        "--table",
        metavar="NAME",
        help=f"the spans table (default {DEFAULT_TABLE}, the exporter's; --clickhouse)",
    )


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """``--store`` and ``--lenient``: how every command that reads spans finds and reads them."""
    parser.add_argument(
        "--store",
        metavar="URL",
        help=f"the store holding bases and payloads (default ${names.ENV_STORE}, else {names.DEFAULT_STORE})",
    )
    parser.add_argument(
        "--lenient", action="store_true", help="skip unreadable lines and spans and say how many"
    )


def _option_type(parse: Callable[[str], _T]) -> Callable[[str], _T]:
    """``parse`` as an argparse type: its ValueError becomes a usage error naming the option."""

    def convert(text: str) -> _T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    convert.__name__ = parse.__name__
    return convert


def add_policy_options(parser: argparse.ArgumentParser) -> None:
    """``--require``, ``--fail-on`` and ``--max-reconstructed``: a gate's `Policy`, as
    `policy_from_args` reads them; a bad value is a usage error naming the option."""
    parser.add_argument(
        "--require",
        choices=[VerdictStatus.VERIFIED.value, VerdictStatus.RECONSTRUCTED.value],
        help="fail (exit 4) unless every call has at least this verdict (default reconstructed: "
        "nothing damaged)",
    )
    parser.add_argument(
        "--fail-on",
        metavar="KIND,...",
        type=_option_type(parse_fail_on),
        help="fail (exit 4) when any call carries one of these gap kinds (af-otel gaps lists them)",
    )
    parser.add_argument(
        "--max-reconstructed",
        metavar="N%",
        type=_option_type(parse_percent),
        help="fail (exit 4) when more than N%% of the calls are reconstructed",
    )


def policy_from_args(args: argparse.Namespace) -> Policy:
    """The `Policy` the options of `add_policy_options` give (none given: nothing damaged)."""
    return Policy(
        require=VerdictStatus(args.require or VerdictStatus.RECONSTRUCTED.value),
        fail_on=args.fail_on or frozenset(),
        max_reconstructed=args.max_reconstructed,
    )


def add_key_options(parser: argparse.ArgumentParser) -> None:
    """``--key-file``: the option every command that checks keyed receipts takes (repeat it for
    keys rotated over time: each af-2 receipt names its key's id)."""
    parser.add_argument(
        "--key-file",
        metavar="PATH",
        action="append",
        help=f"secret of keyed receipts, repeatable (default ${names.ENV_KEY} or "
        f"${names.ENV_KEY_FILE}; ${names.ENV_KEY_RING}: a file of secrets, one a line)",
    )


def key_from_args(args: argparse.Namespace) -> KeyRing | None:
    """The keys of keyed receipts (`af_otel.keys.find_keys`): each ``--key-file``, else
    ``$AF_OTEL_KEY``, else the file ``$AF_OTEL_KEY_FILE`` names; with the secrets of
    ``$AF_OTEL_KEY_RING``; None when none is given. Raises `ReaderError` naming the option or
    variable when a named file cannot be read."""
    found = find_keys(getattr(args, "key_file", None) or ())
    if isinstance(found, KeyProblem):
        raise ReaderError(str(found))
    return found
