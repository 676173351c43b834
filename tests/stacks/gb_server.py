"""A loopback HTTP server that logs every request body it receives and answers through a
provider module's ``answer(path, body, seq)``: the ground truth of the Google and Bedrock stack
tests (what the model was sent, before any instrumentation or af_otel saw it)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

# The header the agents' transports add: the span current while the client sent the request.
SPAN_HEADER: Final = "x-af-wire-span"

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


class LoggingServer:
    """A `ThreadingHTTPServer` on a free loopback port, in a daemon thread, for a ``with`` block."""

    def __init__(self, answer: Answer) -> None:
        self.requests: list[Logged] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: object) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with owner._lock:
                    seq = len(owner.requests) + 1
                    credential = self.headers.get("authorization") or self.headers.get(
                        "x-goog-api-key"
                    )
                    owner.requests.append(
                        Logged(seq, self.path, self.headers.get(SPAN_HEADER), body, credential)
                    )
                found = answer(self.path, body, seq)
                if found is None:
                    self.send_error(404)
                    return
                kind, data = found
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def __enter__(self) -> LoggingServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
