"""The parts of a multi-worker LLM service the tests drive: a local OpenAI-compatible model server
that logs every request body, worker processes (`tests/multiworker/worker.py`, each a fresh
interpreter) and the conversations a load balancer spreads over them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# Each branch of a fan-out waits here until all of them reached the model, so they overlap.
BRANCH = "branch"


class ModelServer:
    """A chat-completions endpoint on 127.0.0.1 answering ``answer to <last message>``."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.barrier: threading.Barrier | None = None
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.bodies.append(body)
                last = body["messages"][-1].get("content")
                if isinstance(last, str) and BRANCH in last and server.barrier is not None:
                    server.barrier.wait(timeout=60)
                reply = {
                    "id": f"chatcmpl-{len(server.bodies)}",
                    "object": "chat.completion",
                    "created": 1,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": f"answer to {last}"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                }
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class Worker:
    """One worker process; ``ask`` sends a request and waits for its answer."""

    def __init__(
        self,
        folder: Path,
        name: str,
        store: str,
        model_url: str,
        run_by: str = "block",
        form: str = "processor",
    ) -> None:
        self.name = name
        self.out = folder / f"{name}.jsonl"
        self._stderr = (folder / f"{name}.stderr").open("w")
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.multiworker.worker",
                "--out",
                str(self.out),
                "--store",
                store,
                "--model-url",
                model_url,
                "--service",
                name,
                "--run-by",
                run_by,
                "--form",
                form,
            ],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only", **_env()},
        )

    def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None
        assert stdout is not None
        stdin.write(json.dumps(command) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            self._stderr.flush()
            raise RuntimeError(f"worker {self.name} died: {self._errors()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def stop(self) -> None:
        """A graceful stop (a deploy): the worker flushes its spans and exits."""
        if self._process.poll() is None:
            self.ask({"op": "quit"})
            self._process.wait(timeout=60)
        self._close()

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=60)
        self._close()

    def _close(self) -> None:
        for stream in (self._process.stdin, self._process.stdout, self._stderr):
            if stream is not None and not stream.closed:
                stream.close()

    def _errors(self) -> str:
        return Path(self._stderr.name).read_text(encoding="utf-8")[-2000:]


def _env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "PYTHONHASHSEED", "TMPDIR", "SYSTEMROOT")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PYTHONPATH"] = str(REPO)
    return env


@contextmanager
def workers(
    folder: Path,
    count: int,
    store: str,
    model_url: str,
    run_by: str = "block",
    form: str = "processor",
) -> Iterator[list[Worker]]:
    pool = [Worker(folder, f"worker-{i}", store, model_url, run_by, form) for i in range(count)]
    try:
        yield pool
        for worker in pool:
            worker.stop()
    finally:
        for worker in pool:
            worker.kill()


def text(message: dict[str, Any]) -> str:
    return str(message.get("content") or "")


@dataclass
class Conversation:
    """One conversation as its client sees it: the history it re-sends on every turn, and for each
    call (named by its last user message) the call it grew from."""

    name: str
    history: list[dict[str, Any]] = field(default_factory=list)
    grew_from: dict[str, str | None] = field(default_factory=dict)
    last: str | None = None

    def __post_init__(self) -> None:
        self.history.append({"role": "system", "content": f"You serve {self.name}."})

    def chat(self, worker: Worker, question: str) -> None:
        label = f"{self.name} {question}"
        self.history.append({"role": "user", "content": label})
        answer = worker.ask({"op": "chat", "run": self.name, "messages": self.history})
        self.history.append(answer["message"])
        self.grew_from[label] = self.last
        self.last = label

    def fan_out(self, worker: Worker, server: ModelServer, count: int) -> None:
        """``count`` parallel calls on one worker, each the history plus its own question; the
        conversation then continues from the first branch (its question and answer)."""
        labels = [f"{self.name} {BRANCH} {i}" for i in range(count)]
        branches = [[*self.history, {"role": "user", "content": label}] for label in labels]
        server.barrier = threading.Barrier(count)
        answer = worker.ask({"op": "fanout", "run": self.name, "branches": branches})
        server.barrier = None
        for label in labels:
            self.grew_from[label] = self.last
        self.history = [*branches[0], answer["messages"][0]]
        self.last = labels[0]


def read_together(files: list[Path], into: Path) -> Path:
    """The workers' files as one OTLP JSON lines file (what a collector gathering them writes)."""
    with into.open("w", encoding="utf-8") as out:
        for path in files:
            if path.exists():
                out.write(path.read_text(encoding="utf-8"))
    return into
