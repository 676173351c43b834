"""``af-otel served --request``: each call's provider-native request body, rebuilt from the record
(`af_otel.reader.replay`), one JSON object a line; a body not spelled as sent (no spelling on
record) is named on standard error with what it leaves out; a call the record cannot rebuild is
named there with the gap that says why, and the command then exits 2. For an endpoint whose path
names the model (Gemini, Bedrock) the body alone does not say where it goes: its path is named on
standard error too."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TextIO

import orjson

from af_otel.reader.replay import ReplayRefusedError, replay
from af_otel.reader.view import ServedView
from af_otel.store.base import Store


def print_requests(
    views: Sequence[ServedView],
    key: Any = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    store: Store | None = None,
) -> int:
    """Print every view's rebuilt body; 0 when all were rebuilt, 2 when any was refused."""
    out, err = out or sys.stdout, err or sys.stderr
    refused = 0
    for view in views:
        try:
            found = replay(view, key=key, store=store)
        except ReplayRefusedError as exc:
            refused += 1
            print(f"af-otel served --request: {exc}", file=err)
            continue
        if found.path:
            where = f"span {view.span_id}: POST {found.path} ({found.endpoint})"
            print(f"af-otel served --request: {where}", file=err)
        if not found.exact:
            print(f"af-otel served --request: span {view.span_id}: {found.notice}", file=err)
        out.write(orjson.dumps(found.body).decode() + "\n")
    if refused:
        print(f"af-otel served --request: {refused} of {len(views)} call(s) not rebuilt", file=err)
    return 2 if refused else 0
