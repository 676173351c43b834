"""The HTML report and the served page of one epoch: what each call was served, what changed since
its parent, its receipt, its gaps and its verdict, on self-contained pages (no script, no external
resource).

`render_report` writes one page for many runs; `render_epoch_page` writes the page `af-otel serve`
answers for one epoch. Both draw each epoch with the same function, so the report and the served
page cannot drift apart. Rendering only: the caller writes or sends the returned text. Every value
that came from a trace or the store passes through `html.escape`, so a prompt holding
``<script>`` shows as text. Each epoch prints only the messages it added to its parent's list (the
rest is one link away), so a report grows with the conversation, not with its square. Element ids
are made from positions on the page, never from recorded values, and are unique across runs. The
style sheet and the legend are `af_otel.present.sheet`'s; a content part is worded by
`af_otel.present.parts`, as at the terminal.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from af_otel.model.gap_kinds import SERVED_GAPS
from af_otel.model.request import INSTRUCTION_ROLES
from af_otel.present.parts import agent_lines, held_shown, json_text, show_part
from af_otel.present.sheet import LEGEND, STYLE
from af_otel.reader.gaps import BackendNote, Gap, gap_why
from af_otel.reader.verify import Verdict, VerdictStatus
from af_otel.reader.view import ServedView
from af_otel.receipts import MalformedReceipt

__all__ = ["render_epoch_page", "render_notice", "render_report"]


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _part(part: Mapping[str, Any]) -> str:
    shown = show_part(part, indent=True)
    block = f"<pre>{_e(shown.text)}</pre>"
    if shown.cut:
        block = (
            f"<pre>{_e(shown.head)}…</pre><details><summary>all {len(shown.text):,} characters"
            f"</summary>{block}</details>"
        )
    return f"<div><code>{_e(shown.label)}</code>{block}</div>" if shown.label else block


@dataclass(slots=True)
class _Page:
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
    name = f" ({_e(message['name'])})" if message.get("name") else ""
    parts = "".join(_part(p) for p in message.get("parts", ()))
    return (
        f'<div class="msg" id="{anchor}-m{index}"><span class="muted">#{index}</span> '
        f'<span class="role">{_e(message.get("role"))}</span>{name}{parts}</div>'
    )


def _badge(verdict: Verdict | None) -> str:
    if verdict is None:
        return '<span class="badge muted">not checked</span>'
    return (
        f'<span class="badge {_e(verdict.status.value)}" data-verdict="{_e(verdict.status.value)}">'
        f"{_e(verdict.status.value)}</span>"
    )


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


def _held(view: ServedView, page: _Page) -> str:
    """What the server held for this call, oldest first, each linked to its epoch."""
    items = []
    for call in view.held:
        held = view.context.views.get(call.epoch) if call.epoch is not None else None
        text = _e(held_shown(call))
        if held is not None:
            text = f'<a href="{_e(page.href(held))}">{text}</a>'
        items.append(f'<li data-held="{_e(call.epoch or "")}">{text}</li>')
    return (
        "<p>Held by the server, seen by the model before this request's own items "
        "(never fingerprinted: the answers are in no receipt):</p>"
        f'<ol class="held">{"".join(items)}</ol><p>This request\'s own items:</p>'
    )


def _messages(view: ServedView, page: _Page) -> str:
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
                f'(<a href="{_e(page.href(parent))}">shown there</a>).</p>'
            )
    anchor = page.anchor(view)
    shown = "".join(_message(i, view.messages[i], anchor) for i in range(start, len(view.messages)))
    return f"{held}<p>{len(view.messages)} message(s) as sent.</p>{note}{shown}"


def _gaps(view: ServedView, page: _Page) -> str:
    if not view.gaps:
        return "<p class='muted'>No gap: the record shows every part of this request.</p>"
    items = []
    for g in view.gaps:
        cause = f' data-cause="{_e(g.cause)}"' if g.cause else ""
        extra = f" <span class='muted'>({_e(g.cause)})</span>" if g.cause else ""
        detail = f"<div class='muted'>Found: {_e(g.detail)}</div>" if g.detail else ""
        explained = page.explained.get(g.kind)
        why = (
            f' <a href="#{_e(explained)}">what this means</a>'
            if explained is not None
            else f" {_e(gap_why(g, page.notes))}"
        )
        items.append(
            f'<li data-gap="{_e(g.kind)}"{cause}><span class="badge gap">{_e(g.kind)}</span>'
            f"{extra}{why}{detail}</li>"
        )
    return '<ul class="gaplist">' + "".join(items) + "</ul>"


def _verdict(verdict: Verdict | None) -> str:
    if verdict is None:
        return (
            "<p>" + _badge(None) + " This receipt is keyed; start the reader with its key to "
            "check it.</p>"
        )
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
        return f"<p class='muted'>The span's receipt could not be read: {_e(receipt.reason)}.</p>"
    if not receipt.minted:
        why = f": {_e(receipt.absent_reason)}" if receipt.absent_reason else ""
        return f"<p class='muted'>No receipt was minted (state {_e(receipt.state)}{why}).</p>"
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
            f'<tr data-hash="{_e(label)}"><td><code>{_e(label)}</code></td>'
            f"<td><code>{_e(_short(shown))}</code></td><td>{status}</td></tr>"
        )
    return (
        f"<p>Digest <code data-digest>{_e(receipt.digest)}</code> · scheme "
        f"<code>{_e(receipt.scheme)}</code> · {receipt.messages_count} message hash(es)</p>"
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
            f"<details><summary><code>{_e(t.get('name'))}</code></summary><pre>{_e(json_text(t, indent=True))}</pre></details>"
            for t in view.tools
        )
    if view.params:
        params = f"<pre>{_e(json_text(view.params, indent=True))}</pre>"
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
        f" · same call: <code>{_e(c.span_id)}</code> {_e(c.name)} · {_e(c.scope or 'scope unknown')}"
        for c in view.same_call
    )


def _agent(view: ServedView) -> str:
    """The call's place in the agent tree, where the record shows one (nothing otherwise)."""
    lines = agent_lines(view.agent)
    if not lines:
        return ""
    items = "".join(f"<li>{_e(line)}</li>" for line in lines)
    return f'<div class="section agent"><h4>Agent</h4><ul>{items}</ul></div>'


def _epoch(view: ServedView, verdict: Verdict | None, page: _Page) -> str:
    """One epoch: the section both the report and the served page are made of."""
    model = " · ".join(_e(x) for x in (view.model, view.provider) if x) or "model not on record"
    return (
        f'<section class="epoch" id="{page.anchor(view)}" data-epoch="{view.epoch}">'
        f"<header><h3>Epoch {view.epoch}</h3>"
        f'<span class="muted">parent {view.parent}</span>{_badge(verdict)}'
        f'<span class="muted">{model} · span <code>{_e(view.span_id)}</code>'
        f" {_e(view.name)} · {_e(view.recorded_by or 'scope unknown')}"
        f"{' · ' + _e(view.service) if view.service else ''}{_same_call(view)}</span></header>"
        f"{_agent(view)}"
        f'<div class="section"><h4>Verdict</h4>{_verdict(verdict)}</div>'
        f'<div class="section"><h4>Receipt</h4>{_receipt(view, verdict)}</div>'
        f'<div class="section"><h4>Gaps</h4>{_gaps(view, page)}</div>'
        f'<div class="section"><h4>Changed since the parent</h4>{_changes(view)}</div>'
        f"{_request_parts(view)}"
        f'<div class="section"><h4>Messages</h4>{_messages(view, page)}</div>'
        f"{_output(view, page)}"
        "</section>"
    )


def _output(view: ServedView, page: _Page) -> str:
    """Where the request was read from the upload hook's files, and the output it uploaded."""
    out = ""
    if view.from_uploads:
        out += (
            f"<p class='muted'>Read from the upload hook's files: {_e(', '.join(view.from_uploads))}"
            " (the record lacks them; checked against the receipt like any rebuild).</p>"
        )
    if view.output is not None:
        anchor = page.anchor(view) + "-out"
        shown = "".join(_message(i, m, anchor) for i, m in enumerate(view.output))
        out += f"<p>Output as the upload hook uploaded it (no receipt covers it).</p>{shown}"
    return f'<div class="section"><h4>Uploads</h4>{out}</div>' if out else ""


def _run_table(views: Sequence[ServedView], verdicts: Mapping[int, Verdict], page: _Page) -> str:
    rows = "".join(
        f'<tr><td><a href="{_e(page.href(v))}">{v.epoch}</a></td><td>{v.parent}</td>'
        f"<td>{_badge(verdicts.get(id(v)))}</td>"
        f"<td>{len(v.messages) if v.messages is not None else '?'}</td>"
        f"<td>{_e(v.model or '')}</td><td>{_e(', '.join(v.gap_kinds) or '—')}</td></tr>"
        for v in views
    )
    return (
        "<table><tr><th>epoch</th><th>parent</th><th>verdict</th><th>messages</th><th>model</th>"
        f"<th>gaps</th></tr>{rows}</table>"
    )


def _run_gaps(views: Sequence[ServedView], prefix: str, page: _Page) -> str:
    """Each gap kind of a run once, with its sentence and the epochs it applies to; the epochs
    then link here instead of repeating the sentence."""
    applies: dict[str, list[ServedView]] = {}
    first: dict[str, Gap] = {}
    for view in views:
        for g in view.gaps:
            applies.setdefault(g.kind, []).append(view)
            first.setdefault(g.kind, g)
    if not applies:
        return ""
    items = []
    for kind in (k for k in SERVED_GAPS if k in applies):
        anchor = f"{prefix}-gap-{kind}"
        page.explained[kind] = anchor
        epochs = ", ".join(f'<a href="{_e(page.href(v))}">{v.epoch}</a>' for v in applies[kind])
        items.append(
            f'<li id="{_e(anchor)}" data-gap-kind="{_e(kind)}"><span class="badge gap">'
            f"{_e(kind)}</span> {_e(gap_why(first[kind], page.notes))}"
            f"<div class='muted'>Applies to epoch(s) {epochs}.</div></li>"
        )
    return (
        '<div class="section"><h4>Gaps in this run</h4><ul class="gaplist">'
        + "".join(items)
        + "</ul></div>"
    )


def _legend() -> str:
    terms = "".join(
        f"<dt>{_badge_term(term)}</dt><dd>{_e(text)}</dd>" for term, text in LEGEND.items()
    )
    return (
        '<details class="legend" open><summary>How to read this page</summary>'
        f"<dl>{terms}</dl></details>"
    )


def _badge_term(term: str) -> str:
    if term == "gap" or term in {s.value for s in VerdictStatus}:
        return f'<span class="badge {term}">{term}</span>'
    return term.capitalize()


def _causes(notes: Sequence[BackendNote | str]) -> tuple[BackendNote, ...]:
    """The notes a gap's sentence may name as its cause: the backend's own (``SourceNote``), not
    the reader's remarks given as text."""
    return tuple(n for n in notes if not isinstance(n, str))


def _notes(notes: Sequence[BackendNote | str]) -> str:
    if not notes:
        return ""
    items = "".join(f"<li>{_e(n if isinstance(n, str) else n.text)}</li>" for n in notes)
    return f'<div class="notes"><b>The backend said:</b><ul>{items}</ul></div>'


def _shell(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body><main>"
        f"{body}</main></body></html>"
    )


def _subtitle(source: str) -> str:
    return f"<p class='muted'>Read from {_e(source)}</p>" if source else ""


def render_report(
    views: Iterable[ServedView],
    verdicts: Iterable[Verdict | None] | None = None,
    *,
    title: str = "af_otel report",
    source: str = "",
    notes: Sequence[BackendNote | str] = (),
) -> str:
    """The whole page for ``views`` (with their ``verdicts``, in the same order, if given).

    ``notes`` are what the backend said about the spans it returned (the stream's
    ``SourceNote`` values: a partial trace, warnings), shown above the runs; a note that spans
    may be missing is named as the cause in the sentence of a ``no-run-log`` gap. Plain strings
    are shown only."""
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
    for number, (run_id, members) in enumerate(runs.items(), start=1):
        prefix = f"run-{number}"
        ids: dict[int, str] = {}
        used: set[str] = set()
        for view in members:
            anchor = f"{prefix}-e{view.epoch}"
            extra = 2
            while anchor in used:  # a second span claiming the same epoch number
                anchor = f"{prefix}-e{view.epoch}-{extra}"
                extra += 1
            used.add(anchor)
            ids[id(view)] = anchor
        page = _Page(href=_same_page(ids, members), ids=ids, notes=_causes(notes))
        base = members[0].base
        explained = _run_gaps(members, prefix, page)
        body.append(
            f'<h2 id="{prefix}">Run <code>{_e(run_id)}</code></h2>'
            + (f"<p class='muted'>Base: <code>{_e(base)}</code></p>" if base else "")
            + _run_table(members, by_view, page)
            + explained
            + "".join(_epoch(v, by_view.get(id(v)), page) for v in members)
        )
    return _shell(
        title,
        f"<h1>{_e(title)}</h1>{_subtitle(source)}<div class='summary'>{stats}</div>"
        + _notes(notes)
        + _legend()
        + "".join(body),
    )


def _same_page(
    ids: Mapping[int, str], members: Sequence[ServedView]
) -> Callable[[ServedView], str]:
    """Links between epochs of one run on one page; a parent not drawn here (its span was not in
    the input) falls back to the first view drawn with that epoch number."""
    by_epoch: dict[int, str] = {}
    for view in members:
        by_epoch.setdefault(view.epoch, ids[id(view)])

    def href(view: ServedView) -> str:
        anchor = ids.get(id(view)) or by_epoch.get(view.epoch, "")
        return f"#{anchor}"

    return href


def render_epoch_page(
    view: ServedView,
    verdict: Verdict | None,
    *,
    run: Sequence[tuple[ServedView, Verdict | None]] = (),
    href: Callable[[ServedView], str],
    title: str = "",
    source: str = "",
    notes: Sequence[BackendNote | str] = (),
) -> str:
    """The page of one epoch, as ``af-otel serve`` answers it: the epoch drawn exactly as in the
    report, with every gap's sentence in place, and the run's other epochs (``run``: views with
    their verdicts) listed with ``href`` links to their own pages. ``notes`` as in
    `render_report`."""
    page = _Page(href=href, ids={id(view): f"e{view.epoch}"}, notes=_causes(notes))
    heading = title or (
        f"Run {view.run_id} · epoch {view.epoch}" if view.run_id else f"Span {view.span_id}"
    )
    others = ""
    if run:
        verdicts = {id(v): d for v, d in run if d is not None}
        others = (
            '<div class="section"><h4>Every epoch of this run</h4>'
            + _run_table([v for v, _ in run], verdicts, page)
            + "</div>"
        )
    where = f"trace <code>{_e(view.trace_id)}</code> · span <code>{_e(view.span_id)}</code>"
    return _shell(
        heading,
        f"<h1>{_e(heading)}</h1>{_subtitle(source)}<p class='muted'>{where}</p>"
        + _notes(notes)
        + _epoch(view, verdict, page)
        + others
        + _legend(),
    )


def render_notice(title: str, message: str, *, hints: Sequence[str] = ()) -> str:
    """A page that says why there is nothing to show (an unknown id, an unreachable backend, an
    unusable store), with what to try next; never a traceback."""
    items = "".join(f"<li>{_e(h)}</li>" for h in hints)
    return _shell(
        title,
        f"<h1>{_e(title)}</h1><p class='notice' data-notice>{_e(message)}</p>"
        + (f"<ul>{items}</ul>" if items else ""),
    )
