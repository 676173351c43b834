"""Where each instrumentation runs, and the captures the live tests and the fixtures are made of.

OTel's genai-openai and OpenInference run in the project's venv; the two OpenLLMetry eras cannot
share it (one package name, two versions), so each gets a pinned side venv in a cache folder
outside the repository (``$AF_OTEL_TEST_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/af-otel-tests``),
created from PyPI on first use and reused while its pins are unchanged; ``make clean`` removes it. Every capture is its own
subprocess, so no two instrumentations ever wrap the same openai module.

    python tests/semconv/envs.py refresh    # re-capture every fixture under fixtures/
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tests.sidevenv import CACHE, Env, ensure

ROOT: Final = Path(__file__).resolve().parents[2]
HERE: Final = Path(__file__).resolve().parent
CAPTURE: Final = HERE / "capture.py"
FIXTURES: Final = HERE / "fixtures"


# Pins: the OpenLLMetry releases either side of its 0.55 format change, with the openai and SDK
# releases they were checked against. Bumping a pin rebuilds that venv on the next run.
_SIDE_COMMON: Final = ("openai==3.57.0", "opentelemetry-sdk==1.45.2")
# Variables that steer capture; the parent's values are dropped so a developer's shell cannot
# change what a test sees.
_STEERING_PREFIXES: Final = ("OTEL_", "OPENINFERENCE_", "TRACELOOP_")


MAIN: Final = Env("main", None)
OPENLLMETRY_NEW: Final = Env(
    "openllmetry-new",
    CACHE / "venv-openllmetry-new",
    ("opentelemetry-instrumentation-openai==0.62.4", *_SIDE_COMMON),
)
OPENLLMETRY_OLD: Final = Env(
    "openllmetry-old",
    CACHE / "venv-openllmetry-old",
    ("opentelemetry-instrumentation-openai==0.52.6", *_SIDE_COMMON),
)


@dataclass(frozen=True, slots=True)
class Capture:
    """One instrumentation, one scenario, one content setting."""

    source: str  # genai | genai-anthropic | openinference | openllmetry-new | openllmetry-old
    scenario: str
    variant: str
    env_vars: Mapping[str, str] = field(default_factory=dict)

    @property
    def env(self) -> Env:
        return {"openllmetry-new": OPENLLMETRY_NEW, "openllmetry-old": OPENLLMETRY_OLD}.get(
            self.source, MAIN
        )

    @property
    def instrumentation(self) -> str:
        return "openllmetry" if self.source.startswith("openllmetry") else self.source

    @property
    def fixture(self) -> Path:
        return FIXTURES / f"{self.source}--{self.scenario}--{self.variant}.json"

    @property
    def id(self) -> str:
        return f"{self.source}-{self.scenario}-{self.variant}"


_GENAI_CONTENT: Final = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}
SOURCES: Final = ("genai", "openinference", "openllmetry-new", "openllmetry-old")
CAPTURES: Final = (
    *(
        Capture(source, scenario, "content", _GENAI_CONTENT if source == "genai" else {})
        for source in SOURCES
        for scenario in ("weather", "dials", "mixed")
    ),
    # Anthropic's Messages API through util-genai: the system prompt has a slot of its own.
    Capture("genai-anthropic", "weather", "content", _GENAI_CONTENT),
    # Each instrumentation with content capture off, as its own documentation says to turn it off.
    Capture("genai", "weather", "no-content"),
    Capture("openinference", "weather", "hide-input-messages", {"OPENINFERENCE_HIDE_INPUT_MESSAGES": "true"}),
    Capture("openinference", "weather", "hide-input-text", {"OPENINFERENCE_HIDE_INPUT_TEXT": "true"}),
    Capture("openllmetry-new", "weather", "no-content", {"TRACELOOP_TRACE_CONTENT": "false"}),
    Capture("openllmetry-old", "weather", "no-content", {"TRACELOOP_TRACE_CONTENT": "false"}),
    # util-genai's upload hook: content goes to files, the span keeps `*_ref` pointers only.
    Capture(
        "genai",
        "weather",
        "upload",
        {
            "OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK": "upload",
            "OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH": "{tmp}",
        },
    ),
)  # fmt: skip


def capture(spec: Capture, tmp: Path) -> dict[str, Any]:
    """Run the capture script for ``spec`` in its env; return its JSON (spans and versions)."""
    python = ensure(spec.env)
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(_STEERING_PREFIXES)
    }
    env.update({key: value.format(tmp=tmp.as_uri()) for key, value in spec.env_vars.items()})
    env["OTEL_TRACES_EXPORTER"] = "none"
    env["OTEL_METRICS_EXPORTER"] = "none"
    env["OTEL_LOGS_EXPORTER"] = "none"
    command = [str(python), str(CAPTURE), spec.instrumentation, spec.scenario]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env=env, cwd=tmp, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"capture {spec.id} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    result["variant"] = spec.variant
    result["source"] = spec.source
    return result


def load_fixture(spec: Capture) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(spec.fixture.read_text(encoding="utf-8"))
    return data


def refresh(tmp: Path) -> None:
    """Re-capture every fixture. Upload refs name a temporary directory; they are rewritten to
    a fixed placeholder path so the fixtures do not change from run to run."""
    FIXTURES.mkdir(exist_ok=True)
    for spec in CAPTURES:
        result = capture(spec, tmp)
        text = json.dumps(result, indent=1, sort_keys=True, ensure_ascii=False)
        text = text.replace(tmp.as_uri(), "file:///upload-base")
        spec.fixture.write_text(text + "\n", encoding="utf-8")
        print(f"wrote {spec.fixture.relative_to(ROOT)}")


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["refresh"]:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as directory:
        refresh(Path(directory))
