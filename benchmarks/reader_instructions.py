"""The keyed reader's work in machine instructions at 100 and 1,000 turns, counted by Valgrind.

`benchmarks/reader.py` times the reader; time also counts the memory the work waits for, which
grows with the heap (a 1,000-turn run's messages no longer fit in the caches, and the garbage
collector walks more of them). Instructions count the work alone, so their ratio says whether
the reader's own work is linear. Target: a 1,000-turn read at most 10.5x the instructions of a
100-turn one, judged with the collector on, as a user's program runs it (the reader pauses it
itself while it builds views and verifies); the ratio with the collector off is printed beside it.
``make bench`` runs it (about 5 minutes); it needs ``valgrind`` on PATH (Debian's ``valgrind``
package, which ``make bench`` installs when run as root), and without it the line fails.

Each run is built once here and written to a temporary file; Valgrind runs a child that loads
it, reads it ``reads`` times, and the same child reading it zero times: the difference is the
reads' instructions alone.

It also counts, on `benchmarks/reader.py`'s throughput file, the instructions of ``orjson.loads``
over its lines, of `read_spans` and of building the views and verifying them from spans already
read. Target: views and verify at most 1.5x `read_spans`' instructions (the parse is held to
0.4x ``orjson.loads``' throughput by `benchmarks/reader.py`; together they bound the file to
verdicts, in a measure the neighbours' load does not move).
"""

from __future__ import annotations

import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import reader as bench

from af_otel.store import LocalStore

SCALING_TARGET = 10.5  # instructions at 1,000 turns over those at 100, at most
VIEWS_TARGET = 1.5  # views and verify over read_spans, instructions on the throughput file, at most
VALGRIND = ("valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null")
CHILD = """
import gc, pickle, sys
sys.path.insert(0, {bench_dir!r})
import reader as bench
from af_otel.reader.records import EventRecord, SpanRecord
from af_otel.store import LocalStore
store = LocalStore({store!r})
with open({spans!r}, "rb") as stream:
    rows = pickle.load(stream)
spans = tuple(
    SpanRecord(*row[:8], tuple(EventRecord(*event) for event in row[8]), row[9]) for row in rows
)
bench.keyed_reader(spans, store)  # imports and first-call work, in both counts alike
for _ in range({reads}):
    gc.collect()
    if {collector_off}:
        gc.disable()
    bench.keyed_reader(spans, store)
    gc.enable()
"""


FILE_CHILD = """
import gc, sys
import orjson
sys.path.insert(0, {bench_dir!r})
from af_otel.reader.sources import read_spans
from af_otel.reader.verify import verify
from af_otel.reader.view import served_views
from af_otel.store import LocalStore
store = LocalStore({store!r})
with open({spans!r}, "rb") as stream:
    lines = stream.read().splitlines()
spans = tuple(read_spans({spans!r}))
verify(served_views(spans, store=store))  # imports and first-call work, in both counts alike
for _ in range({reads}):
    gc.collect()
    if {phase!r} == "orjson":
        for line in lines:
            orjson.loads(line)
    elif {phase!r} == "read":
        tuple(read_spans({spans!r}))
    else:
        verify(served_views(spans, store=store))
"""
FILE_PHASES = ("orjson", "read", "views")


def instructions(script: str) -> int:
    done = subprocess.run(
        [*VALGRIND, sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None:
        raise SystemExit(f"valgrind printed no instruction count:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def per_read(directory: Path, turns: int, reads: int, collector_off: bool) -> float:
    store = directory / f"store-{turns}"
    spans = directory / f"spans-{turns}.pickle"
    if not spans.exists():
        built = bench.build_run(turns, LocalStore(store))
        rows = [
            (
                *(s.trace_id, s.span_id, s.parent_span_id, s.name, s.kind, s.start_ns, s.end_ns),
                dict(s.attributes),
                [(e.name, e.time_ns, dict(e.attributes)) for e in s.events],
                dict(s.resource),
            )
            for s in built
        ]
        spans.write_bytes(pickle.dumps(rows))
    fields = {
        "bench_dir": str(Path(__file__).parent),
        "store": str(store),
        "spans": str(spans),
        "collector_off": collector_off,
    }
    base = instructions(CHILD.format(reads=0, **fields))
    return (instructions(CHILD.format(reads=reads, **fields)) - base) / reads


def file_phases(directory: Path, reads: int = 3) -> dict[str, float]:
    """Instructions per read of each of `FILE_PHASES` on the throughput file."""
    path, store = bench.write_throughput_file(directory)
    out = {}
    for phase in FILE_PHASES:
        fields = {
            "bench_dir": str(Path(__file__).parent),
            "store": str(store),
            "spans": str(path),
            "phase": phase,
        }
        base = instructions(FILE_CHILD.format(reads=0, **fields))
        out[phase] = (instructions(FILE_CHILD.format(reads=reads, **fields)) - base) / reads
    return out


def main() -> int:
    print("af_otel keyed reader: instructions per read (Valgrind), 1,000 turns vs 100")
    if shutil.which("valgrind") is None:
        print(
            "  keyed at 1,000 turns / at 100 turns, instructions: not measured, valgrind is not on"
            " PATH (apt-get install valgrind) FAIL"
        )
        return 1
    ratios = {}
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        for collector_off in (False, True):
            small = per_read(directory, 100, 10, collector_off)
            large = per_read(directory, 1000, 1, collector_off)
            ratios[collector_off] = large / small
            label = "collector off" if collector_off else "collector on "
            print(
                f"  {label}: 100 turns {small / 1e6:8.1f} M, 1,000 turns {large / 1e6:8.1f} M:"
                f" {large / small:.2f}x"
            )
        phases = file_phases(directory)
    views = phases["views"] / phases["read"]
    views_ok = views <= VIEWS_TARGET
    print(
        f"  the throughput file ({bench.THROUGHPUT_TURNS} calls), instructions per read:"
        f" orjson.loads {phases['orjson'] / 1e6:.1f} M, read_spans {phases['read'] / 1e6:.1f} M"
        f" ({phases['read'] / phases['orjson']:.2f}x orjson.loads), views and verify"
        f" {phases['views'] / 1e6:.1f} M"
    )
    print(
        f"  views and verify / read_spans, instructions: {views:.2f}x (target <= {VIEWS_TARGET}x)"
        f" {'PASS' if views_ok else 'FAIL'}"
    )
    scaled = ratios[False] <= SCALING_TARGET
    print(
        f"  keyed at 1,000 turns / at 100 turns, instructions: {ratios[False]:.2f}x"
        f" (target <= {SCALING_TARGET}x) {'PASS' if scaled else 'FAIL'}"
    )
    passed = scaled and views_ok
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
