"""Real recordings for the web tests: an agent run written by the SDK and `ReceiptSpanProcessor`
to OTLP JSON lines with its store, and the same trace as Tempo's ``/api/v2/traces`` body."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from af_otel.processor import run
from af_otel.reader.records import SpanRecord
from af_otel.reader.sources import read_spans
from af_otel.reader.verify import Verdict, verify
from af_otel.reader.view import ServedView, served_views
from af_otel.store import LocalStore
from tests.reader.recordings import agent, file_recorder, user

RUN = "web run/1"  # a slash and a space: run ids reach URLs encoded
PROMPT = '<script>document.title="pwned"</script><b id="injected">hello</b>'


@dataclass(frozen=True, slots=True)
class Recorded:
    traces: Path
    store: Path
    spans: tuple[SpanRecord, ...]
    views: tuple[ServedView, ...]
    verdicts: tuple[Verdict, ...]

    def view(self, run_id: str, epoch: int) -> ServedView:
        return next(v for v in self.views if v.run_id == run_id and v.epoch == epoch)

    @property
    def trace_ids(self) -> list[str]:
        return list(dict.fromkeys(v.trace_id for v in self.views))


def record(folder: Path, *, key: bytes | None = None) -> Recorded:
    """Run ``RUN`` (three epochs on a base holding markup, inside one trace) and a call whose
    content was not captured (its own trace), to ``folder/traces.jsonl`` and ``folder/store``."""
    traces, store = folder / "traces.jsonl", folder / "store"
    options = {"key": key} if key is not None else {}
    with file_recorder(traces, LocalStore(store), **options) as rec:
        with rec.tracer.start_as_current_span("agent turn"):
            agent(rec, RUN, 3, base={"messages": [user(PROMPT)]})
        with run("blind"), rec.tracer.start_as_current_span("blind turn"):
            rec.blind_chat()
    spans = tuple(read_spans(traces))
    views = served_views(spans, store=LocalStore(store))
    verdicts = tuple(verify(v, key=key) for v in views)
    return Recorded(traces, store, spans, views, verdicts)


def tempo_v2_body(traces: Path, trace_id: str) -> bytes:
    """Tempo's trace-by-id body for ``trace_id``: the file's resource spans of that trace, ids in
    base64 as Tempo's jsonpb writes them."""
    batches: list[dict[str, Any]] = []
    for line in traces.read_text(encoding="utf-8").splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            scopes = []
            for scope in resource["scopeSpans"]:
                spans = [dict(s) for s in scope["spans"] if s["traceId"] == trace_id]
                for span in spans:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if span.get(key):
                            span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
                if spans:
                    scopes.append({**scope, "spans": spans})
            if scopes:
                batches.append({**resource, "scopeSpans": scopes})
    return json.dumps({"trace": {"resourceSpans": batches}}).encode()
