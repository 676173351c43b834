"""af_otel under ``opentelemetry-instrument`` (entry point ``af_otel`` in the
``opentelemetry_instrumentor`` group): the launcher itself runs a small application in a
subprocess against the loopback server that logs every body; its one LLM call is minted from the
wire and reads back verified, served as sent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import pytest

import af_otel
from af_otel import names
from af_otel.reader.verify import VerdictStatus
from tests.wire.convert import differences, from_view, from_wire
from tests.wire.server import WireServer

# The installed LLM instrumentations, left out: the application's span is its own (they have their
# own tests).
_OTHERS: Final = "langchain,openai,anthropic"
APP: Final = """
import sys
import openai
from opentelemetry import trace
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

port, out = int(sys.argv[1]), sys.argv[2]
provider = trace.get_tracer_provider()
provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(out)))
client = openai.OpenAI(api_key="sk-test", base_url=f"http://127.0.0.1:{port}/v1")
chat = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini"}
with trace.get_tracer("app").start_as_current_span("chat gpt-4o-mini", attributes=chat):
    client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Weather in Oslo?"}],
        tools=[{"type": "function", "function": {"name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
        tool_choice="required",
        parallel_tool_calls=False,
    )
provider.shutdown()
"""


def _launch(tmp_path: Path, disabled: str) -> tuple[list[Any], list[Any]]:
    """Run the application under the launcher; (its spans, the bodies the server logged)."""
    app, trace_file = tmp_path / "app.py", tmp_path / "trace.jsonl"
    app.write_text(APP, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AF_OTEL_"))}
    env |= {
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": disabled,
        "AF_OTEL_STORE": str(tmp_path / "store"),
        "AF_OTEL_TRUSTED_HOSTS": "127.0.0.1",
        "AF_OTEL_STRICT": "1",
    }
    launcher = Path(sys.executable).parent / "opentelemetry-instrument"
    with WireServer() as server:
        done = subprocess.run(
            [str(launcher), sys.executable, str(app), str(server.port), str(trace_file)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=tmp_path,
            check=False,
        )
        requests = list(server.requests)
    assert done.returncode == 0, done.stderr[-4000:]
    return list(af_otel.read_spans(trace_file)), requests


@pytest.mark.instrumentation
def test_opentelemetry_instrument_installs_the_processor_and_the_tap(tmp_path: Path) -> None:
    """The launcher loads af_otel's instrumentor: the call carries a receipt minted from the
    body sent, verified, its served view equal to the logged body."""
    spans, requests = _launch(tmp_path, _OTHERS)
    (view,) = af_otel.served_views(spans, store=tmp_path / "store")
    (request,) = requests
    (span,) = [s for s in spans if s.span_id == view.span_id]
    assert span.attributes[names.RECEIPT_SOURCE] == names.SOURCE_WIRE
    assert differences(from_wire(request.path, request.body), from_view(view)) == []
    assert af_otel.verify(view).status == VerdictStatus.VERIFIED


@pytest.mark.instrumentation
def test_disabling_the_instrumentor_leaves_the_spans_as_they_were(tmp_path: Path) -> None:
    """``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=af_otel`` (docs/processor.md): no af.* attribute."""
    spans, requests = _launch(tmp_path, _OTHERS + ",af_otel")
    assert len(requests) == len(spans) == 1
    assert not any(key.startswith("af.") for key in spans[0].attributes)
