"""Conversations served by many worker processes sharing one store: every call is verified and
the reader shows one tree per conversation, whichever worker served which turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from af_otel import names
from af_otel.cli import main
from af_otel.reader import ServedView, served_views, verify
from af_otel.reader.sources import read_spans
from af_otel.store import open_store
from af_otel.store.items import is_item_ref
from tests.multiworker.service import (
    Conversation,
    ModelServer,
    Worker,
    read_together,
    text,
    workers,
)

pytestmark = pytest.mark.slow  # worker processes with the real openai client and instrumentation


def _store_url(kind: str, folder: Path) -> str:
    # `local://` is fsspec's local file system (a `file://` URL opens the embedded store).
    return str(folder / "store") if kind == "directory" else f"local://{folder / 'store'}"


def _label(view: ServedView) -> str:
    assert view.messages is not None
    return str(view.messages[-1]["parts"][0]["content"])


def _check(
    conversations: list[Conversation], files: list[Path], store: str, server: ModelServer
) -> dict[str, list[ServedView]]:
    """Read the workers' files together; every call verified, each run one tree in real order."""
    views = served_views(read_spans(files_as_one(files)), store=store)
    by_run: dict[str, list[ServedView]] = {}
    for view in views:
        assert view.run_id is not None
        by_run.setdefault(view.run_id, []).append(view)
    assert sorted(by_run) == sorted(c.name for c in conversations)
    wire = {text(body["messages"][-1]): body["messages"] for body in server.bodies}
    for conversation in conversations:
        run = by_run[conversation.name]
        assert [v.epoch for v in run] == list(range(1, len(run) + 1))
        labels = {v.epoch: _label(v) for v in run}
        assert sorted(labels.values()) == sorted(conversation.grew_from)
        for view in run:
            verdict = verify(view)
            assert verdict.status.value == "verified", (view.epoch, verdict.reason)
            assert names.GAP_NO_RUN_LOG not in view.gap_kinds, view.gaps
            label = labels[view.epoch]
            assert (labels[view.parent] if view.parent else None) == conversation.grew_from[label]
            # The rebuilt messages are the ones the model server received, role and text.
            assert view.messages is not None
            rebuilt = [(m["role"], m["parts"][0]["content"]) for m in view.messages]
            sent = [(m["role"], text(m)) for m in wire[label]]
            assert rebuilt == sent
    return by_run


def files_as_one(files: list[Path]) -> Path:
    return read_together(files, files[0].parent / "all.jsonl")


def _stored_lists_hold_references(store: str) -> None:
    """No base holds a message inline, and no stored list holds a message another call answered
    (more than one answer): such messages are blobs of their own, stored once."""
    root = Path(store.removeprefix("local://")) / "sha256"
    opened = open_store(store)
    messages = 0
    for path in root.rglob("*"):
        if not path.is_file() or path.name.startswith("."):
            continue
        value: Any = opened.get_json(f"sha256:{path.parent.name}{path.name}")
        if isinstance(value, dict) and "role" in value:
            messages += 1
        elif isinstance(value, dict):
            assert all(is_item_ref(item) for item in value.get("messages", ())), path
        elif isinstance(value, list):
            inline = [m for m in value if not is_item_ref(m)]
            assert sum(1 for m in inline if m.get("role") == "assistant") <= 1, path
    assert messages > 0


@pytest.mark.parametrize("store_kind", ["directory", "fsspec"])
@pytest.mark.parametrize(("count", "run_by"), [(2, "block"), (4, "attribute")])
def test_interleaved_conversations_over_workers(
    tmp_path: Path, store_kind: str, count: int, run_by: str
) -> None:
    """Two conversations interleaved over 2 or 4 workers, with a fan-out of three parallel calls in
    one turn and a worker restarted mid-conversation: every call verified, one tree each."""
    store = _store_url(store_kind, tmp_path)
    conversations = [Conversation("conv-a"), Conversation("conv-b")]
    files: list[Path] = []
    with ModelServer() as server, workers(tmp_path, count, store, server.url, run_by) as pool:
        files.extend(w.out for w in pool)
        turns = [0] * len(conversations)

        def next_worker(index: int) -> Worker:
            # Conversation i's k-th request lands on worker (k + i) mod count: every worker
            # serves every conversation, and consecutive requests land on different workers.
            turns[index] += 1
            return pool[(turns[index] + index) % len(pool)]

        for index, conversation in enumerate(conversations):
            conversation.chat(next_worker(index), "q0")
        for index, conversation in enumerate(conversations):
            conversation.chat(next_worker(index), "q1")
        for index, conversation in enumerate(conversations):
            conversation.fan_out(next_worker(index), server, 3)
        for index, conversation in enumerate(conversations):
            conversation.chat(next_worker(index), "merge")
        # A deploy restarts worker 0 mid-conversation: a new process, a new file.
        pool[0].stop()
        pool[0] = Worker(tmp_path, "worker-0-restarted", store, server.url, run_by)
        files.append(pool[0].out)
        for question in ("q3", "q4"):
            for index, conversation in enumerate(conversations):
                conversation.chat(next_worker(index), question)
    runs = _check(conversations, files, store, server)
    assert all(len(views) == 8 for views in runs.values())
    _stored_lists_hold_references(store)


@pytest.mark.parametrize("form", ["processor", "exporter"])
def test_two_workers_six_calls_verify_and_print_one_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    """One conversation served alternately by two workers that each keep the run's state (the run
    id is an attribute of the spans), in either form: 6 of 6 verified, and `served` prints one
    chain of parents."""
    store = str(tmp_path / "store")
    conversation = Conversation("conv-1")
    with (
        ModelServer() as server,
        workers(tmp_path, 2, store, server.url, "attribute", form) as pool,
    ):
        for turn in range(6):
            conversation.chat(pool[turn % 2], f"q{turn}")
        files = [w.out for w in pool]
    _check([conversation], files, store, server)
    together = str(files_as_one(files))
    # Each worker numbered its own calls 1, 2, 3 in a lane of its own.
    lanes: dict[str, list[int]] = {}
    for line in Path(together).read_text(encoding="utf-8").splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    attrs = {a["key"]: a["value"] for a in span["attributes"]}
                    if names.EPOCH_LANE in attrs:
                        lane = attrs[names.EPOCH_LANE]["stringValue"]
                        lanes.setdefault(lane, []).append(int(attrs[names.EPOCH]["intValue"]))
    assert sorted(sorted(e) for e in lanes.values()) == [[1, 2, 3], [1, 2, 3]]
    assert main(["verify", together, "--store", store]) == 0
    out = capsys.readouterr().out
    assert "6 LLM call(s)" in out
    assert "6 verified" in out
    assert main(["served", together, "--store", store]) == 0
    heads = [line for line in capsys.readouterr().out.splitlines() if line.startswith("run ")]
    assert heads == [f"run conv-1 · epoch {k} (parent {k - 1})" for k in range(1, 7)]
    assert main(["gaps", together, "--store", store, "--kind", names.GAP_NO_RUN_LOG]) == 0
    assert capsys.readouterr().out == ""
