"""What the reading commands print for a view or a verdict: text for people (``served``), or one
JSON object a view (``served --json``). Content parts are shown as on the page (`show_part`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from af_otel import names
from af_otel.present.parts import FOLD_CHARS, agent_lines, held_shown, json_text, show_part
from af_otel.reader.agents import Agent, AgentStep
from af_otel.reader.gaps import BackendNote, gap_why
from af_otel.reader.verdict_json import verdict_json
from af_otel.reader.verify import Verdict, VerdictStatus
from af_otel.reader.view import ServedView

__all__ = ["indent", "part_text", "print_view", "verdict_line", "view_json"]


def part_text(part: Any, full: bool) -> str:
    shown = show_part(part, None if full else FOLD_CHARS)
    text = shown.head
    if shown.cut:
        text += f"… ({shown.cut:,} more characters; --full shows all)"
    return f"[{shown.label}] {text}" if shown.label else text


def indent(text: str, by: str) -> str:
    return "\n".join(by + line for line in text.splitlines()) or by


def print_view(
    view: ServedView,
    verdict: Verdict | None,
    full: bool,
    out: TextIO,
    notes: Sequence[BackendNote] = (),
) -> None:
    """One view as text; ``notes`` (the source's) may be named as a gap's cause (`gap_why`)."""
    head = f"run {view.run_id} · epoch {view.epoch} (parent {view.parent})"
    where = f"span {view.span_id} · trace {view.trace_id}" + (
        f" · service {view.service}" if view.service else ""
    )
    print(head, file=out)
    print(f"  {where}", file=out)
    print(f"  {_recorded_by(view)}", file=out)
    for line in agent_lines(view.agent):
        print(f"  {line}", file=out)
    if verdict is not None:
        print(f"  verdict: {verdict.status.value} — {verdict.reason}", file=out)
    print(f"  model {view.model or '—'} · provider {view.provider or '—'}", file=out)
    params = (
        "not on record"
        if view.params is None
        else (json_text(view.params) if view.params else "none set")
    )
    print(f"  params {params}", file=out)
    unrecorded = [name for name in view.unrecorded if name != "tools"]
    if unrecorded:
        by = view.recorded_by or "the instrumentation"
        print(f"  not recorded by {by}: {', '.join(unrecorded)}", file=out)
    for line in _source_lines(view):
        print(f"  {line}", file=out)
    for gap in view.gaps:
        cause = f" ({gap.cause})" if gap.cause else ""
        print(f"  gap {gap.kind}{cause}: {gap_why(gap, notes)}", file=out)
        if gap.detail:
            print(f"      found: {gap.detail}", file=out)
    if view.system is None:
        print("  system: not on record", file=out)
    elif not view.system:
        print("  system: none", file=out)
    else:
        print(f"  system ({len(view.system)} part(s)):", file=out)
        for part in view.system:
            print(indent(part_text(part, full), "    "), file=out)
    if view.tools is None:
        print("  tools: not on record", file=out)
    elif not view.is_recorded("tools"):
        print(f"  tools: not recorded by {view.recorded_by or 'the instrumentation'}", file=out)
    else:
        choice = view.params.get("tool_choice") if view.params else None
        forbidden = choice == "none" or (
            isinstance(choice, Mapping) and choice.get("type") == "none"
        )
        print(
            f"  tools ({len(view.tools)}): {', '.join(str(t.get('name')) for t in view.tools) or '—'}"
            + (" (tool_choice none: the model could use none of them)" if forbidden else ""),
            file=out,
        )
    if view.held:
        print("  held by the server (seen before this request's own items; no receipt):", file=out)
        for call in view.held:
            print(f"    {held_shown(call)}", file=out)
    own = ", this request's own items" if view.held else ""
    if view.messages is None:
        print(f"  messages{own}: not on record", file=out)
    else:
        print(f"  messages ({len(view.messages)}){own}:", file=out)
        _print_messages(view.messages, full, out)
    if view.output is not None:
        print(f"  output ({len(view.output)}, uploaded; no receipt covers it):", file=out)
        _print_messages(view.output, full, out)
    print(file=out)


def _source_lines(view: ServedView) -> list[str]:
    """Where the request shown was taken from, where that is not the instrumentation's record."""
    by = view.recorded_by or "the instrumentation"
    lines = []
    if view.source == names.SOURCE_WIRE:
        lines.append("request: the body the client sent (wire tap)")
    if view.from_uploads:
        lines.append(
            f"read from the upload hook's files: {', '.join(view.from_uploads)} (the record "
            "lacks them; the dials and model from the span's own attributes)"
        )
    if view.record_differs:
        lines.append(f"{by} recorded otherwise than sent: {', '.join(view.record_differs)}")
    return lines


def _print_messages(messages: Sequence[Any], full: bool, out: TextIO) -> None:
    for index, message in enumerate(messages):
        print(f"    #{index} {message.get('role')}:", file=out)
        for part in message.get("parts", ()):
            print(indent(part_text(part, full), "      "), file=out)


def _listed(items: Sequence[Any] | None) -> list[Any] | None:
    return None if items is None else list(items)


def view_json(view: ServedView, verdict: Verdict | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "run_id": view.run_id,
        "epoch": view.epoch,
        "parent": view.parent,
        "span_id": view.span_id,
        "trace_id": view.trace_id,
        "service": view.service,
        "base": view.base,
        "system": _listed(view.system),
        "messages": _listed(view.messages),
        "tools": _listed(view.tools),
        "params": view.params,
        "model": view.model,
        "provider": view.provider,
        "gaps": [{"kind": g.kind, "cause": g.cause, "detail": g.detail} for g in view.gaps],
        "name": view.name,
        "scope": view.recorded_by,
        "same_call": [
            {"span_id": c.span_id, "trace_id": c.trace_id, "name": c.name, "scope": c.scope}
            for c in view.same_call
        ],
        "held": [
            {
                "response_id": h.response_id,
                "epoch": h.epoch,
                "messages": h.messages,
                "gaps": list(h.gaps),
                "minted": h.minted,
            }
            for h in view.held
        ],
    }
    if view.from_uploads:
        out["from_uploads"] = list(view.from_uploads)
    if view.output is not None:
        out["output"] = list(view.output)
    if view.agent is not None:
        out.update(_agent_json(view.agent))
    if verdict is not None:
        out["verdict"] = verdict_json(verdict)
    return out


def _agent_dict(agent: Agent | None) -> dict[str, Any] | None:
    if agent is None:
        return None
    return {"name": agent.name, "span_id": agent.span_id, "id": agent.agent_id}


def _agent_json(step: AgentStep) -> dict[str, Any]:
    """The keys a view in the agent tree adds: ``agent`` (with the handoff to it) where an agent
    span encloses the call, ``tools_run`` where tools ran after it (``tools`` is the request's)."""
    out: dict[str, Any] = {}
    if step.agent is not None:
        out["agent"] = {
            **(_agent_dict(step.agent) or {}),
            "handoff_from": _agent_dict(step.handoff_from),
        }
    if step.tools:
        out["tools_run"] = [
            {
                "name": run.name,
                "call_id": run.call_id,
                "span_id": run.span_id,
                "status": run.status,
                "error": run.error,
                "decision": run.decision,
            }
            for run in step.tools
        ]
    return out


def _recorded_by(view: ServedView) -> str:
    """The span's name and scope, and the spans folded into it (the same model call)."""
    text = f"span name {view.name!r} · scope {view.recorded_by or '—'}"
    for call in view.same_call:
        text += f"\n  same call: span {call.span_id} {call.name!r} · scope {call.scope or '—'}"
    return text


def verdict_line(verdict: Verdict) -> str:
    line = f"{verdict.run_id} epoch {verdict.epoch}: {verdict.status.value}"
    if verdict.status is VerdictStatus.VERIFIED:
        return line
    return f"{line} — {verdict.reason}"
