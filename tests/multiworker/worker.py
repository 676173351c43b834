"""One worker process of an LLM service, for the multi-worker tests: its own TracerProvider,
`ReceiptSpanProcessor` and OTLP JSON lines file, the real openai client and the real genai-openai
instrumentation, calling the model server the test runs. It serves requests read from stdin, one
JSON object a line, and answers each on stdout:

- ``{"op": "chat", "run": R, "messages": [...]}`` -> ``{"message": <the assistant message>}``
- ``{"op": "fanout", "run": R, "branches": [[...], ...]}`` -> ``{"messages": [...]}``, the calls
  made in parallel threads
- ``{"op": "quit"}`` -> flushes its spans, answers ``{"ok": true}`` and exits.

``--form exporter`` enriches in a `ReceiptSpanExporter` under the batch processor instead of a
`ReceiptSpanProcessor` (that form sees runs named by ``af.run.id`` only). ``--run-by block`` serves each request inside ``af_otel.run(R)`` (freed when the request ends);
``--run-by attribute`` tags the request's spans with ``af.run.id`` instead, so the processor keeps
the run's state between requests, as a service that puts the conversation id on its spans does.
"""

from __future__ import annotations

import argparse
import concurrent.futures.thread  # noqa: F401 - before any provider (see tests/conftest.py)
import contextvars
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter
from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from af_otel import ReceiptSpanExporter, ReceiptSpanProcessor, names, run

_conversation: contextvars.ContextVar[str | None] = contextvars.ContextVar("conv", default=None)


class ConversationTagger(SpanProcessor):
    """Puts the request's conversation id on every span it starts (``af.run.id``)."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        conversation = _conversation.get()
        if conversation is not None:
            span.set_attribute(names.RUN_ID, conversation)

    def on_end(self, span: ReadableSpan) -> None:
        pass


@contextmanager
def serving(run_by: str, conversation: str) -> Iterator[None]:
    if run_by == "block":
        with run(conversation):
            yield
        return
    token = _conversation.set(conversation)
    try:
        yield
    finally:
        _conversation.reset(token)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--model-url", required=True)
    parser.add_argument("--service", required=True)
    parser.add_argument("--run-by", choices=("block", "attribute"), default="block")
    parser.add_argument("--form", choices=("processor", "exporter"), default="processor")
    args = parser.parse_args()
    # The tagger is added first, so the receipt processor sees the run id at on_start.
    provider = TracerProvider(resource=Resource.create({"service.name": args.service}))
    provider.add_span_processor(ConversationTagger())
    if args.form == "processor":
        provider.add_span_processor(
            ReceiptSpanProcessor(BatchSpanProcessor(FileSpanExporter(args.out)), store=args.store)
        )
    else:
        provider.add_span_processor(
            BatchSpanProcessor(ReceiptSpanExporter(FileSpanExporter(args.out), store=args.store))
        )
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    client = openai.OpenAI(
        api_key="test", base_url=args.model_url, http_client=httpx.Client(timeout=30)
    )

    def chat(conversation: str, messages: list[Any]) -> dict[str, Any]:
        with serving(args.run_by, conversation):
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        return reply.choices[0].message.model_dump(exclude_none=True)

    def fan_out(conversation: str, branches: list[list[Any]]) -> list[Any]:
        replies: list[Any] = [None] * len(branches)

        def one(index: int) -> None:
            replies[index] = chat(conversation, branches[index])

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(branches))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return replies

    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        if op == "quit":
            instrumentor.uninstrument()
            provider.shutdown()
            print(json.dumps({"ok": True}), flush=True)
            return
        if op == "chat":
            answer: dict[str, Any] = {"message": chat(command["run"], command["messages"])}
        else:
            answer = {"messages": fan_out(command["run"], command["branches"])}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
