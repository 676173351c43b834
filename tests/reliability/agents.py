"""Scripted agent runs for the reliability suites: real OTel SDK spans in the GenAI conventions,
driven through a real `ReceiptSpanProcessor`, with a logical clock so that a run replays the same
span times whether it runs alone or interleaved with two thousand others."""

from __future__ import annotations

import asyncio
import json
import queue
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from af_otel import names
from af_otel.receipts import Receipt, receipt_digest

Step = Callable[[], None]


class Collecting(SpanProcessor):
    """The inner processor: keeps every span it is handed (or only counts them), thread-safe."""

    def __init__(self, *, keep: bool = True) -> None:
        self.keep = keep
        self.ended = 0
        self.started = 0
        self.spans: list[ReadableSpan] = []
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        with self._lock:
            self.started += 1

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            self.ended += 1
            if self.keep:
                self.spans.append(span)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def provider_with(processor: SpanProcessor) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider


def _message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def call_attributes(
    run: str, messages: Sequence[Mapping[str, Any]], *, tag: str = ""
) -> dict[str, Any]:
    """A chat span's attributes as util-genai instrumentations write them, with ``af.run.id``."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
        # The system prompt stays a field for this provider (for OpenAI it goes first).
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.system_instructions": json.dumps(
            [{"type": "text", "content": f"You help {run}{tag}."}]
        ),
        "gen_ai.input.messages": json.dumps(list(messages)),
    }
    if run:
        attributes[names.RUN_ID] = run
    return attributes


@dataclass
class Script:
    """One run as a list of steps: a sequential turn, then a fan-out of two parallel calls, then a
    final turn that sees both answers. Each step opens or closes one span at a logical time."""

    run: str
    tracer: trace.Tracer
    origin: int
    turns: int = 2
    spans: dict[str, Span] = field(default_factory=dict)
    clock: int = 0

    def tick(self) -> int:
        self.clock += 1_000
        return self.origin + self.clock

    def steps(self) -> Iterator[Step]:
        history = [_message("user", f"task of {self.run}")]
        yield lambda: self._open("root", None, {})
        for turn in range(self.turns):
            sent = list(history)
            yield lambda t=turn, s=sent: self._open(
                f"turn{t}", "root", call_attributes(self.run, s)
            )
            yield lambda t=turn: self._close(f"turn{t}")
            history.append(_message("assistant", f"{self.run} answer {turn}"))
            history.append(_message("user", f"{self.run} follow-up {turn}"))
        left = [*history, _message("user", f"{self.run} left branch")]
        right = [*history, _message("user", f"{self.run} right branch")]
        yield lambda: self._open("left", "root", call_attributes(self.run, left))
        yield lambda: self._open("right", "root", call_attributes(self.run, right))
        yield lambda: self._close("left")
        yield lambda: self._close("right")
        final = [*history, _message("assistant", f"{self.run} merged")]
        yield lambda: self._open("final", "root", call_attributes(self.run, final))
        yield lambda: self._close("final")
        yield lambda: self._close("root")

    @property
    def llm_calls(self) -> int:
        return self.turns + 3

    @property
    def span_count(self) -> int:
        return self.llm_calls + 1

    def _open(self, name: str, parent: str | None, attributes: dict[str, Any]) -> None:
        context = trace.set_span_in_context(self.spans[parent]) if parent else Context()
        span_name = "chat gpt-4o-mini" if attributes else f"agent {self.run}"
        self.spans[name] = self.tracer.start_span(  # type: ignore[assignment]
            span_name, context=context, attributes=attributes, start_time=self.tick()
        )

    def _close(self, name: str) -> None:
        self.spans.pop(name).end(end_time=self.tick())

    def play(self) -> None:
        for step in self.steps():
            step()

    async def play_async(self) -> None:
        for step in self.steps():
            step()
            await asyncio.sleep(0)


def run_name(index: int) -> str:
    return f"run-{index:05d}"


def script(tracer: trace.Tracer, index: int, turns: int = 2) -> Script:
    # Runs share one logical time line far apart, so no run's times overlap another's.
    return Script(
        run_name(index), tracer, origin=1_700_000_000_000_000_000 + index * 10_000_000, turns=turns
    )


def receipts_by_run(spans: Sequence[ReadableSpan]) -> dict[str, dict[int, dict[str, Any]]]:
    """Per run, per epoch: every af.* attribute and the commit events of that epoch's span."""
    out: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for span in spans:
        attributes = dict(span.attributes or {})
        if names.EPOCH not in attributes:
            continue
        evidence = {k: _plain(v) for k, v in attributes.items() if k.startswith("af.")}
        _without_lane(evidence, attributes)
        evidence["events"] = [
            (event.name, {k: _plain(v) for k, v in (event.attributes or {}).items()})
            for event in span.events
            if event.name == names.COMMIT_EVENT
        ]
        run = str(attributes[names.RUN_ID])
        epoch = int(attributes[names.EPOCH])  # type: ignore[arg-type]
        assert epoch not in out[run], f"epoch {epoch} of {run} minted twice"
        out[run][epoch] = evidence
    return dict(out)


def _without_lane(evidence: dict[str, Any], attributes: Mapping[str, Any]) -> None:
    """Each writer numbers in a random lane that the digest binds: the digest is checked against
    its lane here, then both are replaced by what they are without it, so two runs of one script
    compare equal."""
    lane = evidence.pop(names.EPOCH_LANE, None)
    assert lane is None or (isinstance(lane, str) and len(lane) == 16)
    receipt = Receipt.from_attributes(attributes)
    plain_schemes = (names.SCHEME_PLAIN, names.SCHEME_2)
    if isinstance(receipt, Receipt) and receipt.minted and receipt.scheme in plain_schemes:
        assert receipt_digest(receipt) == evidence[names.RECEIPT_DIGEST]
        # af-2 also binds the parent's digest, which binds the parent's lane
        evidence.pop(names.RECEIPT_PARENT_DIGEST, None)
        laneless = replace(receipt, lane=None, parent_digest=None)
        evidence[names.RECEIPT_DIGEST] = receipt_digest(laneless)


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def play_concurrently(scripts: Sequence[Script], threads: int, tasks: int) -> list[BaseException]:
    """Play the first half of ``scripts`` on ``threads`` threads and the second half as asyncio
    tasks (at most ``tasks`` at once) on a loop in its own thread, all at the same time. Returns
    whatever the scripts raised (the emit path promises nothing)."""
    threaded, tasked = scripts[: len(scripts) // 2], scripts[len(scripts) // 2 :]
    work: queue.Queue[Script] = queue.Queue()
    for item in threaded:
        work.put(item)
    failures: list[BaseException] = []
    start = threading.Barrier(threads + 1)

    def worker() -> None:
        start.wait()
        while True:
            try:
                item = work.get_nowait()
            except queue.Empty:
                return
            try:
                item.play()
            except BaseException as exc:
                failures.append(exc)

    async def all_tasks() -> None:
        gate = asyncio.Semaphore(tasks)

        async def one(item: Script) -> None:
            async with gate:
                await item.play_async()

        await asyncio.gather(*(one(item) for item in tasked))

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    loop = threading.Thread(target=lambda: asyncio.run(all_tasks()))
    start.wait()
    loop.start()
    for thread in [*pool, loop]:
        thread.join()
    return failures
