"""The wire tap's cost on requests that are not LLM calls, the ones an application makes most.

The tap wraps ``Client.send``; its own work is what the wrapper adds before calling the original.
On a loaded machine a real ``send`` (40-100 us over a `MockTransport`) varies by more than the
tap costs, so the wrapper is measured around a ``send`` that returns at once, on real
``httpx.Request`` objects: a POST to a non-LLM path (method and path checks), a GET (the method
check only) and a POST to ``/v1/chat/completions`` under a current span (the body kept for the
processor). One real ``send`` is printed beside them for scale. Best of several rounds taken in
turn. Target: at most 2 us added for a non-LLM request. Run: ``.venv/bin/python
benchmarks/wire.py`` (``make bench``); exit code 1 when the target fails.
"""

from __future__ import annotations

import sys
import timeit
from types import SimpleNamespace
from typing import Any

import httpx

from af_otel.wire import tap

TARGET_US = 2.0
ROUNDS = 9
NUMBER = 50_000


class _Client:
    def send(self, request: Any, **_: Any) -> None:
        return None


class _AsyncClient:
    async def send(self, request: Any, **_: Any) -> None:
        return None


def _answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=b"{}")


def main() -> int:
    module = SimpleNamespace(Client=_Client, AsyncClient=_AsyncClient)
    plain = _Client.send
    tap._wrap(module)  # module.Client.send is now the tapped send
    tapped = _Client.send
    client = _Client()
    body = b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'
    build = httpx.Client().build_request
    cases = {
        "POST other path": build("POST", "https://api.example.com/v1/orders", content=body),
        "GET": build("GET", "https://api.example.com/v1/orders"),
        "POST chat/completions": build(
            "POST", "https://api.openai.com/v1/chat/completions", content=body
        ),
    }
    tap._current, tap._users = (lambda: (1, 2)), 1
    failed = False
    print(f"wire tap, time added per send ({NUMBER:,} sends x {ROUNDS} rounds, best):")
    for label, request in cases.items():
        before, after = [], []
        for _ in range(ROUNDS):
            before.append(timeit.timeit(lambda r=request: plain(client, r), number=NUMBER))
            after.append(timeit.timeit(lambda r=request: tapped(client, r), number=NUMBER))
            tap.SENT.reset()
        added = (min(after) - min(before)) / NUMBER * 1e6
        llm = "chat" in label
        mark = "" if llm else (" ok" if added <= TARGET_US else f" FAIL (target <= {TARGET_US} us)")
        failed = failed or (not llm and added > TARGET_US)
        print(f"  {label:<22} +{added:5.2f} us{mark}")
    real = httpx.Client(transport=httpx.MockTransport(_answer))
    request = cases["POST other path"]
    send = min(timeit.repeat(lambda: real.send(request), number=2_000, repeat=5)) / 2_000
    print(f"  for scale: one httpx send over MockTransport, untapped: {send * 1e6:.1f} us")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
