"""``af-otel served --request``: each call's provider-native request body, rebuilt from the record
(`af_otel.reader.replay`), one JSON object a line; a call the record cannot rebuild is named on
standard error with the gap that says why, and the command then exits 2."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TextIO

import orjson

from af_otel.reader.replay import ReplayRefusedError, replay_request
from af_otel.reader.view import ServedView


def print_requests(
    views: Sequence[ServedView],
    key: Any = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Print every view's rebuilt body; 0 when all were rebuilt, 2 when any was refused."""
    out, err = out or sys.stdout, err or sys.stderr
    refused = 0
    for view in views:
        try:
            body = replay_request(view, key=key)
        except ReplayRefusedError as exc:
            refused += 1
            print(f"af-otel served --request: {exc}", file=err)
            continue
        out.write(orjson.dumps(body).decode() + "\n")
    if refused:
        print(f"af-otel served --request: {refused} of {len(views)} call(s) not rebuilt", file=err)
    return 2 if refused else 0
