"""The loopback HTTP server under every logging server of tests/wire and tests/stacks: a
`ThreadingHTTPServer` on a free port in a daemon thread, for a ``with`` block, that reads each
POST's JSON body and hands it, with the request, to its owner; and the one way they write a
reply."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

# The header the agents' transports add: the span id current while the client sent the request,
# so that each span is paired with the request it made even when three calls run at once.
SPAN_HEADER: Final = "x-af-wire-span"

# (the request's handler, its parsed body) -> None: logs the body and writes the answer.
Post = Callable[[BaseHTTPRequestHandler, dict[str, Any]], None]


def reply(handler: BaseHTTPRequestHandler, kind: str, data: bytes) -> None:
    """Answers 200 with ``data`` as ``kind``, its length given (HTTP/1.1 keeps the connection)."""
    handler.send_response(200)
    handler.send_header("content-type", kind)
    handler.send_header("content-length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class Loopback:
    """A `ThreadingHTTPServer` on a free loopback port, in a daemon thread, for a ``with`` block."""

    def __init__(self, post: Post) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: object) -> None:  # keep pytest output clean
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                post(self, json.loads(self.rfile.read(length) or b"{}"))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def __enter__(self) -> Loopback:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
