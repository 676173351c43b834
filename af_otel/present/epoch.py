"""One epoch drawn as HTML: what the call was served, what changed since its parent, its receipt,
its gaps and its verdict; the section the report and the served page are both made of, and the
table of a run's epochs.

Every value that came from a trace or the store passes through `escape`, so a prompt holding
``<script>`` shows as text. Each epoch prints only the messages it added to its parent's list (the
rest is one link away), so a report grows with the conversation, not with its square. Element ids
are made from positions on the page, never from recorded values.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from af_otel.model.request import INSTRUCTION_ROLES
from af_otel.present.parts import held_shown, json_text, show_part
from af_otel.reader.gaps import BackendNote, gap_why
from af_otel.reader.verify import Verdict, VerdictStatus
from af_otel.reader.view import ServedView
from af_otel.receipts import MalformedReceipt

__all__ = ["Page", "badge", "epoch_section", "escape", "run_table"]


def escape(value: object) -> str:
    """``value`` as HTML text (quotes too: it may stand in an attribute)."""
    return html.escape(str(value), quote=True)


def _part(part: Mapping[str, Any]) -> str:
    shown = show_part(part, indent=True)
    block = f"<pre>{escape(shown.text)}</pre>"
    if shown.cut:
        block = (
            f"<pre>{escape(shown.head)}…</pre><details><summary>all {len(shown.text):,} characters"
            f"</summary>{block}</details>"
        )
    return f"<div><code>{escape(shown.label)}</code>{block}</div>" if shown.label else block


@dataclass(slots=True)
class Page:
    """How the epochs of one page refer to each other: the element id of each epoch drawn here,
    the link to any epoch (on this page or another), and, per run, the gap kinds whose sentence is
    printed once above the epochs (kind -> element id), and what the backend said about its
    answer, which a gap's sentence may name as its cause (`gap_why`)."""

    href: Callable[[ServedView], str]
    ids: dict[int, str] = field(default_factory=dict)
    explained: dict[str, str] = field(default_factory=dict)
    notes: tuple[BackendNote, ...] = ()

    def anchor(self, view: ServedView) -> str:
        return self.ids[id(view)]


def _message(index: int, message: Mapping[str, Any], anchor: str) -> str:
    name = f" ({escape(message['name'])})" if message.get("name") else ""
    parts = "".join(_part(p) for p in message.get("parts", ()))
    return (
        f'<div class="msg" id="{anchor}-m{index}"><span class="muted">#{index}</span> '
        f'<span class="role">{escape(message.get("role"))}</span>{name}{parts}</div>'
    )


def badge(verdict: Verdict | None) -> str:
    """The verdict as a coloured badge (``not checked``: a keyed receipt and no key)."""
    if verdict is None:
        return '<span class="badge muted">not checked</span>'
    return (
        f'<span class="badge {escape(verdict.status.value)}" data-verdict="{escape(verdict.status.value)}">'
        f"{escape(verdict.status.value)}</span>"
    )


def _changes(view: ServedView) -> str:
    parent = view.parent_view
    rows: list[str] = []
    if parent is None:
        origin = "the run's base" if view.base else "an empty start"
        rows.append(f"<li>First call on this path: built on {escape(origin)}.</li>")
    for label, old, new in (
        ("System instructions", parent.system if parent else None, view.system),
        ("Tools", parent.tools if parent else None, view.tools),
        ("Sampling settings", parent.params if parent else None, view.params),
        ("Model", parent.model if parent else None, view.model),
        ("Provider", parent.provider if parent else None, view.provider),
    ):
        if parent is not None and old != new:
            rows.append(f"<li>{escape(label)} changed.</li>")
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


def _held(view: ServedView, page: Page) -> str:
    """What the server held for this call, oldest first, each linked to its epoch."""
    items = []
    for call in view.held:
        held = view.context.views.get(call.epoch) if call.epoch is not None else None
        text = escape(held_shown(call))
        if held is not None:
            text = f'<a href="{escape(page.href(held))}">{text}</a>'
        items.append(f'<li data-held="{escape(call.epoch or "")}">{text}</li>')
    return (
        "<p>Held by the server, seen by the model before this request's own items "
        "(never fingerprinted: the answers are in no receipt):</p>"
        f'<ol class="held">{"".join(items)}</ol><p>This request\'s own items:</p>'
    )


def _messages(view: ServedView, page: Page) -> str:
    held = _held(view, page) if view.held else ""
    if view.messages is None:
        return f"{held}<p class='muted'>Not on record.</p>"
    parent = view.parent_view
    start = 0
    note = ""
    if parent is not None and parent.messages is not None:
        start = view.context.shared_prefix(view.messages, parent.messages)
        if start:
            note = (
                f'<p class="muted">Messages #0–#{start - 1} are epoch {parent.epoch}\'s '
                f'(<a href="{escape(page.href(parent))}">shown there</a>).</p>'
            )
    anchor = page.anchor(view)
    shown = "".join(_message(i, view.messages[i], anchor) for i in range(start, len(view.messages)))
    return f"{held}<p>{len(view.messages)} message(s) as sent.</p>{note}{shown}"


def _gaps(view: ServedView, page: Page) -> str:
    if not view.gaps:
        return "<p class='muted'>No gap: the record shows every part of this request.</p>"
    items = []
    for g in view.gaps:
        cause = f' data-cause="{escape(g.cause)}"' if g.cause else ""
        extra = f" <span class='muted'>({escape(g.cause)})</span>" if g.cause else ""
        detail = f"<div class='muted'>Found: {escape(g.detail)}</div>" if g.detail else ""
        explained = page.explained.get(g.kind)
        why = (
            f' <a href="#{escape(explained)}">what this means</a>'
            if explained is not None
            else f" {escape(gap_why(g, page.notes))}"
        )
        items.append(
            f'<li data-gap="{escape(g.kind)}"{cause}><span class="badge gap">{escape(g.kind)}</span>'
            f"{extra}{why}{detail}</li>"
        )
    return '<ul class="gaplist">' + "".join(items) + "</ul>"


def _verdict(verdict: Verdict | None) -> str:
    if verdict is None:
        return (
            "<p>" + badge(None) + " This receipt is keyed; start the reader with its key to "
            "check it.</p>"
        )
    out = f"<p>{badge(verdict)} {escape(verdict.reason)}</p>"
    if verdict.status is VerdictStatus.DAMAGED:
        where = f", message {verdict.message_index}" if verdict.message_index is not None else ""
        out += f'<p class="damage">First difference: {escape(verdict.field)}{escape(where)} (looks {escape(verdict.looks)}).</p>'
    rows = "".join(
        f"<tr><td><code>{escape(m.field)}</code></td><td>{escape(_short(m.recorded))}</td>"
        f"<td>{escape(_short(m.rebuilt))}</td><td>{escape(m.excused_by or '—')}</td></tr>"
        for m in verdict.mismatches
    )
    if rows:
        out += (
            "<details><summary>Fields that differ</summary><table><tr><th>field</th>"
            f"<th>recorded</th><th>rebuilt</th><th>explained by</th></tr>{rows}</table></details>"
        )
    return out


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json_text(value, indent=True)
    return text if len(text) <= 120 else text[:117] + "…"


# The receipt's fingerprints shown per epoch, in the order `verify` compares them.
_HASHES: Final = (
    ("system.hash", "system_hash"),
    ("messages.added", "messages_added"),
    ("messages.chain", "messages_chain"),
    ("tools.hashes", "tools_hashes"),
    ("digest", "digest"),
)


def _receipt(view: ServedView, verdict: Verdict | None) -> str:
    receipt = view.receipt
    if receipt is None:
        return "<p class='muted'>The span carries no receipt.</p>"
    if isinstance(receipt, MalformedReceipt):
        return (
            f"<p class='muted'>The span's receipt could not be read: {escape(receipt.reason)}.</p>"
        )
    if not receipt.minted:
        why = f": {escape(receipt.absent_reason)}" if receipt.absent_reason else ""
        return f"<p class='muted'>No receipt was minted (state {escape(receipt.state)}{why}).</p>"
    differs = {m.field for m in verdict.mismatches} if verdict is not None else set()
    rows = []
    for label, attr in _HASHES:
        value = getattr(receipt, attr)
        shown = (" ".join(value) or "(none)") if isinstance(value, tuple) else (value or "")
        if verdict is None:
            status = "<span class='muted'>not checked</span>"
        elif label in differs:
            status = "<span class='damaged'>differs</span>"
        else:
            status = "<span class='ok'>matches</span>"
        rows.append(
            f'<tr data-hash="{escape(label)}"><td><code>{escape(label)}</code></td>'
            f"<td><code>{escape(_short(shown))}</code></td><td>{status}</td></tr>"
        )
    return (
        f"<p>Digest <code data-digest>{escape(receipt.digest)}</code> · scheme "
        f"<code>{escape(receipt.scheme)}</code> · {receipt.messages_count} message hash(es)</p>"
        "<table><tr><th>fingerprint</th><th>recorded on the span</th><th>recomputed from the "
        f"request below</th></tr>{''.join(rows)}</table>"
    )


def _request_parts(view: ServedView) -> str:
    if view.system:
        system = "".join(_part(p) for p in view.system)
    elif view.system is None:
        system = "<p class='muted'>Not on record.</p>"
    else:
        # An empty list here is not "no instructions": chat APIs often carry them as a message.
        in_messages = [
            i for i, m in enumerate(view.messages or ()) if m.get("role") in INSTRUCTION_ROLES
        ]
        system = (
            "<p class='muted'>Sent as message "
            + ", ".join(f"#{i}" for i in in_messages)
            + " (below), not as separate instructions.</p>"
            if in_messages
            else "<p class='muted'>No system instructions were sent.</p>"
        )
    if view.tools is None:
        tools = "<p class='muted'>Not on record.</p>"
    elif not view.tools:
        tools = "<p class='muted'>No tools were offered.</p>"
    else:
        tools = "".join(
            f"<details><summary><code>{escape(t.get('name'))}</code></summary><pre>{escape(json_text(t, indent=True))}</pre></details>"
            for t in view.tools
        )
    if view.params:
        params = f"<pre>{escape(json_text(view.params, indent=True))}</pre>"
    elif view.params is None:
        params = "<p class='muted'>Not on record.</p>"
    else:
        params = "<p class='muted'>None set: the provider's defaults applied.</p>"
    return (
        f'<div class="section"><h4>System instructions</h4>{system}</div>'
        f'<div class="section"><h4>Tools</h4>{tools}</div>'
        f'<div class="section"><h4>Sampling settings</h4>{params}</div>'
    )


def _same_call(view: ServedView) -> str:
    """The spans folded into this epoch: the same model call, recorded again."""
    return "".join(
        f" · same call: <code>{escape(c.span_id)}</code> {escape(c.name)} · {escape(c.scope or 'scope unknown')}"
        for c in view.same_call
    )


def epoch_section(view: ServedView, verdict: Verdict | None, page: Page) -> str:
    """One epoch: the section both the report and the served page are made of."""
    model = " · ".join(escape(x) for x in (view.model, view.provider) if x) or "model not on record"
    return (
        f'<section class="epoch" id="{page.anchor(view)}" data-epoch="{view.epoch}">'
        f"<header><h3>Epoch {view.epoch}</h3>"
        f'<span class="muted">parent {view.parent}</span>{badge(verdict)}'
        f'<span class="muted">{model} · span <code>{escape(view.span_id)}</code>'
        f" {escape(view.name)} · {escape(view.recorded_by or 'scope unknown')}"
        f"{' · ' + escape(view.service) if view.service else ''}{_same_call(view)}</span></header>"
        f'<div class="section"><h4>Verdict</h4>{_verdict(verdict)}</div>'
        f'<div class="section"><h4>Receipt</h4>{_receipt(view, verdict)}</div>'
        f'<div class="section"><h4>Gaps</h4>{_gaps(view, page)}</div>'
        f'<div class="section"><h4>Changed since the parent</h4>{_changes(view)}</div>'
        f"{_request_parts(view)}"
        f'<div class="section"><h4>Messages</h4>{_messages(view, page)}</div>'
        "</section>"
    )


def run_table(views: Sequence[ServedView], verdicts: Mapping[int, Verdict], page: Page) -> str:
    """The table of a run's epochs: each links to its drawing, with verdict, size and gaps."""
    rows = "".join(
        f'<tr><td><a href="{escape(page.href(v))}">{v.epoch}</a></td><td>{v.parent}</td>'
        f"<td>{badge(verdicts.get(id(v)))}</td>"
        f"<td>{len(v.messages) if v.messages is not None else '?'}</td>"
        f"<td>{escape(v.model or '')}</td><td>{escape(', '.join(v.gap_kinds) or '—')}</td></tr>"
        for v in views
    )
    return (
        "<table><tr><th>epoch</th><th>parent</th><th>verdict</th><th>messages</th><th>model</th>"
        f"<th>gaps</th></tr>{rows}</table>"
    )
