"""One stack scenario end to end, for the Google and Bedrock stack tests: the loopback server, the
agent in its side venv, af_otel's reader over the trace it wrote, and every epoch's verdict held
against the body the server logged (as tests/wire/harness.py does for the OpenAI and Anthropic
clients).

An *overclaim* is a `verified` epoch whose served view is not the body; an *unnamed* difference is
one on another epoch that none of its gaps names (`tests.wire.harness.names_field`).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import af_otel
from af_otel import names
from af_otel.canonical import canonical_json
from af_otel.reader.replay import ReplayRefusedError, replay
from af_otel.reader.verify import VerdictStatus
from tests.sidevenv import Env, ensure
from tests.stacks.gb_convert import Comparable, Difference, differences, from_view
from tests.stacks.gb_server import Logged, LoggingServer
from tests.wire.harness import names_field

ROOT: Final = Path(__file__).resolve().parents[2]
_STEERING_PREFIXES: Final = ("OTEL_", "OPENINFERENCE_", "TRACELOOP_", "AF_OTEL_", "AWS_", "GOOGLE_")
GENAI_CONTENT: Final = {
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
}
WIRE_OFF: Final = {"AF_OTEL_WIRE": "off"}


@dataclass(frozen=True)
class Stack:
    """One configuration: which agent script in which venv, against which server."""

    name: str
    env: Env
    agent: Path
    server: Callable[[], LoggingServer]
    convert: Callable[[str, Mapping[str, Any]], Comparable]
    config: Mapping[str, Any] = field(default_factory=dict)
    env_vars: Mapping[str, str] = field(default_factory=dict)

    @property
    def wire(self) -> bool:
        return self.env_vars.get("AF_OTEL_WIRE") != "off"


@dataclass(frozen=True)
class Epoch:
    epoch: int
    span_id: str
    wire_seq: int
    status: str
    gaps: tuple[tuple[str, str], ...]
    differences: tuple[Difference, ...]
    unnamed: tuple[Difference, ...]
    source: Any
    differs: Any  # af.record.differs
    false_defaults: tuple[str, ...] = ()  # settings provider-defaults calls unset that were sent
    run: str | None = None  # the run the reader files the call under (af.run.id as written)
    trace: str | None = None
    # The agent tree's: the call's agent, the one it was handed from, the tools run after it.
    agent: str | None = None
    handoff_from: str | None = None
    tools_run: tuple[str | None, ...] = ()
    replay: str = ""  # `replay` held to the logged body and path (`replayed`)
    unspelled: str = ""  # `replay` with no store: the body in the writer's one spelling
    provider: str | None = None  # the served view's


@dataclass(frozen=True)
class Outcome:
    stack: Stack
    result: Mapping[str, Any]
    requests: tuple[Logged, ...]
    epochs: tuple[Epoch, ...]
    spans: int
    span_names: tuple[str, ...] = ()  # every span the stack wrote, LLM call or not
    written: Path | None = None  # the folder the agent wrote its trace and store in

    def holding(self, secret: str) -> list[str]:
        """The files the agent's trace and store hold ``secret`` in (its bytes, anywhere): the
        trace, every blob, every spelling."""
        if self.written is None:
            raise AssertionError("the outcome names no folder")
        needle = secret.encode()
        return [
            str(path.relative_to(self.written))
            for path in sorted(self.written.rglob("*"))
            if path.is_file() and needle in path.read_bytes()
        ]

    @property
    def runs(self) -> list[str | None]:
        """The runs of the calls, each once, in the order of their first call."""
        return list(dict.fromkeys(e.run for e in self.epochs))

    def count(self, status: str) -> int:
        return sum(1 for e in self.epochs if e.status == status)

    @property
    def overclaims(self) -> list[tuple[Epoch, Difference]]:
        return [
            (e, d) for e in self.epochs if e.status == VerdictStatus.VERIFIED for d in e.differences
        ]

    @property
    def unnamed(self) -> list[tuple[Epoch, Difference]]:
        return [(e, d) for e in self.epochs for d in e.unnamed]

    @property
    def false_defaults(self) -> list[tuple[int, str]]:
        return [(e.epoch, name) for e in self.epochs for name in e.false_defaults]

    def describe(self) -> str:
        lines = [
            f"### {self.stack.name}: wire {len(self.requests)}, epochs {len(self.epochs)}: "
            + ", ".join(f"{s} {self.count(s)}" for s in VerdictStatus)
            + f"; overclaims {len(self.overclaims)}, unnamed {len(self.unnamed)}"
            + f"; runs {self.runs}"
        ]
        for label, items in (("OVERCLAIM", self.overclaims), ("UNNAMED", self.unnamed)):
            for epoch, d in items:
                lines.append(
                    f"- {label} epoch {epoch.epoch} (wire #{epoch.wire_seq}, {epoch.status}) "
                    f"{d.field}[{d.where}] {d.aspect}: wire {str(d.wire)[:200]} / served "
                    f"{str(d.served)[:200]}; gaps {list(epoch.gaps)}"
                )
        for epoch in self.epochs:
            if epoch.replay != "equal":
                lines.append(
                    f"- REPLAY epoch {epoch.epoch} (wire #{epoch.wire_seq}) {epoch.replay}"
                )
        return "\n".join(lines)


def _env(stack: Stack) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STEERING_PREFIXES)}
    env |= dict(stack.env_vars)
    env["AF_OTEL_STRICT"] = "1"
    env["PYTHONPATH"] = str(ROOT)
    return env


def run_agent(stack: Stack, tmp: Path, port: int) -> dict[str, Any]:
    config = {
        "port": port,
        "trace": str(tmp / "trace.jsonl"),
        "store": str(tmp / "store"),
        "run_id": f"stack-{stack.name}",
        **stack.config,
    }
    done = subprocess.run(
        [str(ensure(stack.env)), str(stack.agent), json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(stack),
        cwd=tmp,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"agent {stack.name} failed:\n{done.stderr[-6000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def unnamed(
    found: tuple[Difference, ...], gaps: tuple[tuple[str, str], ...], status: str
) -> tuple[Difference, ...]:
    """The differences no gap names. `cache-transform` is left out: it says a serializer stood
    between the record and the wire, which names no field, so it cannot account for one."""
    if status == VerdictStatus.VERIFIED:
        return ()
    gaps = tuple((k, detail) for k, detail in gaps if k != names.GAP_CACHE_TRANSFORM)
    return tuple(
        d for d in found if not any(names_field(k, detail, d.field, d.aspect) for k, detail in gaps)
    )


def replayed(view: Any, request: Logged, store: Path | None) -> str:
    """`replay` held to the logged body (as RFC 8785 JSON, nothing left out) and its path:
    ``equal`` when both are the ones sent, else what it says (refused, not exact, or how it
    differs)."""
    try:
        found = replay(view, store=store)
    except ReplayRefusedError as exc:
        return f"refused: {exc}"
    if not found.exact:
        return f"not exact: {found.notice}"
    if canonical_json(found.body) != canonical_json(request.body):
        return f"differs: rebuilt {json.dumps(found.body)[:600]} / sent {json.dumps(request.body)[:600]}"
    if found.path != request.path:
        return f"differs: path {found.path} / sent {request.path}"
    return "equal"


def _place(step: Any) -> tuple[str | None, str | None, tuple[str | None, ...]]:
    if step is None:
        return None, None, ()
    agent = step.agent.name if step.agent is not None else None
    handed = step.handoff_from.name if step.handoff_from is not None else None
    return agent, handed, tuple(tool.name for tool in step.tools)


def run_stack(stack: Stack, tmp: Path) -> Outcome:
    with stack.server() as server:
        result = run_agent(stack, tmp, server.port)
        requests = tuple(server.requests)
    trace = tmp / "trace.jsonl"
    spans = list(af_otel.read_spans(trace)) if trace.exists() else []
    attributes = {span.span_id: span.attributes for span in spans}
    views = af_otel.served_views(spans, store=tmp / "store") if spans else ()
    by_span = {r.span_id: r for r in requests if r.span_id}
    epochs = []
    for view in views:
        request = by_span.get(view.span_id)
        if request is None:
            raise AssertionError(f"no wire request was sent under span {view.span_id}")
        verdict = af_otel.verify(view)
        found = tuple(differences(stack.convert(request.path, request.body), from_view(view)))
        gaps = tuple((g.kind, g.detail) for g in view.gaps)
        attrs = attributes[view.span_id]
        sent = stack.convert(request.path, request.body).params
        defaults = [
            name.strip()
            for kind, detail in gaps
            if kind == names.GAP_PROVIDER_DEFAULTS and ":" in detail
            for name in detail.split(":", 1)[1].split(",")
        ]
        epochs.append(
            Epoch(
                view.epoch,
                view.span_id,
                request.seq,
                str(verdict.status),
                gaps,
                found,
                unnamed(found, gaps, str(verdict.status)),
                attrs.get("af.receipt.source"),
                attrs.get("af.record.differs"),
                tuple(name for name in defaults if name in sent),
                view.run_id,
                view.trace_id,
                *_place(view.agent),
                replayed(view, request, tmp / "store"),
                replayed(view, request, None),
                view.provider,
            )
        )
    span_names = tuple(span.name for span in spans)
    return Outcome(stack, result, requests, tuple(epochs), len(spans), span_names, tmp)


class Outcomes:
    """Each stack run once a session, its outcome read by every test that asks for it."""

    def __init__(self) -> None:
        self._made: dict[str, Outcome] = {}

    def __call__(self, stack: Stack, tmp_path_factory: Any) -> Outcome:
        if stack.name not in self._made:
            self._made[stack.name] = run_stack(stack, tmp_path_factory.mktemp(stack.name))
        return self._made[stack.name]


def assert_verified_from_wire(outcome: Outcome, calls: int) -> None:
    """The tap on: each call one epoch minted from the body sent and verified, its served view
    equal to the logged body on every field, each body rebuilt from the record (`served
    --request`) the one sent, and no default read as sent."""
    account = outcome.describe()
    assert len(outcome.requests) == len(outcome.epochs) == calls, account
    assert {e.source for e in outcome.epochs} == {names.SOURCE_WIRE}, account
    assert outcome.count(VerdictStatus.VERIFIED) == calls, account
    assert not [d for e in outcome.epochs for d in e.differences], account
    assert [e.replay for e in outcome.epochs] == ["equal"] * calls, account
    assert not outcome.false_defaults, account


def assert_operation_guessed(outcome: Outcome) -> None:
    """Without the spelling each body is rebuilt in one spelling, its operation guessed and said."""
    for e in outcome.epochs:
        assert e.unspelled.startswith("not exact: "), (e.epoch, e.unspelled)
        assert "the operation is not on record" in e.unspelled, (e.epoch, e.unspelled)


def assert_record_stands(outcome: Outcome, calls: int) -> None:
    """The tap off: one epoch per call, none claiming more than its record, every difference
    named, a verified record rebuilt in one spelling (said) and any other refused."""
    account = outcome.describe()
    assert len(outcome.requests) == len(outcome.epochs) == calls, account
    assert not outcome.overclaims, account
    assert not outcome.unnamed, account
    for e in outcome.epochs:
        kind = "not exact: " if e.status == VerdictStatus.VERIFIED else "refused: "
        assert e.replay.startswith(kind), (e.epoch, e.replay, account)
