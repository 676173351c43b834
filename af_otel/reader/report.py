"""The HTML report: one self-contained page (no script, no external resource) showing each run's
epochs, what each call was served, what changed since its parent, its gaps and its verdict.

Rendering only: the caller writes the returned text where it wants. Every value that came from a
trace or the store passes through `html.escape`, so a prompt holding ``<script>`` shows as text.
Each epoch prints only the messages it added to its parent's list (the rest is one link away), so
the page grows with the conversation, not with its square.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import orjson

from af_otel.reader.verify import Verdict, VerdictStatus
from af_otel.reader.view import ServedView

__all__ = ["render_report"]

# Parts longer than this are shown folded; the page stays readable with tool results of megabytes.
FOLD_CHARS: Final = 600

_STYLE: Final = """
:root { --ink:#1d2430; --muted:#5b6475; --line:#d9dee7; --paper:#ffffff; --wash:#f5f7fa;
  --ok:#1f7a46; --warn:#9a6200; --bad:#b3261e; --info:#2c5fa8; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--ink); background: var(--wash); }
main { max-width: 1080px; margin: 0 auto; padding: 32px 24px 64px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 32px 0 8px; }
h3 { font-size: 16px; margin: 0; } .muted { color: var(--muted); }
code, pre { font: 13px/1.45 ui-monospace, "SF Mono", Menlo, Consolas, monospace; }
pre { white-space: pre-wrap; word-break: break-word; margin: 4px 0; }
.summary { display: flex; gap: 12px; flex-wrap: wrap; margin: 16px 0; }
.stat { background: var(--paper); border: 1px solid var(--line); border-radius: 8px;
  padding: 10px 14px; min-width: 120px; }
.stat b { display: block; font-size: 22px; }
table { border-collapse: collapse; width: 100%; background: var(--paper);
  border: 1px solid var(--line); }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { font-size: 13px; color: var(--muted); font-weight: 600; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px;
  font-weight: 600; border: 1px solid currentColor; }
.verified { color: var(--ok); } .reconstructed { color: var(--warn); }
.damaged { color: var(--bad); } .gap { color: var(--info); }
.epoch { background: var(--paper); border: 1px solid var(--line); border-radius: 8px;
  margin: 14px 0; padding: 14px 16px; }
.epoch > header { display: flex; gap: 10px; align-items: baseline; flex-wrap: wrap; }
.section { margin-top: 10px; } .section > h4 { margin: 0 0 4px; font-size: 13px;
  color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
.msg { border-left: 3px solid var(--line); padding: 2px 0 2px 10px; margin: 6px 0; }
.role { font-weight: 600; } .gaplist li { margin: 6px 0; }
details > summary { cursor: pointer; color: var(--muted); }
.damage { color: var(--bad); font-weight: 600; }
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).decode()
    except TypeError:
        return repr(value)


def _text_block(text: str) -> str:
    if len(text) <= FOLD_CHARS:
        return f"<pre>{_e(text)}</pre>"
    return (
        f"<pre>{_e(text[:FOLD_CHARS])}…</pre><details><summary>all {len(text):,} characters"
        f"</summary><pre>{_e(text)}</pre></details>"
    )


def _part(part: Mapping[str, Any]) -> str:
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("content"), str):
        return _text_block(part["content"])
    if kind == "tool_call":
        args = part.get("arguments")
        shown = args if isinstance(args, str) else _json(args)
        return f"<div><code>tool call {_e(part.get('name'))}({_e(part.get('id'))})</code>{_text_block(shown)}</div>"
    if kind == "tool_call_response":
        response = part.get("response")
        shown = response if isinstance(response, str) else _json(response)
        return f"<div><code>tool result for {_e(part.get('id'))}</code>{_text_block(shown)}</div>"
    return f"<div><code>{_e(kind)}</code>{_text_block(_json(part))}</div>"


def _message(index: int, message: Mapping[str, Any]) -> str:
    name = f" ({_e(message['name'])})" if message.get("name") else ""
    parts = "".join(_part(p) for p in message.get("parts", ()))
    return (
        f'<div class="msg" id="m{index}"><span class="muted">#{index}</span> '
        f'<span class="role">{_e(message.get("role"))}</span>{name}{parts}</div>'
    )


def _badge(verdict: Verdict | None) -> str:
    if verdict is None:
        return '<span class="badge muted">not checked</span>'
    return (
        f'<span class="badge {_e(verdict.status.value)}" data-verdict="{_e(verdict.status.value)}">'
        f"{_e(verdict.status.value)}</span>"
    )


def _anchor(view: ServedView, epoch: int | None = None) -> str:
    return f"run-{_e(view.run_id or view.span_id)}-e{epoch if epoch is not None else view.epoch}"


def _changes(view: ServedView) -> str:
    parent = view.parent_view
    rows: list[str] = []
    if parent is None:
        origin = "the run's base" if view.base else "an empty start"
        rows.append(f"<li>First call on this path: built on {_e(origin)}.</li>")
    for label, old, new in (
        ("System instructions", parent.system if parent else None, view.system),
        ("Tools", parent.tools if parent else None, view.tools),
        ("Sampling settings", parent.params if parent else None, view.params),
        ("Model", parent.model if parent else None, view.model),
        ("Provider", parent.provider if parent else None, view.provider),
    ):
        if parent is not None and old != new:
            rows.append(f"<li>{_e(label)} changed.</li>")
    if view.messages is None:
        rows.append("<li>Messages are not on record.</li>")
    elif parent is not None and parent.messages is not None:
        shared = view.context.shared_prefix(view.messages, parent.messages)
        added = len(view.messages) - shared
        if shared < len(parent.messages):
            rows.append(
                f"<li>History changed: {shared} of epoch {parent.epoch}'s "
                f"{len(parent.messages)} messages kept, {added} new.</li>"
            )
        else:
            rows.append(f"<li>{added} message(s) added to epoch {parent.epoch}'s {shared}.</li>")
    return "<ul>" + "".join(rows) + "</ul>" if rows else "<p class='muted'>No change.</p>"


def _messages(view: ServedView) -> str:
    if view.messages is None:
        return "<p class='muted'>Not on record.</p>"
    parent = view.parent_view
    start = 0
    note = ""
    if parent is not None and parent.messages is not None:
        start = view.context.shared_prefix(view.messages, parent.messages)
        if start:
            note = (
                f'<p class="muted">Messages #0–#{start - 1} are epoch {parent.epoch}\'s '
                f'(<a href="#{_anchor(parent)}">shown there</a>).</p>'
            )
    shown = "".join(_message(i, view.messages[i]) for i in range(start, len(view.messages)))
    return f"<p>{len(view.messages)} message(s) as sent.</p>{note}{shown}"


def _gaps(view: ServedView) -> str:
    if not view.gaps:
        return "<p class='muted'>None.</p>"
    items = []
    for g in view.gaps:
        cause = f' data-cause="{_e(g.cause)}"' if g.cause else ""
        extra = f" <span class='muted'>({_e(g.cause)})</span>" if g.cause else ""
        detail = f"<div class='muted'>Found: {_e(g.detail)}</div>" if g.detail else ""
        items.append(
            f'<li data-gap="{_e(g.kind)}"{cause}><span class="badge gap">{_e(g.kind)}</span>'
            f"{extra} {_e(g.why)}{detail}</li>"
        )
    return '<ul class="gaplist">' + "".join(items) + "</ul>"


def _verdict(verdict: Verdict | None) -> str:
    if verdict is None:
        return ""
    out = f"<p>{_badge(verdict)} {_e(verdict.reason)}</p>"
    if verdict.status is VerdictStatus.DAMAGED:
        where = f", message {verdict.message_index}" if verdict.message_index is not None else ""
        out += f'<p class="damage">First difference: {_e(verdict.field)}{_e(where)} (looks {_e(verdict.looks)}).</p>'
    rows = "".join(
        f"<tr><td><code>{_e(m.field)}</code></td><td>{_e(_short(m.recorded))}</td>"
        f"<td>{_e(_short(m.rebuilt))}</td><td>{_e(m.excused_by or '—')}</td></tr>"
        for m in verdict.mismatches
    )
    if rows:
        out += (
            "<details><summary>Fields that differ</summary><table><tr><th>field</th>"
            f"<th>recorded</th><th>rebuilt</th><th>explained by</th></tr>{rows}</table></details>"
        )
    return out


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else _json(value)
    return text if len(text) <= 120 else text[:117] + "…"


def _request_parts(view: ServedView) -> str:
    system = (
        "".join(_part(p) for p in view.system)
        if view.system
        else (
            "<p class='muted'>Not on record.</p>"
            if view.system is None
            else "<p class='muted'>None.</p>"
        )
    )
    if view.tools is None:
        tools = "<p class='muted'>Not on record.</p>"
    elif not view.tools:
        tools = "<p class='muted'>None.</p>"
    else:
        tools = "".join(
            f"<details><summary><code>{_e(t.get('name'))}</code></summary><pre>{_e(_json(t))}</pre></details>"
            for t in view.tools
        )
    params = (
        f"<pre>{_e(_json(view.params))}</pre>"
        if view.params
        else (
            "<p class='muted'>Not on record.</p>"
            if view.params is None
            else "<p class='muted'>None set.</p>"
        )
    )
    return (
        f'<div class="section"><h4>System</h4>{system}</div>'
        f'<div class="section"><h4>Tools</h4>{tools}</div>'
        f'<div class="section"><h4>Sampling settings</h4>{params}</div>'
    )


def _same_call(view: ServedView) -> str:
    """The spans folded into this epoch: the same model call, recorded again."""
    return "".join(
        f" · same call: <code>{_e(c.span_id)}</code> {_e(c.name)} · {_e(c.scope or 'scope unknown')}"
        for c in view.same_call
    )


def _epoch(view: ServedView, verdict: Verdict | None) -> str:
    model = " · ".join(_e(x) for x in (view.model, view.provider) if x) or "model not on record"
    return (
        f'<section class="epoch" id="{_anchor(view)}" data-epoch="{view.epoch}">'
        f"<header><h3>Epoch {view.epoch}</h3>"
        f'<span class="muted">parent {view.parent}</span>{_badge(verdict)}'
        f'<span class="muted">{model} · span <code>{_e(view.span_id)}</code>'
        f" {_e(view.name)} · {_e(view.recorded_by or 'scope unknown')}"
        f"{' · ' + _e(view.service) if view.service else ''}{_same_call(view)}</span></header>"
        f'<div class="section"><h4>Verdict</h4>{_verdict(verdict)}</div>'
        f'<div class="section"><h4>Gaps</h4>{_gaps(view)}</div>'
        f'<div class="section"><h4>Changed since the parent</h4>{_changes(view)}</div>'
        f"{_request_parts(view)}"
        f'<div class="section"><h4>Messages</h4>{_messages(view)}</div>'
        "</section>"
    )


def _run_table(views: Sequence[ServedView], verdicts: Mapping[int, Verdict]) -> str:
    rows = "".join(
        f'<tr><td><a href="#{_anchor(v)}">{v.epoch}</a></td><td>{v.parent}</td>'
        f"<td>{_badge(verdicts.get(id(v)))}</td>"
        f"<td>{len(v.messages) if v.messages is not None else '?'}</td>"
        f"<td>{_e(v.model or '')}</td><td>{_e(', '.join(v.gap_kinds) or '—')}</td></tr>"
        for v in views
    )
    return (
        "<table><tr><th>epoch</th><th>parent</th><th>verdict</th><th>messages</th><th>model</th>"
        f"<th>gaps</th></tr>{rows}</table>"
    )


def render_report(
    views: Iterable[ServedView],
    verdicts: Iterable[Verdict | None] | None = None,
    *,
    title: str = "af_otel report",
    source: str = "",
) -> str:
    """The whole page for ``views`` (with their ``verdicts``, in the same order, if given)."""
    views = list(views)
    given = list(verdicts) if verdicts is not None else [None] * len(views)
    by_view = {id(v): d for v, d in zip(views, given, strict=True) if d is not None}
    runs: dict[str, list[ServedView]] = {}
    for view in views:
        runs.setdefault(view.run_id or "(no run)", []).append(view)
    counts = dict.fromkeys(VerdictStatus, 0)
    for verdict in by_view.values():
        counts[verdict.status] += 1
    stats = "".join(
        f'<div class="stat"><b>{n}</b>{label}</div>'
        for n, label in (
            (len(runs), "runs"),
            (len(views), "LLM calls"),
            (counts[VerdictStatus.VERIFIED], "verified"),
            (counts[VerdictStatus.RECONSTRUCTED], "reconstructed"),
            (counts[VerdictStatus.DAMAGED], "damaged"),
        )
    )
    body = []
    for run_id, members in runs.items():
        base = members[0].base
        body.append(
            f'<h2 id="run-{_e(run_id)}">Run <code>{_e(run_id)}</code></h2>'
            + (f"<p class='muted'>Base: <code>{_e(base)}</code></p>" if base else "")
            + _run_table(members, by_view)
            + "".join(_epoch(v, by_view.get(id(v))) for v in members)
        )
    subtitle = f"<p class='muted'>Read from {_e(source)}</p>" if source else ""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body><main>"
        f"<h1>{_e(title)}</h1>{subtitle}<div class='summary'>{stats}</div>"
        + "".join(body)
        + "</main></body></html>"
    )
