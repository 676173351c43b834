"""What the run-scoped digest memo saves, measured side by side with minting without it.

A 100-call agent run: a system prompt, two tools, and a history that grows by a question or an
answer every call and, every 5th call, by a tool call whose result is 1,000 rows. Every call is
minted twice, alternately: with the run's `ReceiptDigests`, and without (a fresh memo per call, so
every piece is canonicalized and hashed again). Printed for calls 10, 50 and 100: mint time (the
median over the repetitions) and SHA-256 input bytes, then the targets:

1. flat: with the memo, call 100 costs at most 2x call 10 (both append a 1,000-row result);
2. whole run at least 10x faster with the memo than without;
3. SHA-256 input over the run at most 1.2x the run's unique content, where unique content is the
   sum of the canonical sizes of each distinct message, system part and tool, counted once.

Two variants: the tool result as structured rows (a list of 1,000 dicts inside a
``tool_call_response`` part), and as one JSON string, as OpenAI tool messages carry it.
The request is normalized (`Request.from_dict`) before the timer starts: normalization costs the
same with or without the memo, and the memo's claim is about digest work.

Run: ``.venv/bin/python benchmarks/mint.py`` (``make bench``); exit code 1 when a target fails.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from af_otel import ReceiptDigests, Request, canonical_json, mint_receipt
from af_otel.receipts import Receipt
from af_otel.receipts import memo as memo_module

CALLS = 100
TOOL_EVERY = 5
ROWS = 1000
REPEATS = 5
REPORT_AT = (10, 50, 100)


def _rows(call: int) -> list[dict[str, Any]]:
    return [
        {
            "id": call * ROWS + i,
            "sku": f"SKU-{call:03d}-{i:04d}",
            "title": f"Stainless bottle {i} ({call}), 750 ml",
            "price": round(9.5 + (i % 97) * 0.25, 2),
            "in_stock": i % 3 != 0,
            "rating": None if i % 11 == 0 else (i % 5) + 0.5,
            "tags": ["kitchen", "outdoor"] if i % 2 else ["travel"],
        }
        for i in range(ROWS)
    ]


def _history(as_string: bool) -> list[list[dict[str, Any]]]:
    """The messages each call appends (one list per call), built once so both modes share them."""
    added: list[list[dict[str, Any]]] = []
    for call in range(1, CALLS + 1):
        if call % TOOL_EVERY == 0:
            rows: Any = _rows(call)
            if as_string:
                rows = json.dumps(rows)
            added.append(
                [
                    {
                        "role": "assistant",
                        "parts": [
                            {
                                "type": "tool_call",
                                "id": f"call_{call}",
                                "name": "search_catalog",
                                "arguments": {"query": f"bottles page {call}", "limit": ROWS},
                            }
                        ],
                    },
                    {
                        "role": "tool",
                        "parts": [
                            {"type": "tool_call_response", "id": f"call_{call}", "response": rows}
                        ],
                    },
                ]
            )
        elif call % 2:
            added.append(
                [{"role": "user", "content": f"Question {call}: which of these fit a bag?"}]
            )
        else:
            added.append([{"role": "assistant", "content": f"Answer {call}: the 750 ml ones do."}])
    return added


BASE: dict[str, Any] = {
    "system": [
        {"type": "text", "content": "You are a shopping assistant. " * 40},
        {"type": "text", "content": "Answer in one paragraph."},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "search_catalog",
                "description": "Search the product catalog.",
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                },
            },
        },
        {"type": "function", "function": {"name": "checkout", "parameters": {"type": "object"}}},
    ],
    "params": {"temperature": 0.2, "max_tokens": 512},
    "model": "gpt-4o-mini",
    "provider": "openai",
}


def _requests(as_string: bool) -> list[Request]:
    """One normalized request per call; each call's dict is rebuilt from the same message
    objects, as an agent framework holding its history would hand them over."""
    history: list[dict[str, Any]] = []
    out = []
    for added in _history(as_string):
        history.extend(added)
        out.append(Request.from_dict({**BASE, "messages": list(history)}))
    return out


def _unique_content(requests: list[Request]) -> int:
    seen: set[bytes] = set()
    for request in requests:
        for item in (*request.system, *request.messages, *request.tools):
            seen.add(canonical_json(item))
    return sum(len(item) for item in seen)


@dataclass
class Run:
    seconds: list[float]  # per call
    sha_bytes: list[int]  # per call


def _run(requests: list[Request], *, memo: bool) -> list[float]:
    """Seconds per call."""
    shared = ReceiptDigests()
    seconds = []
    parent: Receipt | int = 0
    for epoch, request in enumerate(requests, start=1):
        digests = shared if memo else ReceiptDigests()
        start = time.perf_counter()
        receipt = mint_receipt(
            request, run_id="bench-run", epoch=epoch, parent=parent, digests=digests
        )
        seconds.append(time.perf_counter() - start)
        if not receipt.minted:
            raise SystemExit(f"call {epoch} did not mint: {receipt.absent_reason}")
        parent = receipt
    return seconds


def _sha_input(requests: list[Request], *, memo: bool) -> list[int]:
    """Bytes fed to SHA-256 per call, counted in an untimed pass: the mint keeps no counters, so
    the memo's hash functions (hex hashes, and the raw entry digests) are wrapped for the length
    of this pass."""
    fed = [0]

    def counting(real: Callable[..., Callable[[Any], Any]]) -> Callable[..., Callable[[Any], Any]]:
        def made(
            salt: str, *, key: bytes | str | None = None, digits: int = 16
        ) -> Callable[[Any], Any]:
            hash_text = real(salt, key=key, digits=digits)
            prefix = len(salt.encode("utf-8", "surrogatepass")) + 1

            def counted(data: str | bytes) -> Any:
                fed[0] += prefix + len(data)
                return hash_text(data)

            return counted

        return made

    shared = ReceiptDigests()
    sha = []
    parent: Receipt | int = 0
    reals = {name: getattr(memo_module, name) for name in ("salted_hash", "salted_digest")}
    for name, real in reals.items():
        setattr(memo_module, name, counting(real))
    try:
        for epoch, request in enumerate(requests, start=1):
            before = fed[0]
            digests = shared if memo else ReceiptDigests()
            parent = mint_receipt(
                request, run_id="bench-run", epoch=epoch, parent=parent, digests=digests
            )
            sha.append(fed[0] - before)
    finally:
        for name, real in reals.items():
            setattr(memo_module, name, real)
    return sha


def _median_seconds(runs: list[list[float]]) -> list[float]:
    return [statistics.median(r[i] for r in runs) for i in range(CALLS)]


def _check(name: str, ok: bool, detail: str) -> bool:
    print(f"  {'PASS' if ok else 'FAIL'}  {name}: {detail}")
    return ok


def bench(as_string: bool) -> bool:
    requests = _requests(as_string)
    with_memo: list[list[float]] = []
    without: list[list[float]] = []
    gc.disable()  # collections land on random calls and would blur a per-call comparison
    try:
        for _ in range(REPEATS):  # alternate so both modes see the same machine
            with_memo.append(_run(requests, memo=True))
            without.append(_run(requests, memo=False))
            gc.collect()
    finally:
        gc.enable()
    memo_run = Run(_median_seconds(with_memo), _sha_input(requests, memo=True))
    plain_run = Run(_median_seconds(without), _sha_input(requests, memo=False))
    unique = _unique_content(requests)
    shape = "one JSON string" if as_string else "structured rows"
    print(
        f"\n{CALLS} calls, a {ROWS}-row tool result every {TOOL_EVERY} calls ({shape}); "
        f"medians of {REPEATS} alternating repetitions"
    )
    print(
        f"  {'call':>4} | {'with memo: ms':>14} {'SHA-256 bytes':>14} | {'without: ms':>12} {'SHA-256 bytes':>14}"
    )
    for call in REPORT_AT:
        i = call - 1
        print(
            f"  {call:>4} | {memo_run.seconds[i] * 1e3:>14.3f} {memo_run.sha_bytes[i]:>14,} | "
            f"{plain_run.seconds[i] * 1e3:>12.3f} {plain_run.sha_bytes[i]:>14,}"
        )
    total_memo, total_plain = sum(memo_run.seconds), sum(plain_run.seconds)
    sha_memo, sha_plain = sum(memo_run.sha_bytes), sum(plain_run.sha_bytes)
    print(f"  whole run: with memo {total_memo * 1e3:.1f} ms, without {total_plain * 1e3:.1f} ms")
    print(
        f"  SHA-256 input over the run: with memo {sha_memo:,} B, without {sha_plain:,} B, "
        f"unique content {unique:,} B"
    )
    flat = memo_run.seconds[99] / memo_run.seconds[9]
    speedup = total_plain / total_memo
    overhead = sha_memo / unique
    results = [
        _check(
            "flat per-call work", flat <= 2.0, f"call 100 / call 10 = {flat:.2f}x (target <= 2x)"
        ),
        _check(
            "whole run", speedup >= 10.0, f"{speedup:.1f}x faster with the memo (target >= 10x)"
        ),
        _check(
            "SHA-256 input",
            overhead <= 1.2,
            f"{overhead:.3f}x the unique content (target <= 1.2x; without the memo "
            f"{sha_plain / unique:.1f}x)",
        ),
    ]
    return all(results)


def main() -> int:
    print("af_otel mint: receipts with and without the run-scoped ReceiptDigests memo")
    ok = bench(as_string=False)
    ok = bench(as_string=True) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
