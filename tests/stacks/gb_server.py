"""A loopback HTTP server that logs every request body it receives and answers through a
provider module's ``answer(path, body, seq)``: the ground truth of the Google and Bedrock stack
tests (what the model was sent, before any instrumentation or af_otel saw it)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.wire.loopback import SPAN_HEADER, Loopback, reply

# (path, parsed body, arrival number) -> (content type, reply bytes); None: 404.
Answer = Callable[[str, dict[str, Any], int], tuple[str, bytes] | None]


@dataclass(frozen=True, slots=True)
class Logged:
    """One request as it arrived: its arrival number, path, the span header and the body, and
    the credential it carried (``Authorization``, else ``x-goog-api-key``), which a test looks
    for in everything af_otel wrote."""

    seq: int
    path: str
    span_id: str | None
    body: dict[str, Any]
    credential: str | None = None


class LoggingServer(Loopback):
    """A `Loopback` server that logs each request and answers it through ``answer``."""

    def __init__(self, answer: Answer) -> None:
        self.requests: list[Logged] = []
        self._lock = threading.Lock()
        self._answer = answer
        super().__init__(self._post)

    def _post(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        headers = handler.headers
        with self._lock:
            seq = len(self.requests) + 1
            credential = headers.get("authorization") or headers.get("x-goog-api-key")
            self.requests.append(
                Logged(seq, handler.path, headers.get(SPAN_HEADER), body, credential)
            )
        found = self._answer(handler.path, body, seq)
        if found is None:
            handler.send_error(404)
            return
        reply(handler, *found)
