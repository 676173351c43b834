"""One wire scenario end to end: the loopback server, the agent in its own Python, af_otel's reader
over the trace it wrote, and every epoch's verdict held against the request the server received.

The finding that matters is an *overclaim*: an epoch `verify` calls `verified` whose served view is
not the wire request. An epoch that is not verified may differ from the wire, but only in a field
some gap on it names (an *unnamed* difference otherwise). Two verified epochs whose receipts
fingerprint one request (same system, messages chain, tools, params and model) for two different
wire requests are a *collision*. The wire also says which call each request grew from (its parent)
and lets two scenarios' receipts of one request be compared field by field.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import af_otel
from af_otel import canonical_json, names
from af_otel.reader.replay import ReplayRefusedError, replay
from af_otel.reader.verify import VerdictStatus
from tests.wire import envs
from tests.wire.convert import Comparable, Difference, differences, from_view, from_wire
from tests.wire.server import WireRequest, WireServer

AGENT: Final = Path(__file__).resolve().parent / "agent.py"
ROOT: Final = Path(__file__).resolve().parents[2]
# Variables that steer capture; the parent's values are dropped so a developer's shell cannot
# change what a scenario sees.
_STEERING_PREFIXES: Final = ("OTEL_", "OPENINFERENCE_", "TRACELOOP_", "AF_OTEL_")
# Span limits high enough that no call of the agent reaches them; the value length stays at the
# SDK's default (no limit) unless a scenario sets one.
RAISED: Final = {"max_span_attributes": 100_000, "max_events": 100_000}
_GENAI_CONTENT: Final = {
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
}


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    instrumentation: str  # a key of agent.INSTRUMENTORS
    limits: Mapping[str, int] | None = field(default_factory=lambda: RAISED)  # None: SDK defaults
    profile: str = "plain"  # openai: plain | dials (tool_choice, parallel_tool_calls, ...)
    env_vars: Mapping[str, str] = field(default_factory=dict)
    control: bool = False  # every epoch must verify
    # The span limits cut the record: calls may go without a receipt. Elsewhere every call must
    # carry a minted one, so that no scenario passes because nothing was minted to check.
    cut: bool = False
    # The wire tap pairs each request with the call's span (the instrumentation makes its span
    # current while the client sends), so every receipt is minted from the body sent.
    wire: bool = True

    @property
    def env(self) -> envs.Env:
        return {
            "openai-v2": envs.OPENAI_V2,
            "openllmetry-anthropic": envs.OPENLLMETRY_ANTHROPIC,
            "openllmetry-openai": envs.OPENLLMETRY_OPENAI,
        }.get(self.instrumentation, envs.MAIN)

    @property
    def client(self) -> str:
        return "anthropic" if "anthropic" in self.instrumentation else "openai"

    @property
    def calls(self) -> int:
        return 20 if self.client == "anthropic" else 30


SCENARIOS: Final = (
    # The control: the instrumentation that records every field this agent sets, limits raised.
    Scenario("openai-control", "openinference-openai", profile="dials", control=True),
    Scenario("openai-genai", "genai-openai", env_vars=_GENAI_CONTENT),
    Scenario("openai-openinference-default-limits", "openinference-openai", limits=None, cut=True),
    Scenario(
        "openai-openinference-value-limit",
        "openinference-openai",
        limits={**RAISED, "max_span_attribute_length": 1500},
        cut=True,
    ),
    Scenario(
        "openai-genai-value-limit",
        "genai-openai",
        limits={**RAISED, "max_span_attribute_length": 1500},
        env_vars=_GENAI_CONTENT,
        cut=True,
    ),
    Scenario("openai-v2-no-tool-definitions", "openai-v2", env_vars=_GENAI_CONTENT),
    Scenario("openai-genai-forced-tool", "genai-openai", profile="dials", env_vars=_GENAI_CONTENT),
    Scenario("anthropic-genai", "genai-anthropic", env_vars=_GENAI_CONTENT),
    Scenario(
        "anthropic-hook",
        "genai-anthropic",
        env_vars={"OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK": "af_otel"},
    ),
    Scenario("anthropic-openinference", "openinference-anthropic"),
    Scenario(
        "anthropic-openinference-default-limits",
        "openinference-anthropic",
        limits=None,
        cut=True,
    ),
    # OpenLLMetry's anthropic instrumentation does not make its span current: the tap pairs each
    # body with the span started last in the context that sent it, within that span's window.
    Scenario("anthropic-openllmetry", "openllmetry-anthropic"),
    Scenario("openai-openllmetry", "openllmetry-openai"),
    # The tap switched off: the instrumentation's record alone, as honest as without the tap.
    Scenario(
        "openai-genai-forced-tool-no-wire",
        "genai-openai",
        profile="dials",
        env_vars={**_GENAI_CONTENT, "AF_OTEL_WIRE": "off"},
        wire=False,
    ),
)


@dataclass(frozen=True)
class Epoch:
    """One LLM call: its verdict, its gaps and how its served view differs from the wire."""

    epoch: int
    parent: int
    span_id: str
    wire_seq: int
    status: str
    reason: str
    gaps: tuple[tuple[str, str], ...]  # (kind, detail)
    differences: tuple[Difference, ...]
    unnamed: tuple[Difference, ...]
    fingerprint: tuple[Any, ...] | None  # the receipt's request fields, without the run position
    wire: Comparable
    unrecorded: tuple[str, ...]  # fields the view says its instrumentation does not record
    expected_parent: int | None  # by the wire (see `_expected_parents`); None: no earlier prefix
    source: str | None = None  # af.receipt.source: wire or instrumentation
    # `af-otel served --request` against the body sent: "equal" (RFC 8785), "differs: ...", or
    # "refused: ..." where the record cannot rebuild it.
    replay: str = ""

    @property
    def overclaims(self) -> tuple[Difference, ...]:
        return self.differences if self.status == VerdictStatus.VERIFIED else ()


@dataclass(frozen=True)
class Outcome:
    scenario: Scenario
    versions: Mapping[str, str]
    wire_requests: int
    epochs: tuple[Epoch, ...]
    collisions: tuple[tuple[int, int], ...]  # one fingerprint, two different wire requests

    @property
    def wrong_parents(self) -> list[Epoch]:
        """Epochs whose parent is not the call their wire request grew from."""
        return [
            e
            for e in self.epochs
            if e.expected_parent is not None and e.parent != e.expected_parent
        ]

    @property
    def minted(self) -> int:
        return sum(1 for e in self.epochs if e.fingerprint is not None)

    def count(self, status: str) -> int:
        return sum(1 for e in self.epochs if e.status == status)

    @property
    def overclaims(self) -> list[tuple[Epoch, Difference]]:
        return [(e, d) for e in self.epochs for d in e.overclaims]

    @property
    def unnamed(self) -> list[tuple[Epoch, Difference]]:
        return [(e, d) for e in self.epochs for d in e.unnamed]


def _agent_env(scenario: Scenario) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STEERING_PREFIXES)}
    env |= dict(scenario.env_vars)
    env["AF_OTEL_STRICT"] = "1"  # an internal error of af_otel fails the scenario loudly
    env["PYTHONPATH"] = str(ROOT)
    return env


def run_agent(scenario: Scenario, tmp: Path, port: int) -> dict[str, Any]:
    config = {
        "instrumentation": scenario.instrumentation,
        "profile": scenario.profile,
        "port": port,
        "trace": str(tmp / "trace.jsonl"),
        "store": str(tmp / "store"),
        # One run id per agent, so that receipts of one wire request through two instrumentations
        # are salted alike and can be compared.
        "run_id": f"wire-{scenario.client}",
        "limits": dict(scenario.limits) if scenario.limits is not None else None,
    }
    done = subprocess.run(
        [str(envs.ensure(scenario.env)), str(AGENT), json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_agent_env(scenario),
        cwd=tmp,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"agent {scenario.name} failed:\n{done.stderr[-6000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _listed(detail: str) -> set[str] | None:
    """The fields a gap's detail enumerates ("not recorded by <scope>: a, b"), if it does."""
    found = re.search(r"not (?:on record|recorded|set)[^:]*: (.+)$", detail)
    if found is None:
        return None
    return {item.strip().strip("'\"") for item in re.split(r"[,;]", found.group(1))}


# The comparable form's names for what af_otel's gaps call otherwise.
_AF_NAMES: Final = {
    "stop": "stop_sequences",
    "thinking_budget": "thinking",
    "n": "choice_count",
    "tool result error flag": "tool_result.is_error",
    "thinking signature": "reasoning.signature",
    # the Responses API (tests/wire/test_responses.py)
    "reasoning items": "reasoning.items",
    "tool call id": "tool_call.id",
    "tool call arguments": "tool_call.arguments",
    "strict": "tools.strict",
    "held history": "previous_response_id",
}


def unnamed_differences(
    found: tuple[Difference, ...], gaps: tuple[tuple[str, str], ...], status: VerdictStatus
) -> tuple[Difference, ...]:
    """The differences from the wire that no gap names (`names_field`), where the verdict is not
    `verified` (a verified epoch's differences are all overclaims)."""
    if status == VerdictStatus.VERIFIED:
        return ()
    return tuple(
        d for d in found if not any(names_field(k, detail, d.field, d.aspect) for k, detail in gaps)
    )


def names_field(kind: str, detail: str, name: str, aspect: str = "") -> bool:
    """Whether a gap of ``kind`` with ``detail`` names the difference in view field ``name``
    (``params.seed``, or ``messages`` with an ``aspect``): the gap must cover the field, and if
    its detail lists fields, list this one (a dial, or a message-level flag such as a tool
    result's error flag). `provider-defaults` names nothing: it says a dial was left to the
    provider, which is false wherever the wire and the view differ on it."""
    if kind == names.GAP_PROVIDER_DEFAULTS:
        return False
    spec = af_otel.SERVED_GAPS[kind]
    top, _, leaf = name.partition(".")
    if not any(top == f or top.startswith(f + ".") for f in spec.view_fields):
        return False
    listed = _listed(detail)
    if listed is None:
        return True
    specific = _AF_NAMES.get(leaf or aspect, leaf or aspect)
    # a part of a field (tool_choice.disable_parallel_tool_use) is named with the field
    return top in listed or (
        bool(specific) and (specific in listed or specific.split(".")[0] in listed)
    )


def _match(
    views: tuple[Any, ...], requests: list[WireRequest], spans: Mapping[str, Mapping[str, Any]]
) -> dict[str, WireRequest]:
    """Each view's wire request: by the span id the transport sent along, else by the response
    id the server answered with (chatcmpl-w<seq>, msg_w<seq>) found among the span's attributes."""
    by_span = {r.span_id: r for r in requests if r.span_id}
    by_reply = {f"chatcmpl-w{r.seq}": r for r in requests} | {f"msg_w{r.seq}": r for r in requests}
    matched: dict[str, WireRequest] = {}
    for view in views:
        request = by_span.get(view.span_id)
        if request is None:
            values = spans.get(view.span_id, {}).values()
            ids = [v for v in values if isinstance(v, str) and v in by_reply]
            ids += [x for v in values if isinstance(v, tuple) for x in v if x in by_reply]
            if len(set(ids)) == 1:
                request = by_reply[ids[0]]
        if request is None:
            raise AssertionError(f"no wire request found for span {view.span_id}")
        matched[view.span_id] = request
    if len({r.seq for r in matched.values()}) != len(matched):
        raise AssertionError("two spans matched one wire request")
    return matched


def _expected_parents(
    views: tuple[Any, ...], matched: Mapping[str, WireRequest], spans: Mapping[str, Any]
) -> dict[str, int]:
    """The parent each call should name, from the wire: among the calls that finished before it
    started, the one whose message list is the longest prefix of its own (ties: the latest to
    finish). Calls with no such earlier call are left out."""
    found: dict[str, int] = {}
    for view in views:
        mine = matched[view.span_id].body["messages"]
        start = spans[view.span_id].start_ns
        best: tuple[int, int, int] | None = None  # (prefix length, end time, epoch)
        for other in views:
            theirs = matched[other.span_id].body["messages"]
            end = spans[other.span_id].end_ns
            if other is view or end > start or mine[: len(theirs)] != theirs:
                continue
            if best is None or (len(theirs), end) > best[:2]:
                best = (len(theirs), end, other.epoch)
        if best is not None:
            found[view.span_id] = best[2]
    return found


def _fingerprint(receipt: Any) -> tuple[Any, ...]:
    """What a receipt says about the request itself. The digest also covers the call's place in
    the run (epoch, parent), so two calls never share one; these fields do when the record cannot
    tell two requests apart."""
    return (
        receipt.model,
        receipt.system_hash,
        receipt.messages_chain,
        receipt.tools_hashes,
        receipt.tools_forced,
        receipt.params,
    )


def run_scenario(scenario: Scenario, tmp: Path) -> Outcome:
    with WireServer() as server:
        result = run_agent(scenario, tmp, server.port)
        requests = list(server.requests)
    spans = list(af_otel.read_spans(tmp / "trace.jsonl"))
    attributes = {span.span_id: span.attributes for span in spans}
    views = af_otel.served_views(spans, store=tmp / "store")
    matched = _match(views, requests, attributes)
    parents = _expected_parents(views, matched, {span.span_id: span for span in spans})
    epochs = []
    for view in views:
        request = matched[view.span_id]
        verdict = af_otel.verify(view)
        wire = from_wire(request.path, request.body)
        found = tuple(differences(wire, from_view(view)))
        gaps = tuple((g.kind, g.detail) for g in view.gaps)
        unnamed = unnamed_differences(found, gaps, verdict.status)
        receipt = view.receipt
        epochs.append(
            Epoch(
                view.epoch,
                view.parent,
                view.span_id,
                request.seq,
                str(verdict.status),
                verdict.reason,
                gaps,
                found,
                unnamed,
                _fingerprint(receipt) if view.minted else None,
                wire,
                tuple(getattr(view, "unrecorded", ())),
                parents.get(view.span_id),
                attributes[view.span_id].get(names.RECEIPT_SOURCE),
                replayed(view, request, tmp / "store"),
            )
        )
    collisions = []
    verified = [e for e in epochs if e.status == VerdictStatus.VERIFIED and e.fingerprint]
    for index, first in enumerate(verified):
        for second in verified[index + 1 :]:
            if first.fingerprint == second.fingerprint and first.wire != second.wire:
                collisions.append((first.epoch, second.epoch))
    return Outcome(scenario, result["versions"], len(requests), tuple(epochs), tuple(collisions))


def replayed(view: Any, request: WireRequest, store: Path) -> str:
    """`replay` held to the logged body, as RFC 8785 JSON with nothing left out: ``equal`` when
    the rebuilt body is the one sent, else what it says (refused, not exact, or how it differs)."""
    try:
        found = replay(view, store=store)
    except ReplayRefusedError as exc:
        return f"refused: {exc}"
    if not found.exact:
        return f"not exact: {found.notice}"
    if canonical_json(found.body) == canonical_json(request.body):
        return "equal"
    return f"differs: rebuilt {_short(found.body, 600)} / sent {_short(request.body, 600)}"


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(outcome: Outcome) -> str:
    """A readable account of one scenario: counts, then every overclaim, unnamed difference and
    collision with the wire value, the served value and the gaps on the epoch."""
    s = outcome.scenario
    lines = [
        f"### {s.name} ({s.instrumentation}, limits={dict(s.limits) if s.limits else 'SDK defaults'})",
        f"wire requests {outcome.wire_requests}, epochs {len(outcome.epochs)}: "
        + ", ".join(f"{status} {outcome.count(status)}" for status in VerdictStatus)
        + f"; overclaims {len(outcome.overclaims)}, unnamed {len(outcome.unnamed)},"
        f" collisions {len(outcome.collisions)}",
    ]
    for label, items in (("OVERCLAIM", outcome.overclaims), ("UNNAMED", outcome.unnamed)):
        for epoch, diff in items:
            where = f"[{diff.where}]" if diff.where is not None else ""
            lines.append(
                f"- {label} epoch {epoch.epoch} (wire #{epoch.wire_seq}, {epoch.status}) "
                f"{diff.field}{where} {diff.aspect}: wire {_short(diff.wire)} / served {_short(diff.served)}; "
                f"gaps {[k for k, _ in epoch.gaps]}"
            )
    for epoch in outcome.wrong_parents:
        lines.append(
            f"- PARENT epoch {epoch.epoch} names {epoch.parent}, grew from {epoch.expected_parent}"
        )
    for first, second in outcome.collisions:
        lines.append(
            f"- COLLISION epochs {first} and {second}: one receipt fingerprint, two wire requests"
        )
    return "\n".join(lines)


# Unrecorded fields that change the messages chain or the params hash when one record has them
# and the other does not.
_MESSAGE_FIELDS: Final = frozenset({"tool_result.is_error", "reasoning.signature", "message.name"})


@dataclass(frozen=True)
class Disagreement:
    first: str  # instrumentation
    second: str
    field: str  # receipt field
    account: str

    @property
    def kind(self) -> tuple[str, str, str]:
        return (self.first, self.second, self.field)


def _wire_key(epoch: Epoch) -> str:
    return json.dumps(epoch.wire, sort_keys=True, default=str)


def shared_requests(first: Outcome, second: Outcome) -> int:
    """How many wire requests two scenarios both sent (the same agent sends the same ones)."""
    return len({_wire_key(e) for e in first.epochs} & {_wire_key(e) for e in second.epochs})


def disagreements(first: Outcome, second: Outcome) -> list[Disagreement]:
    """Where two instrumentations, recording the same wire request, mint different receipt
    fields although both record what the field covers: model, system, tools (unless one does not
    record tool definitions), the messages chain (when both leave out the same message-level
    fields) and the params (when both leave out the same dials)."""
    by_wire = {_wire_key(e): e for e in first.epochs}
    found = []
    for theirs in second.epochs:
        ours = by_wire.get(_wire_key(theirs))
        if ours is None or ours.fingerprint is None or theirs.fingerprint is None:
            continue
        a_unrecorded, b_unrecorded = set(ours.unrecorded), set(theirs.unrecorded)
        same_params = a_unrecorded - _MESSAGE_FIELDS - {"tools"} == (
            b_unrecorded - _MESSAGE_FIELDS - {"tools"}
        )
        compared = {
            "model": True,
            "system": True,
            "messages.chain": a_unrecorded & _MESSAGE_FIELDS == b_unrecorded & _MESSAGE_FIELDS,
            "tools": "tools" not in a_unrecorded | b_unrecorded,
            "tools.forced": not {"tools", "tool_choice"} & (a_unrecorded | b_unrecorded),
            "params": same_params,
        }
        names = ("model", "system", "messages.chain", "tools", "tools.forced", "params")
        for index, name in enumerate(names):
            if compared[name] and ours.fingerprint[index] != theirs.fingerprint[index]:
                found.append(
                    Disagreement(
                        first.scenario.instrumentation,
                        second.scenario.instrumentation,
                        name,
                        f"wire #{ours.wire_seq}: {name} differs between {first.scenario.name} "
                        f"(epoch {ours.epoch}) and {second.scenario.name} (epoch {theirs.epoch})",
                    )
                )
    return found
