"""One agent stack end to end: the loopback server that logs every body, the stack's agent in its
side venv, af_otel's reader over the trace it wrote, and every epoch held against the request the
server received (tests/wire's converters, written for the tests alone).

The figures of a stack: how many epochs the reader finds per wire request (one each is right),
how many are `verified` and `reconstructed`, how many came from the wire tap
(``af.receipt.source``), the *overclaims* (a verified epoch whose served view is not its wire
request) and the *unnamed* differences (a view that differs from the wire where no gap names the
field). tests/wire/harness.py holds the rule for both.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import af_otel
from af_otel import names
from af_otel.reader.verify import VerdictStatus
from tests.sidevenv import Env, ensure
from tests.wire.convert import Difference, differences, from_view, from_wire
from tests.wire.harness import unnamed_differences
from tests.wire.server import WireRequest, WireServer
from tests.wire.test_responses import _flat, compare, from_seen

ROOT: Final = Path(__file__).resolve().parents[3]
_STEERING_PREFIXES: Final = ("OTEL_", "OPENINFERENCE_", "TRACELOOP_", "AF_OTEL_", "LITELLM_")
GENAI_CONTENT: Final = {
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
}
_REPLY_IDS: Final = ("chatcmpl-w", "resp_w")
# Body keys that show the model nothing and steer no answer: the provider's prompt-cache routing
# and retention, an abuse-tracking id, and (Chat Completions) whether the provider stores the
# exchange for its dashboards. The frameworks set them on every call; they are left out of the
# comparison. (The Responses API's `store` keeps the answer for a later previous_response_id, so
# there it stays.)
_BOOKKEEPING: Final = frozenset({"prompt_cache_key", "prompt_cache_retention", "safety_identifier"})


@dataclass(frozen=True, slots=True)
class Stack:
    """One configuration: an agent script, the venv it runs in, its config and environment."""

    name: str
    env: Env
    script: Path
    config: Mapping[str, Any] = field(default_factory=dict)
    env_vars: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Epoch:
    epoch: int
    wire_seq: int
    status: str
    gaps: tuple[tuple[str, str], ...]
    differences: tuple[Difference, ...]
    unnamed: tuple[Difference, ...]
    source: object  # af.receipt.source: wire or instrumentation
    minted: bool
    agent: str | None = None  # the agent tree's: the call's agent, and the one it was handed from
    handoff_from: str | None = None
    tools_run: tuple[str | None, ...] = ()

    @property
    def overclaims(self) -> tuple[Difference, ...]:
        return self.differences if self.status == VerdictStatus.VERIFIED else ()


@dataclass(frozen=True)
class Outcome:
    stack: Stack
    versions: Mapping[str, str]
    wire_requests: int
    epochs: tuple[Epoch, ...]
    runs: tuple[str | None, ...]  # the run of each epoch
    result: Mapping[str, Any] = field(default_factory=dict)  # what the agent printed

    def count(self, status: str) -> int:
        return sum(1 for e in self.epochs if e.status == status)

    @property
    def from_wire(self) -> int:
        return sum(1 for e in self.epochs if e.source == names.SOURCE_WIRE)

    @property
    def overclaims(self) -> list[tuple[Epoch, Difference]]:
        return [(e, d) for e in self.epochs for d in e.overclaims]

    @property
    def unnamed(self) -> list[tuple[Epoch, Difference]]:
        return [(e, d) for e in self.epochs for d in e.unnamed]

    def figures(self) -> str:
        return (
            f"{self.stack.name}: wire {self.wire_requests}, epochs {len(self.epochs)}, "
            + ", ".join(f"{s} {self.count(s)}" for s in VerdictStatus)
            + f", from wire {self.from_wire}, overclaims {len(self.overclaims)}, "
            f"unnamed {len(self.unnamed)}, runs {len(set(self.runs))}"
        )


def _agent_env(stack: Stack) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STEERING_PREFIXES)}
    env |= dict(stack.env_vars)
    env["AF_OTEL_STRICT"] = "1"  # an internal error of af_otel fails the stack loudly
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # the agents import tests/stacks/soa/common.py
    return env


def run_agent(stack: Stack, tmp: Path, port: int) -> dict[str, Any]:
    config = {
        **stack.config,
        "port": port,
        "trace": str(tmp / "trace.jsonl"),
        "store": str(tmp / "store"),
    }
    done = subprocess.run(
        [str(ensure(stack.env)), str(stack.script), json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=600,
        env=_agent_env(stack),
        cwd=tmp,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"agent {stack.name} failed:\n{done.stderr[-6000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _reply_ids(attributes: Mapping[str, Any]) -> set[str]:
    found: set[str] = set()
    for value in attributes.values():
        for item in value if isinstance(value, tuple | list) else (value,):
            if isinstance(item, str) and item.startswith(_REPLY_IDS):
                found.add(item)
    return found


def match(
    views: Sequence[Any], requests: Sequence[WireRequest], spans: Mapping[str, Mapping[str, Any]]
) -> dict[str, WireRequest]:
    """Each view's wire request: by the span id the transport sent along, else by the one
    response id the server answered with among the span's attributes, else (a span that was
    not current when its request went out) by its turns. A view with none of these is an epoch
    no model call made (the stack's figures count it as wire request 0)."""
    by_span = {r.span_id: r for r in requests if r.span_id}
    by_reply = {f"{prefix}{r.seq}": r for r in requests for prefix in _REPLY_IDS}
    matched: dict[str, WireRequest] = {}
    for view in views:
        request = by_span.get(view.span_id)
        if request is None:
            ids = _reply_ids(spans.get(view.span_id, {})) & set(by_reply)
            if len(ids) == 1:
                request = by_reply[ids.pop()]
        if request is not None:
            matched[view.span_id] = request
    for view in views:  # a span that ended before its request was sent (a stream)
        if view.span_id not in matched:
            request = _same_turns(view, [r for r in requests if r not in matched.values()])
            if request is not None:
                matched[view.span_id] = request
    return matched


def _same_turns(view: Any, left: Sequence[WireRequest]) -> WireRequest | None:
    """The first request left whose instructions and turns the view shows exactly (Chat
    Completions, Anthropic Messages): the settings and tools are then compared as for any other
    epoch."""
    served = from_view(view)
    for request in left:
        if request.path.endswith(("/chat/completions", "/messages")):
            wire = from_wire(request.path, request.body)
            if (wire.system, wire.messages) == (served.system, served.messages):
                return request
    return None


def _strict(tools: Sequence[Mapping[str, Any]] | None) -> list[bool]:
    found = []
    for tool in tools or ():
        inner = tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
        found.append(bool(inner.get("strict")))
    return found


def compared(request: WireRequest, view: Any, seen: Any) -> tuple[Difference, ...]:
    """How the served view differs from the wire request (Responses: from what the model saw)."""
    body = {k: v for k, v in request.body.items() if k not in _BOOKKEEPING}
    if request.path.endswith("/responses"):
        context = seen[request.seq]
        full = _flat(from_seen(context.items, context.instructions, body))
        only = _flat(from_seen(input_items(body), context.instructions, body))
        return tuple(
            compare(full, only, _flat(from_view(view)), body.get("tools") or (), view.tools)
        )
    body.pop("store", None)
    found = differences(from_wire(request.path, body), from_view(view))
    wire_strict, view_strict = _strict(body.get("tools")), _strict(view.tools)
    if wire_strict != view_strict:
        found.append(Difference("tools", wire_strict, view_strict, None, "strict"))
    return tuple(found)


def input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    from tests.wire.responses_server import input_items as items

    return items(body)


def run_stack(stack: Stack, tmp: Path) -> Outcome:
    with WireServer() as server:
        result = run_agent(stack, tmp, server.port)
        requests = list(server.requests)
        seen = dict(server.responses.seen)
    spans = list(af_otel.read_spans(tmp / "trace.jsonl"))
    attributes = {span.span_id: span.attributes for span in spans}
    views = af_otel.served_views(spans, store=tmp / "store")
    matched = match(views, requests, attributes)
    epochs = []
    for view in views:
        verdict = af_otel.verify(view)
        request = matched.get(view.span_id)
        if request is None:
            request = WireRequest(0, "", None, {})
            found: tuple[Difference, ...] = (Difference("call", "no model call", view.name),)
        else:
            found = compared(request, view, seen)
        gaps = tuple((g.kind, g.detail) for g in view.gaps)
        epochs.append(
            Epoch(
                view.epoch,
                request.seq,
                str(verdict.status),
                gaps,
                found,
                unnamed_differences(found, gaps, verdict.status),
                attributes[view.span_id].get(names.RECEIPT_SOURCE),
                view.minted,
                *_place(view.agent),
            )
        )
    runs = tuple(view.run_id for view in views)
    return Outcome(stack, result["versions"], len(requests), tuple(epochs), runs, result)


def _place(step: Any) -> tuple[str | None, str | None, tuple[str | None, ...]]:
    """A view's place in the agent tree as names: its agent, the one it was handed from, the
    tools run after it."""
    if step is None:
        return None, None, ()
    agent = step.agent.name if step.agent is not None else None
    handed = step.handoff_from.name if step.handoff_from is not None else None
    return agent, handed, tuple(tool.name for tool in step.tools)


def describe(outcome: Outcome) -> str:
    """The figures, then every epoch with its verdict, gaps and differences from the wire."""
    lines = [outcome.figures(), f"versions {dict(outcome.versions)}"]
    for e in outcome.epochs:
        lines.append(
            f"epoch {e.epoch} wire #{e.wire_seq} {e.status} source {e.source} "
            f"gaps {[k for k, _ in e.gaps]} agent {e.agent} from {e.handoff_from} "
            f"tools {list(e.tools_run)}"
        )
        for kind, detail in e.gaps:
            lines.append(f"    gap {kind}: {detail[:200]}")
        for d in e.differences:
            flag = "OVERCLAIM " if e.status == VerdictStatus.VERIFIED else ""
            flag += "UNNAMED " if d in e.unnamed else ""
            lines.append(
                f"  {flag}{d.field} {d.aspect}: {str(d.wire)[:150]} / {str(d.served)[:150]}"
            )
    return "\n".join(lines)
