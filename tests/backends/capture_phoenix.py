"""Capture ``tests/reader/fixtures/phoenix-spans.json``: the fixture spans sent to a real Phoenix
over OTLP/HTTP and the page its span API answers, byte for byte as served.

    .venv/bin/python tests/backends/capture_phoenix.py

Not run by the tests (they read the committed page, and talk to a live server elsewhere).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import httpx
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.backends.phoenix import PHOENIX_PIN, running_phoenix  # noqa: E402
from tests.reader.sources.helpers import FIXTURES, shapes  # noqa: E402


def main() -> None:
    spans = shapes.build_spans()
    with tempfile.TemporaryDirectory() as directory, running_phoenix(Path(directory)) as url:
        exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=30)
        exporter.export(spans)
        exporter.shutdown()
        page = f"{url}/v1/projects/default/spans/otlpv1?limit=1000"
        # Phoenix ingests in the background; what it holds after a quiet spell is what it keeps.
        held, response = -1, httpx.get(page, timeout=10)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(3)
            response = httpx.get(page, timeout=10)
            count = len(response.json()["data"]) if response.status_code == 200 else 0
            if count == held and count > 0:
                break
            held = count
    (FIXTURES / "phoenix-spans.json").write_bytes(response.content)
    names = sorted(span["name"] for span in response.json()["data"])
    print(f"wrote phoenix-spans.json from {PHOENIX_PIN}: {len(names)} of {len(spans)} spans")
    print("kept:", names)
    print("sent:", sorted(span.name for span in spans))


if __name__ == "__main__":
    main()
