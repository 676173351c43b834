"""Fork safety: a child process made by os.fork() mints correctly, and no lock or half-written state
held by another thread of the parent at the moment of the fork can stall or corrupt it.

The locks are not listed here: `tests.reliability.locks` finds them in the source and in the live
objects of every emit-path form, and each one found is held across a fork."""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.util.genai.types import InputMessage, Text

from af_otel import forksafe, names, read_spans, served_views, verify
from af_otel.processor import (
    ReceiptCompletionHook,
    ReceiptSpanExporter,
    ReceiptSpanProcessor,
    RunTagger,
    llm_call,
    run,
)
from af_otel.processor import context as run_context
from af_otel.processor.engine import live_engines
from af_otel.reader import ServedView, VerdictStatus
from af_otel.reader.fold import KeyedFold
from af_otel.web.evidence import Evidence
from tests.forking import fork_within

from .agents import Collecting, call_attributes, provider_with, receipts_by_run, script
from .locks import (
    MECHANISM,
    Found,
    import_package,
    live_locks,
    mechanism_calls,
    package_sources,
    primitives_in,
)

CHILD_SECONDS = 10
FORK_WATCHDOG = "AF_OTEL_TEST_FORK_WATCHDOG"  # read by tests/conftest.py


def _read_until_eof(fd: int, pid: int) -> bytes:
    """Read the child's answer; a child that outlives its own alarm by far is killed, not awaited."""
    deadline = time.monotonic() + CHILD_SECONDS + 30
    chunks: list[bytes] = []
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                os.kill(pid, signal.SIGKILL)
                break
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _in_child(work: Callable[[], Any]) -> Any:
    """Run ``work`` in a forked child; return its JSON result, or fail if it hangs or crashes."""
    read, write = os.pipe()
    # tests/conftest.py arms a faulthandler watchdog in the child before any other at-fork handler
    os.environ[FORK_WATCHDOG] = str(CHILD_SECONDS + 5)
    try:
        pid = os.fork()
    finally:
        if os.environ.get(FORK_WATCHDOG):
            os.environ.pop(FORK_WATCHDOG, None)
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        os.close(read)
        code = 0
        try:
            # Default action, whatever handler the parent had (pytest-timeout installs one): a
            # child stuck on a lock dies of SIGALRM instead of running the parent's handler.
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(CHILD_SECONDS)
            payload = json.dumps({"ok": work()}).encode()
        except BaseException as exc:
            payload = json.dumps({"error": repr(exc)}).encode()
            code = 1
        with os.fdopen(write, "wb") as out:
            out.write(payload)
        os._exit(code)
    os.close(write)
    data = _read_until_eof(read, pid)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        pytest.fail(
            f"the child died of signal {os.WTERMSIG(status)} (SIGALRM = a lock held across the fork)"
        )
    result = json.loads(data)
    assert "error" not in result, result["error"]
    return result["ok"]


def _mint_in(
    processor_inner: tuple[ReceiptSpanProcessor, Collecting], index: int
) -> dict[str, Any]:
    processor, inner = processor_inner
    tracer = provider_with(processor).get_tracer("agent")
    before = len(inner.spans)
    script(tracer, index).play()
    return receipts_by_run(inner.spans[before:])


def _expected(index: int) -> dict[str, Any]:
    inner = Collecting()
    tracer = provider_with(ReceiptSpanProcessor(inner)).get_tracer("agent")
    script(tracer, index).play()
    return json.loads(json.dumps(receipts_by_run(inner.spans)))


def test_child_mints_like_a_fresh_process() -> None:
    """After the parent has minted runs, a forked child mints a new run exactly as a fresh processor would."""
    inner = Collecting()
    processor = ReceiptSpanProcessor(inner)
    _mint_in((processor, inner), 1)
    got = _in_child(lambda: _mint_in((processor, inner), 2))
    assert got == _expected(2)


def _locks(processor: ReceiptSpanProcessor) -> dict[str, Any]:
    """The locks a parent thread may hold while it is inside the processor."""
    engine = processor.engine
    run = engine.runs.get("run-00003")
    return {
        "run table": engine.runs._lock,
        "open calls": engine._open_lock,
        "run state": run.lock,
        "digest memo": run.digests.lock,
    }


@pytest.mark.parametrize("which", ["run table", "open calls", "run state", "digest memo"])
def test_lock_held_by_another_thread_at_fork(which: str) -> None:
    """A parent thread inside the processor (holding one of its locks) at the moment of the fork
    does not stall the child: the child mints that same run correctly."""
    inner = Collecting()
    processor = ReceiptSpanProcessor(inner)
    lock = _locks(processor)[which]
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            holding.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait()
    try:
        got = _in_child(lambda: _mint_in((processor, inner), 3))
    finally:
        release.set()
        holder.join()
    assert got == _expected(3)


def test_fork_under_load() -> None:
    """Forking repeatedly while four threads mint through the same processor never stalls a child,
    whether the child uses a new processor or the parent's own."""
    expected = {index: _expected(index) for index in range(50, 55)}
    inner = Collecting(keep=False)
    processor = ReceiptSpanProcessor(inner)
    tracer = provider_with(processor).get_tracer("agent")
    stop = threading.Event()

    def busy(offset: int) -> None:
        index = offset
        while not stop.is_set():
            script(tracer, 100 + index).play()
            index += 4

    threads = [threading.Thread(target=busy, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    try:
        for index, want in expected.items():
            child_inner = Collecting()
            got = _in_child(
                lambda i=index, c=child_inner: _mint_in((ReceiptSpanProcessor(c), c), i)
            )
            assert got == want
            assert _in_child(lambda i=index: _count_in_child(processor, 10 + i)) == 5
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def _count_in_child(processor: ReceiptSpanProcessor, index: int) -> int:
    inner = Collecting()
    shared = ReceiptSpanProcessor(inner)
    shared.engine = processor.engine  # the parent's run table, locks and all
    tracer = provider_with(shared).get_tracer("agent")
    script(tracer, index).play()
    return sum(
        1
        for span in inner.spans
        if (span.attributes or {}).get(names.RECEIPT_STATE) == names.STATE_MINTED
    )


# -- every lock, found by itself ---------------------------------------------------------------

# What a prefork child is given to end its own LLM call in. A call takes a few milliseconds and a
# child stuck on a lock never ends, so the bound only has to outlast a busy machine: at 1 second,
# a fresh-clone CI run whose other xdist worker was running the stack tests killed six healthy
# children as hung; 10 seconds still tells a stuck child from a slow one.
PREFORK_SECONDS = 10.0


def test_no_module_but_forksafe_makes_a_lock_queue_or_thread() -> None:
    """Walking every module of the package finds a threading, queue or process primitive only in
    af_otel/forksafe.py: every other lock is made (and so reset in a child) through it."""
    sources = package_sources()
    assert MECHANISM in sources
    outside = [str(made) for made in primitives_in(sources) if made.path != MECHANISM]
    assert outside == []
    assert mechanism_calls(sources)  # the locks are there, made through the mechanism


def test_the_source_finder_catches_a_planted_lock(tmp_path: Path) -> None:
    """A bare lock, queue or pool in a module, however it is imported or written, is found."""
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import threading\n"
        "import queue as q\n"
        "from dataclasses import dataclass, field\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from threading import RLock as Reentrant\n"
        "from af_otel import forksafe\n"
        "_lock = threading.Lock()\n"
        "_queue = q.SimpleQueue()\n"
        "@dataclass\n"
        "class Holder:\n"
        "    lock: object = field(default_factory=threading.Condition)\n"
        "def pool():\n"
        "    return ThreadPoolExecutor(2), Reentrant()\n"
        "fine = forksafe.lock()\n",
        encoding="utf-8",
    )
    found = {(made.line, made.name) for made in primitives_in([planted])}
    assert {
        (7, "threading.Lock"),
        (8, "queue.SimpleQueue"),
        (11, "threading.Condition"),
        (13, "concurrent.futures.ThreadPoolExecutor"),
        (13, "threading.RLock"),
    } <= found
    assert all(line != 14 for line, _ in found)


class Keep(SpanExporter):
    """The inner exporter: keeps each span without a lock of its own (list appends are atomic),
    so only af_otel's locks stand between a child and its export."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class Stack:
    """Every emit-path form at once, as a prefork server sets them up before it forks: the
    processor, the exporter form with `RunTagger` (under the SDK's simple and batch span
    processors), the completion hook on a provider without
    either, and `llm_call` inside `run` (through ``trace.get_tracer``, which the test points at
    the hook's provider); plus the reader's views and verdicts of what they exported."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.by_processor, self.by_exporter, self.by_hook = Keep(), Keep(), Keep()
        self.by_batch = Keep()
        self.processor = ReceiptSpanProcessor(SimpleSpanProcessor(self.by_processor))
        self.exporter = ReceiptSpanExporter(self.by_exporter)
        self.tagger = RunTagger(SimpleSpanProcessor(self.exporter))
        # The usual production form: the SDK's batch processor starts its own thread again in a
        # child; the exporter it exports through is af_otel's.
        self.batched = ReceiptSpanExporter(self.by_batch)
        self.batch = BatchSpanProcessor(self.batched)
        self.hook = ReceiptCompletionHook()
        self.tracers = {}
        for form, processor in (
            ("processor", self.processor),
            ("exporter", self.tagger),
            ("batch", RunTagger(self.batch)),
            ("hook", SimpleSpanProcessor(self.by_hook)),
        ):
            provider = TracerProvider()
            provider.add_span_processor(processor)
            self.tracers[form] = provider.get_tracer("agent")
        monkeypatch.setattr(trace, "get_tracer", lambda *_, **__: self.tracers["hook"])
        self.views: tuple[ServedView, ...] = ()
        # The reader's other lock holders: a run's keyed fold, and the web view's evidence.
        self.fold = KeyedFold({}, {1: 0}, {})
        self.evidence = Evidence(store=None, file="never-read.jsonl")

    def play(self, run_id: str, turn: int) -> list[str]:
        """One LLM call through each form; the receipt state each exported span carries."""
        text = f"{run_id} turn {turn}"
        messages = [{"role": "user", "parts": [{"type": "text", "content": text}]}]
        before = {name: len(keep.spans) for name, keep in self._keeps().items()}
        with run(run_id):
            for form in ("processor", "exporter", "batch"):
                with self.tracers[form].start_as_current_span(
                    "chat gpt-4o-mini", attributes=call_attributes(run_id, messages)
                ):
                    pass
            with self.tracers["hook"].start_as_current_span(
                "chat gpt-4o-mini", attributes=_hook_attributes()
            ) as span:
                self.hook.on_completion(
                    inputs=[InputMessage(role="user", parts=[Text(content=text)])],
                    outputs=[],
                    system_instruction=[],
                    span=span,
                )
            with llm_call(model="gpt-4o-mini", provider="openai", messages=messages):
                pass
        self.batch.force_flush()
        return [
            str((span.attributes or {}).get(names.RECEIPT_STATE))
            for name, keep in self._keeps().items()
            for span in keep.spans[before[name] :]
            if span.name.startswith("chat")
        ]

    def read(self) -> list[str]:
        """Rebuild and verify what the processor form exported (the reader's locks, live)."""
        self.views = served_views(read_spans(self.by_processor.spans))
        return [verify(view).status.value for view in self.views]

    def roots(self) -> list[object]:
        return [
            self.processor,
            self.exporter,
            self.tagger,
            self.batched,
            self.hook,
            *self.views,
            self.fold,
            self.evidence,
            *live_engines(),
        ]

    def _keeps(self) -> dict[str, Keep]:
        return {
            "processor": self.by_processor,
            "exporter": self.by_exporter,
            "batch": self.by_batch,
            "hook": self.by_hook,
        }


def _hook_attributes() -> dict[str, Any]:
    """A util-genai chat span with content capture off: no content on it, the hook has it."""
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.provider.name": "openai",
    }


MINTED_EVERYWHERE = [names.STATE_MINTED] * 5


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Stack:
    import_package()  # every module's locks, the web's included when its extra is installed
    built = Stack(monkeypatch)
    for turn in range(2):
        assert built.play("run-prefork", turn) == MINTED_EVERYWHERE
    assert _undamaged(built.read())
    return built


def _undamaged(statuses: list[str]) -> bool:
    return bool(statuses) and VerdictStatus.DAMAGED.value not in statuses


def _registered(found: list[Found]) -> list[str]:
    """The locks found that the mechanism does not know (a child would inherit them held)."""
    known = {id(made) for made in forksafe.locks()}
    return [f"{lock.kind} at {lock.path}" for lock in found if id(lock.lock) not in known]


def test_every_live_lock_is_one_the_child_resets(stack: Stack) -> None:
    """Walking af_otel's modules and every emit-path form's objects finds locks only of the
    mechanism: each one a forked child gets back unlocked; among them the ones the exporter
    form, the engine's warning and the hook hung children on."""
    found = live_locks(stack.roots())
    assert _registered(found) == []
    kinds = {lock.kind for lock in found}
    assert {
        "af_otel.processor.exporter.ReceiptSpanExporter._lock",
        "af_otel.processor.engine._warned_lock",
        "af_otel.processor.hook.ReceiptCompletionHook._chain_lock",
        "af_otel.reader.view.RunContext.lock",
        "af_otel.reader.fold.KeyedFold._lock",
        "af_otel.web.evidence.Evidence._lock",
    } <= kinds


def test_the_live_finder_catches_a_planted_lock(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bare lock on an engine, a module's bare re-entrant lock and a queue in an exporter's
    list are each found and named as not reset; a lock of the mechanism is not."""
    monkeypatch.setattr(stack.exporter.engine, "_planted", threading.Lock(), raising=False)
    monkeypatch.setattr(run_context, "_planted", threading.RLock(), raising=False)
    monkeypatch.setattr(stack.hook, "_queues", [queue.Queue()], raising=False)
    monkeypatch.setattr(stack.processor, "_fine", forksafe.lock(stack.processor), raising=False)
    missed = _registered(live_locks(stack.roots()))
    assert sorted(entry.split(" at ")[0] for entry in missed) == [
        "af_otel.processor.context._planted",
        "af_otel.processor.engine.Engine._planted",
        "af_otel.processor.hook.ReceiptCompletionHook._queues[0]",
    ]


def _child_of(stack: Stack, held: Sequence[Any]) -> Callable[[], None]:
    def work() -> None:
        got = stack.play("run-prefork", 2), stack.play("run-child", 0)
        assert got == (MINTED_EVERYWHERE, MINTED_EVERYWHERE), got
        assert _undamaged(stack.read())
        for lock in held:  # those the calls did not need are free too
            assert lock.acquire(blocking=False)
            lock.release()

    return work


def _held(locks: Sequence[Any]) -> Callable[[], None]:
    """Hold ``locks`` on another thread until the returned call releases them."""
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        taken: list[Any] = []
        # A lock some other thread holds now is waited for; one taken in an order another thread
        # takes the other way round is given back and tried again, never deadlocked on.
        while len(taken) < len(locks):
            lock = locks[len(taken)]
            if lock.acquire(timeout=0.05):
                taken.append(lock)
                continue
            for held in reversed(taken):
                held.release()
            taken.clear()
        holding.set()
        release.wait()
        for held in reversed(taken):
            held.release()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    holding.wait()

    def done() -> None:
        release.set()
        holder.join()

    return done


@pytest.mark.slow
def test_prefork_child_ends_its_calls_while_each_lock_is_held(stack: Stack) -> None:
    """For each kind of lock found, and then for all of them at once, a parent thread holds it
    across the fork: the child still ends its own LLM calls through every form, exports them
    minted and reads them back undamaged, within a second."""
    found = live_locks(stack.roots())
    one_each: dict[str, Any] = {}
    # Of each kind, a lock of this test's own stack first (found from its roots).
    for lock in sorted(found, key=lambda lock: not lock.path.startswith("<root")):
        one_each.setdefault(lock.kind, lock.lock)
    cases = [(kind, [lock]) for kind, lock in sorted(one_each.items())]
    cases.append(("all at once", [lock.lock for lock in found]))
    stalled = []
    for kind, locks in cases:
        release = _held(locks)
        try:
            child = fork_within(_child_of(stack, locks), PREFORK_SECONDS)
        finally:
            release()
        if not child.ok:
            stalled.append(f"{kind}: {'hung' if child.hung else child.error}")
    assert stalled == []
    assert len(cases) > 10  # the walk reached every form's locks


@pytest.mark.slow
def test_the_issues_reproduction_no_child_hangs(stack: Stack) -> None:
    """Forking 20 times while a thread ends LLM calls through the exporter form (the issue's
    reproduction: 20 of 20 children hung): every child ends and exports one call of its own."""
    stop, exporting = threading.Event(), threading.Event()
    tracer = stack.tracers["exporter"]

    def busy() -> None:
        turn = 0
        while not stop.is_set():
            if turn:
                exporting.set()
            turn += 1
            messages = [{"role": "user", "parts": [{"type": "text", "content": f"q{turn}"}]}]
            with tracer.start_as_current_span(
                "chat gpt-4o-mini", attributes=call_attributes(f"run-{turn % 7}", messages)
            ):
                pass

    def child() -> None:
        before = len(stack.by_exporter.spans)
        messages = [{"role": "user", "parts": [{"type": "text", "content": "the child's"}]}]
        with tracer.start_as_current_span(
            "chat gpt-4o-mini", attributes=call_attributes("run-child", messages)
        ):
            pass
        mine = [
            dict(span.attributes or {})
            for span in stack.by_exporter.spans[before:]
            if (span.attributes or {}).get(names.RUN_ID) == "run-child"
        ]
        assert [attributes[names.RECEIPT_STATE] for attributes in mine] == [names.STATE_MINTED]

    thread = threading.Thread(target=busy)
    thread.start()
    exporting.wait()
    try:
        children = [fork_within(child, PREFORK_SECONDS) for _ in range(20)]
    finally:
        stop.set()
        thread.join()
    assert sum(child.hung for child in children) == 0
    assert [child.error for child in children if not child.ok] == []
