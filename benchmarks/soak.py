"""Long runs for docs/reliability.md: load, memory over 10,000 runs, and the worst case of
pathological input, measured side by side. Prints one markdown table per part.

1. Load: 32 threads and 1,000 asyncio tasks interleave 2,000 runs (each with a fan-out of two
   parallel calls) through one `ReceiptSpanProcessor`; every span must reach the inner processor
   and every receipt must equal the one minted for the same run alone.
2. Memory: traced memory sampled every 1,000 runs over 10,000 runs, (a) runs scoped by
   ``af_otel.run`` (released at exit) and (b) runs named only by ``af.run.id`` (never released,
   so held by the run table up to its bound); flat means the last samples do not grow.
3. Pathological input: time for 10k vs 100k messages through each stage (adapter, mint, reader
   verify), a 50 MB message, deep nesting. Linear stages show a ratio near 10.

Run: ``make soak`` (``.venv/bin/python benchmarks/soak.py``); ``--quick`` for a smaller pass.
The exit code is 1 when a check fails (a lost span, a receipt that differs, memory that grows,
a ratio above 20).
"""

from __future__ import annotations

import gc
import json
import resource
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import af_otel
from af_otel import mint_receipt, names
from af_otel.model import Request
from af_otel.processor import ReceiptSpanProcessor, llm_call, run
from af_otel.reader.sources import read_spans
from af_otel.reader.verify import verify
from af_otel.reader.view import served_views
from af_otel.semconv import adapt
from af_otel.store import LocalStore
from tests.reliability.agents import (
    Collecting,
    play_concurrently,
    provider_with,
    receipts_by_run,
    script,
)

QUICK = "--quick" in sys.argv
FAILED: list[str] = []


def check(ok: bool, what: str) -> str:
    if not ok:
        FAILED.append(what)
    return "yes" if ok else "**NO**"


def table(title: str, header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(" --- " for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")
    sys.stdout.flush()


# -- 1. load -------------------------------------------------------------------------------------


def load(runs: int, threads: int, tasks: int) -> None:
    inner = Collecting()
    processor = ReceiptSpanProcessor(inner)
    tracer = provider_with(processor).get_tracer("agent")
    scripts = [script(tracer, index) for index in range(runs)]
    started = time.perf_counter()
    failures = play_concurrently(scripts, threads, tasks)
    elapsed = time.perf_counter() - started
    spans = sum(s.span_count for s in scripts)
    calls = sum(s.llm_calls for s in scripts)
    concurrent = receipts_by_run(inner.spans)

    alone_inner = Collecting()
    alone = provider_with(ReceiptSpanProcessor(alone_inner)).get_tracer("agent")
    for index in range(runs):
        script(alone, index).play()
    same = concurrent == receipts_by_run(alone_inner.spans)
    minted = sum(
        1
        for span in inner.spans
        if (span.attributes or {}).get(names.RECEIPT_STATE) == names.STATE_MINTED
    )
    table(
        "Load",
        (
            "threads",
            "asyncio tasks",
            "runs",
            "LLM calls",
            "spans",
            "spans reaching inner",
            "minted",
            "equal to one-at-a-time",
            "exceptions",
            "wall s",
            "spans/s",
        ),
        [
            (
                threads,
                tasks,
                runs,
                calls,
                spans,
                f"{inner.ended} ({check(inner.ended == spans, 'load: spans lost')})",
                f"{minted} ({check(minted == calls, 'load: calls not minted')})",
                check(same, "load: receipts differ from one-at-a-time"),
                f"{len(failures)} ({check(not failures, 'load: exceptions')})",
                f"{elapsed:.1f}",
                f"{spans / elapsed:,.0f}",
            )
        ],
    )


# -- 2. memory -----------------------------------------------------------------------------------


def memory(runs: int, every: int, bound: int) -> None:
    rows = []
    for mode in ("af_otel.run (released at exit)", f"af.run.id only (run table bound {bound:,})"):
        inner = Collecting(keep=False)
        processor = ReceiptSpanProcessor(inner)
        processor.engine.runs.max_runs = bound
        tracer = provider_with(processor).get_tracer("agent")
        total = runs if mode.startswith("af_otel.run") else runs + 2 * every
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        samples: list[int] = []
        started = time.perf_counter()
        for index in range(total):
            run = script(tracer, index, turns=1)
            if mode.startswith("af_otel.run"):
                with af_otel.run(run.run):
                    run.play()
            else:
                run.play()
            if (index + 1) % every == 0:
                gc.collect()
                samples.append(tracemalloc.get_traced_memory()[0] - base)
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        elapsed = time.perf_counter() - started
        tail = samples[len(samples) // 2 :]
        if mode.startswith("af_otel.run"):
            flat = max(tail) <= min(tail) * 1.10 + 256 * 1024
        else:
            # Grows until the run table holds its bound, then not past it.
            flat = (
                runs <= 10_000 or samples[-1] <= samples[len(samples) * 10_000 // runs - 1] * 1.05
            )
        per_run = samples[-1] / max(len(processor.engine.runs), 1)
        rows.append(
            (
                mode,
                total,
                len(processor.engine.runs),
                " / ".join(f"{s / 2**20:.1f}" for s in samples),
                f"{peak / 2**20:.1f}",
                f"{per_run / 1024:.1f}" if len(processor.engine.runs) else "-",
                check(flat, f"memory grows: {mode}"),
                f"{elapsed:.0f}",
            )
        )
    table(
        "Memory over runs (traced MiB held after every " + f"{every:,} runs)",
        (
            "runs scoped by",
            "runs",
            "runs held at end",
            "held MiB per sample",
            "peak MiB",
            "KiB per held run",
            "flat",
            "s",
        ),
        rows,
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nProcess peak RSS after the memory runs: {rss:.0f} MiB")


# -- 3. pathological input -------------------------------------------------------------------------


def timed(work: Callable[[], Any], repeats: int = 3, *, collect: bool = True) -> tuple[float, Any]:
    """Best time of ``repeats``; ``collect=False`` runs with the cyclic GC paused, which shows the
    code's own growth (CPython's collector adds a superlinear cost to any large build-up of
    objects, af_otel or not)."""
    best, result = float("inf"), None
    for _ in range(repeats):
        gc.collect()
        if not collect:
            gc.disable()
        try:
            started = time.perf_counter()
            result = work()
            best = min(best, time.perf_counter() - started)
        finally:
            gc.enable()
    return best, result


def _messages(count: int) -> list[dict[str, Any]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "parts": [{"type": "text", "content": f"message {i}"}],
        }
        for i in range(count)
    ]


def _verify_run(count: int, exporter: InMemorySpanExporter, store: LocalStore) -> Callable[[], Any]:
    """One run of two calls with ``count`` messages, recorded through `llm_call` (the record
    that holds the whole request, so its verdict can be `verified`; a hand-made GenAI span with
    no wire body is rightly `reconstructed`, docs/reader.md), then read and verified."""
    before = len(exporter.get_finished_spans())
    history = _messages(count)
    with run(f"run-{count}"):
        for turn in range(2):
            history = [
                *history,
                {"role": "user", "parts": [{"type": "text", "content": f"turn {turn}"}]},
            ]
            with llm_call(model="m", provider="openai", messages=history):
                pass
    spans = exporter.get_finished_spans()[before:]

    def work() -> list[str]:
        return [
            str(verify(view).status) for view in served_views(read_spans(list(spans)), store=store)
        ]

    return work


def _adapt_work(count: int) -> Callable[[], Any]:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.input.messages": json.dumps(_messages(count)),
    }
    return lambda: adapt(attributes, "chat m")


def _mint_work(count: int) -> Callable[[], Any]:
    messages = _messages(count)
    return lambda: mint_receipt(Request.from_dict({"messages": messages}), run_id="r", epoch=1)


def pathological(small: int, large: int) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        # `llm_call` records through the global provider, which a process sets once.
        exporter, store = InMemorySpanExporter(), LocalStore(Path(tmp) / "store")
        recording = ReceiptSpanProcessor(SimpleSpanProcessor(exporter), store=store)
        trace.set_tracer_provider(provider_with(recording))
        stages: list[tuple[str, Callable[[int], Callable[[], Any]]]] = [
            ("adapt (GenAI JSON attribute)", _adapt_work),
            ("normalize + mint", _mint_work),
            ("reader: served view + verify", lambda n: _verify_run(n, exporter, store)),
        ]
        for name, make in stages:
            small_work, large_work = make(small), make(large)
            t_small, _ = timed(small_work, collect=False)
            t_large, out = timed(large_work, repeats=2, collect=False)
            g_small, _ = timed(small_work)
            g_large, _ = timed(large_work, repeats=2)
            ratio = t_large / t_small
            if name.startswith("reader"):
                check(set(out) == {"verified"}, f"{name}: not verified")
            rows.append(
                (
                    name,
                    f"{small:,}",
                    f"{t_small * 1000:.0f}",
                    f"{large:,}",
                    f"{t_large * 1000:.0f}",
                    f"{ratio:.1f}",
                    f"{g_large / g_small:.1f}",
                    check(ratio < 20, f"{name}: ratio {ratio:.1f}"),
                )
            )
    table(
        "Pathological input: time for small vs large messages (ms, best of runs, GC paused)",
        (
            "stage",
            "small",
            "ms",
            "large",
            "ms",
            "ratio, GC paused (≈ size ratio when linear)",
            "ratio, GC on",
            "not quadratic",
        ),
        rows,
    )
    big = "a" * (50 * 2**20)
    tracemalloc.start()
    t_big, receipt = timed(
        lambda: mint_receipt({"messages": [{"role": "user", "content": big}]}, run_id="r", epoch=1),
        repeats=1,
    )
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    nested: Any = "x"
    for _ in range(100_000):
        nested = [nested]
    t_deep, deep = timed(
        lambda: mint_receipt(
            {
                "messages": [
                    {
                        "role": "assistant",
                        "parts": [
                            {"type": "tool_call", "id": "1", "name": "f", "arguments": nested}
                        ],
                    }
                ]
            },
            run_id="r",
            epoch=1,
        )
    )
    table(
        "Single pathological values",
        ("input", "ms", "peak traced MiB", "outcome"),
        [
            (
                "one 50 MiB message: mint",
                f"{t_big * 1000:.0f}",
                f"{peak / 2**20:.0f}",
                receipt.state,
            ),
            (
                "tool arguments nested 100,000 deep: mint",
                f"{t_deep * 1000:.0f}",
                "-",
                f"{deep.state} ({deep.absent_reason})",
            ),
        ],
    )


def main() -> int:
    if QUICK:
        load(200, 32, 100)
        memory(2_000, 500, 1_000)
        pathological(1_000, 10_000)
    else:
        load(2_000, 32, 1_000)
        memory(10_000, 1_000, 10_000)
        pathological(10_000, 100_000)
    if FAILED:
        print("\nFAILED: " + "; ".join(FAILED))
        return 1
    print("\nall checks held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
