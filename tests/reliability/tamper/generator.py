"""The tamper corpus: record a real trace through the real processor (OTLP JSON lines written by
opentelemetry-exporter-otlp-json-file, plus the content store), then apply each deliberate tamper
to the exported JSON and say what the reader must report for it.

Each `Case` names the epoch where the tamper must first show and how: ``damaged`` with the field
(prefix) and message index, or the exact ``gap`` that excuses it. Run as a script to write the
corpus to a directory for inspection: ``python -m tests.reliability.tamper.generator OUT``.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import af_otel
from af_otel import names
from af_otel.store import LocalStore

RUN_A = "run-alpha"
RUN_B = "run-bravo"
# Turns per run: epochs 1..TURNS, then a fan-out (TURNS+1, TURNS+2) and a final call (TURNS+3).
TURNS = 4
EPOCHS = TURNS + 3
SYSTEM = "You are the billing agent."


def base_of(run: str) -> dict[str, Any]:
    """Each run starts from its own stored base (two earlier turns), so a tamper of one run's blob
    touches that run only."""
    return {
        "system": SYSTEM,
        "messages": [
            {"role": "user", "content": f"{run}: my invoice 1041 was wrong."},
            {"role": "assistant", "content": f"{run}: I corrected invoice 1041."},
        ],
    }


# Commit values up to this size stay inline; one turn's message is made larger than Tempo's
# 2,048-byte attribute limit so that a backend cut can be simulated on a real value.
INLINE_LIMIT = 8192
LONG_TURN = 2


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def _assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "parts": [{"type": "text", "content": text}]}


def _base_messages(run: str) -> list[dict[str, Any]]:
    return [
        {"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]}
        for m in base_of(run)["messages"]
    ]


def record(directory: Path) -> tuple[Path, Path]:
    """Record two runs (each: a base, TURNS turns, a fan-out of two parallel calls, a final call)
    and return the OTLP JSON-lines trace file and the store root."""
    directory.mkdir(parents=True, exist_ok=True)
    trace_path = directory / "trace.jsonl"
    store_root = directory / "store"
    provider = TracerProvider()
    provider.add_span_processor(
        af_otel.ReceiptSpanProcessor(
            SimpleSpanProcessor(FileSpanExporter(trace_path)),
            store=LocalStore(store_root),
            inline_limit=INLINE_LIMIT,
        )
    )
    tracer = provider.get_tracer("af_otel")  # a writer recording every field
    for run in (RUN_A, RUN_B):
        with af_otel.run(run, base=base_of(run)), tracer.start_as_current_span(f"agent {run}"):
            history = _base_messages(run)
            for turn in range(1, TURNS + 1):
                text = f"{run} question {turn}" + (" details" * 400 if turn == LONG_TURN else "")
                history.append(_user(text))
                with tracer.start_as_current_span(
                    "chat gpt-4o-mini", attributes=_call(run, history)
                ):
                    pass
                history.append(_assistant(f"{run} answer {turn}"))
            left = tracer.start_span(
                "chat gpt-4o-mini", attributes=_call(run, [*history, _user("left")])
            )
            right = tracer.start_span(
                "chat gpt-4o-mini", attributes=_call(run, [*history, _user("right")])
            )
            left.end()
            right.end()
            history.append(_assistant("merged"))
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes=_call(run, history)):
                pass
    provider.shutdown()
    return trace_path, store_root


def _call(run: str, history: list[dict[str, Any]]) -> dict[str, Any]:
    """A chat span's attributes as util-genai instrumentations write them."""
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
        # The system prompt stays a field for this provider (for OpenAI it goes first).
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": SYSTEM}]),
        "gen_ai.input.messages": json.dumps(history),
    }


# -- the exported JSON -------------------------------------------------------------------------


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def dump(lines: list[dict[str, Any]], path: Path) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    return path


def spans(lines: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for line in lines:
        for resource in line.get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                yield from scope.get("spans", [])


def attribute(holder: dict[str, Any], key: str) -> Any:
    for kv in holder.get("attributes", []):
        if kv["key"] == key:
            return kv["value"]
    return None


def _plain(value: dict[str, Any]) -> Any:
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    return value


def call_span(lines: list[dict[str, Any]], run: str, epoch: int) -> dict[str, Any]:
    for span in spans(lines):
        run_value, epoch_value = attribute(span, names.RUN_ID), attribute(span, names.EPOCH)
        if run_value and epoch_value and _plain(run_value) == run and _plain(epoch_value) == epoch:
            return span
    raise LookupError(f"no span for {run} epoch {epoch}")


def commits(span: dict[str, Any], key: str | None = None) -> list[dict[str, Any]]:
    return [
        event
        for event in span.get("events", [])
        if event.get("name") == names.COMMIT_EVENT
        and (key is None or _plain(attribute(event, names.COMMIT_KEY)) == key)
    ]


def _set(holder: dict[str, Any], key: str, value: dict[str, Any]) -> None:
    for kv in holder["attributes"]:
        if kv["key"] == key:
            kv["value"] = value
            return
    holder["attributes"].append({"key": key, "value": value})


# -- the tampers ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    """One tamper and what the reader must report for it."""

    name: str
    apply: Callable[[list[dict[str, Any]], Path], None]
    run: str
    epoch: int
    verdict: str  # "damaged" or "reconstructed"
    field: str | None = None  # prefix of the damaged field
    index: int | None = None  # first differing message, when the field is about messages
    gap: str | None = None  # the gap kind that must name the tamper


def _edit_message(run: str, epoch: int) -> Callable[[list[dict[str, Any]], Path], None]:
    def apply(lines: list[dict[str, Any]], _: Path) -> None:
        event = commits(call_span(lines, run, epoch), "messages")[0]
        value = attribute(event, names.COMMIT_VALUE)
        messages = json.loads(value["stringValue"])
        messages[-1]["parts"][0]["content"] += " (edited)"
        value["stringValue"] = json.dumps(messages, separators=(",", ":"))

    return apply


def _swap_commits(run: str, epoch: int) -> Callable[[list[dict[str, Any]], Path], None]:
    """Reorder: the messages commits of ``epoch`` and ``epoch + 1`` trade places (and seqs)."""

    def apply(lines: list[dict[str, Any]], _: Path) -> None:
        first = commits(call_span(lines, run, epoch), "messages")[0]
        second = commits(call_span(lines, run, epoch + 1), "messages")[0]
        first["attributes"], second["attributes"] = second["attributes"], first["attributes"]

    return apply


def _drop_event(run: str, epoch: int) -> Callable[[list[dict[str, Any]], Path], None]:
    def apply(lines: list[dict[str, Any]], _: Path) -> None:
        span = call_span(lines, run, epoch)
        span["events"].remove(commits(span, "messages")[0])

    return apply


_RECEIPT_KEYS = ("af.receipt.",)


def _receipt_of(span: dict[str, Any]) -> list[dict[str, Any]]:
    return [kv for kv in span["attributes"] if kv["key"].startswith(_RECEIPT_KEYS)]


def _swap_receipts(
    run: str, epoch: int, other: int
) -> Callable[[list[dict[str, Any]], Path], None]:
    def apply(lines: list[dict[str, Any]], _: Path) -> None:
        a, b = call_span(lines, run, epoch), call_span(lines, run, other)
        ra, rb = _receipt_of(a), _receipt_of(b)
        a["attributes"] = [
            kv for kv in a["attributes"] if not kv["key"].startswith(_RECEIPT_KEYS)
        ] + rb
        b["attributes"] = [
            kv for kv in b["attributes"] if not kv["key"].startswith(_RECEIPT_KEYS)
        ] + ra

    return apply


def _replay_receipt(
    run: str, epoch: int, source: str
) -> Callable[[list[dict[str, Any]], Path], None]:
    def apply(lines: list[dict[str, Any]], _: Path) -> None:
        target, donor = call_span(lines, run, epoch), call_span(lines, source, epoch)
        target["attributes"] = [
            kv for kv in target["attributes"] if not kv["key"].startswith(_RECEIPT_KEYS)
        ] + copy.deepcopy(_receipt_of(donor))

    return apply


def _replace_base(run: str) -> Callable[[list[dict[str, Any]], Path], None]:
    """Another base, stored for real, named on every span of the run instead of the true one."""

    def apply(lines: list[dict[str, Any]], store_root: Path) -> None:
        forged = {
            "system": [{"type": "text", "content": SYSTEM}],
            "messages": _base_messages(run),
        }
        forged["messages"][0]["parts"][0]["content"] = f"{run}: my invoice 1041 was right."
        address = LocalStore(store_root).put_json(forged)
        for epoch in range(1, EPOCHS + 1):
            _set(call_span(lines, run, epoch), names.RUN_BASE, {"stringValue": address})

    return apply


def _corrupt_base_blob(run: str) -> Callable[[list[dict[str, Any]], Path], None]:
    """The base's blob overwritten in the store: its bytes no longer hash to the address."""

    def apply(lines: list[dict[str, Any]], store_root: Path) -> None:
        address = _plain(attribute(call_span(lines, run, 1), names.RUN_BASE))
        digits = address.removeprefix("sha256:")
        blob = store_root / "sha256" / digits[:2] / digits[2:]
        blob.chmod(0o644)
        blob.write_bytes(blob.read_bytes() + b" ")

    return apply


def _truncate(
    run: str, epoch: int, limit: int = 2048
) -> Callable[[list[dict[str, Any]], Path], None]:
    """A backend's attribute limit: the long commit value cut at ``limit`` bytes."""

    def apply(lines: list[dict[str, Any]], _: Path) -> None:
        event = commits(call_span(lines, run, epoch), "messages")[0]
        value = attribute(event, names.COMMIT_VALUE)
        value["stringValue"] = value["stringValue"].encode()[:limit].decode("utf-8", "ignore")

    return apply


def _first_added(epoch: int) -> int:
    """The index of the first message a sequential turn appends: the base holds two messages,
    turn 1 appends its question, each later turn the previous answer and its question."""
    return 2 if epoch == 1 else 2 * epoch - 1


def cases() -> list[Case]:
    """Every tamper at every epoch it applies to, with what the reader must say."""
    out: list[Case] = []
    turns = range(1, TURNS + 1)
    for epoch in turns:
        out += [
            Case(
                f"edit-message-e{epoch}",
                _edit_message(RUN_A, epoch),
                RUN_A,
                epoch,
                "damaged",
                "messages",
                2 * epoch,
            ),
            Case(
                f"drop-event-e{epoch}",
                _drop_event(RUN_A, epoch),
                RUN_A,
                epoch,
                "reconstructed",
                gap=names.GAP_NO_RUN_LOG,
            ),
            # Another run's receipt for the same epoch: its salt differs, so the first field differs.
            Case(
                f"replay-from-other-run-e{epoch}",
                _replay_receipt(RUN_A, epoch, RUN_B),
                RUN_A,
                epoch,
                "damaged",
                "system.pieces",
                0,
            ),
        ]
    for epoch in turns[:-1]:
        out += [
            Case(
                f"reorder-commits-e{epoch}",
                _swap_commits(RUN_A, epoch),
                RUN_A,
                epoch,
                "damaged",
                "messages",
                _first_added(epoch),
            ),
            # The swapped-in receipt counts two more messages: the rebuild ends at this epoch's count.
            Case(
                f"swap-receipts-e{epoch}-e{epoch + 1}",
                _swap_receipts(RUN_A, epoch, epoch + 1),
                RUN_A,
                epoch,
                "damaged",
                "messages.count",
                2 * epoch + 1,
            ),
        ]
    out += [
        Case(
            "swap-receipts-fanout",
            _swap_receipts(RUN_A, TURNS + 1, TURNS + 2),
            RUN_A,
            TURNS + 1,
            "damaged",
            "messages",
            2 * TURNS + 2,
        ),
        # The receipts never held the base's entries, so the index of the forged message is unknown.
        Case("replace-base", _replace_base(RUN_A), RUN_A, 1, "damaged", "messages"),
        Case(
            "corrupt-base-blob",
            _corrupt_base_blob(RUN_A),
            RUN_A,
            1,
            "damaged",
            "base",
        ),
        Case(
            "truncate-2048",
            _truncate(RUN_A, LONG_TURN),
            RUN_A,
            LONG_TURN,
            "reconstructed",
            gap=names.GAP_NO_RUN_LOG,
        ),
    ]
    return out


def write_corpus(out: Path) -> None:
    """Record once and write each tampered trace (and its store) with the expected verdict."""
    import shutil

    out.mkdir(parents=True, exist_ok=True)
    trace_path, store_root = record(out / "recorded")
    expected: dict[str, Any] = {}
    for case in cases():
        folder = out / case.name
        shutil.copytree(store_root, folder / "store", dirs_exist_ok=True)
        lines = load(trace_path)
        case.apply(lines, folder / "store")
        dump(lines, folder / "trace.jsonl")
        expected[case.name] = {
            "run": case.run,
            "epoch": case.epoch,
            "verdict": case.verdict,
            "field": case.field,
            "index": case.index,
            "gap": case.gap,
        }
    (out / "expected.json").write_text(json.dumps(expected, indent=1), "utf-8")


if __name__ == "__main__":
    write_corpus(Path(sys.argv[1] if len(sys.argv) > 1 else "tamper-corpus"))
