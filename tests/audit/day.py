"""A small generated "day" of traces, recorded by the real SDK and `ReceiptSpanProcessor` into
OTLP JSON lines (af_otel's own provider for that), with its store and a tampered copy.

Two services, each its own processor (so its own lane of a shared run): agents of several
turns (every call is a root span, so each run is spread over as many traces as it has calls), a
fan-out, a run both services served (two lanes, one tree), a call without receipt (content not
captured), and small runs enough that two shards both get some. The tampered copy edits one
message one call committed, as the demo's tampered copy does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from af_otel.cli.demo import tamper_copy
from af_otel.cli.pipeline import json_lines_provider
from af_otel.processor import run
from af_otel.store import LocalStore, Store
from tests.builders import assistant, user
from tests.reader.recordings import Recorder, agent

TAMPERED_RUN = "day-agent"
TAMPERED_EPOCH = 3
TAMPER = ("question 3", "question 8")
LANES_RUN = "day-lanes"
BLIND_RUN = "day-blind"
SMALL_RUNS = 8


@dataclass(frozen=True, slots=True)
class Day:
    traces: Path
    tampered: Path
    store: Path


@contextmanager
def _recorder(path: Path, store: Store, service: str) -> Iterator[Recorder]:
    made = Recorder(store, provider=json_lines_provider(path, store=store, service_name=service))
    try:
        yield made
    finally:
        made.close()


def record_day(folder: Path) -> Day:
    """Record the day into ``folder``: traces.jsonl, tampered.jsonl and store/."""
    store_dir = folder / "store"
    store = LocalStore(store_dir)
    lines_a, lines_b = folder / "checkout.jsonl", folder / "support.jsonl"
    with _recorder(lines_a, store, "checkout") as a, _recorder(lines_b, store, "support") as b:
        agent(a, TAMPERED_RUN, 4)
        agent(b, "day-fanout", 3, fan_out_at=2)
        history: list[dict[str, object]] = []
        for turn in range(4):  # one conversation, its turns served by the two services in turn
            history.append(user(f"lane question {turn}"))
            with run(LANES_RUN):
                (a, b)[turn % 2].chat(history)
            history.append(assistant(f"lane answer {turn}"))
        with run(BLIND_RUN):
            b.blind_chat(model="gpt-4o")
        for index in range(SMALL_RUNS):
            agent((a, b)[index % 2], f"day-small-{index}", 2)
    traces = folder / "traces.jsonl"
    traces.write_text(
        lines_a.read_text(encoding="utf-8") + lines_b.read_text(encoding="utf-8"), encoding="utf-8"
    )
    tampered = folder / "tampered.jsonl"
    tamper_copy(traces, tampered, store_dir, TAMPERED_RUN, TAMPERED_EPOCH, *TAMPER)
    return Day(traces, tampered, store_dir)
