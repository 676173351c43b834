"""The HTML pages: the report of many runs, the page of one epoch ``af-otel serve`` answers, and a
notice saying why there is nothing to show; self-contained (no script, no external resource).

`render_report` and `render_epoch_page` draw each epoch with the one `epoch_section`, so the report
and the served page cannot drift apart. Rendering only: the caller writes or sends the returned
text. Element ids are unique across runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from af_otel.model.gap_kinds import SERVED_GAPS
from af_otel.present.epoch import Page, epoch_section, escape, run_table
from af_otel.reader.gaps import BackendNote, Gap, gap_why
from af_otel.reader.verify import Verdict, VerdictStatus
from af_otel.reader.view import ServedView

__all__ = ["render_epoch_page", "render_notice", "render_report"]

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
.legend, .notes { background: var(--paper); border: 1px solid var(--line); border-radius: 8px;
  padding: 10px 16px; margin: 12px 0; }
.legend dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 14px; margin: 8px 0; }
.legend dt { font-weight: 600; } .legend dd { margin: 0; }
.notes { border-color: var(--warn); } .notice { font-size: 17px; }
.ok { color: var(--ok); }
"""


def _run_gaps(views: Sequence[ServedView], prefix: str, page: Page) -> str:
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
        epochs = ", ".join(f'<a href="{escape(page.href(v))}">{v.epoch}</a>' for v in applies[kind])
        items.append(
            f'<li id="{escape(anchor)}" data-gap-kind="{escape(kind)}"><span class="badge gap">'
            f"{escape(kind)}</span> {escape(gap_why(first[kind], page.notes))}"
            f"<div class='muted'>Applies to epoch(s) {epochs}.</div></li>"
        )
    return (
        '<div class="section"><h4>Gaps in this run</h4><ul class="gaplist">'
        + "".join(items)
        + "</ul></div>"
    )


_LEGEND: Final = {
    "receipt": "Fingerprints of one LLM request (salted hashes of each message, the system "
    "instructions, the tools and the settings, and one digest over them all), written "
    "on the call's span when it was made. It holds no content.",
    "epoch": "One LLM call of a run, numbered in start order. Its request is rebuilt from the "
    "changes the run recorded, epoch by epoch.",
    "parent": "The epoch whose request this one's changes apply to; 0 is the run's base (or an "
    "empty start).",
    "verified": "Every receipt field recomputes from the rebuilt request: this is what the model "
    "was sent.",
    "reconstructed": "The request is shown as rebuilt, but there is no usable receipt to check "
    "it against, or every difference is explained by a gap.",
    "damaged": "A receipt field differs and no gap explains it: the record was altered or cut "
    "after the call. The first difference is named.",
    "gap": "Something the record cannot show, with what may and may not be concluded. A call "
    "with a gap is never reported as more than the record proves.",
}


def _legend() -> str:
    terms = "".join(
        f"<dt>{_badge_term(term)}</dt><dd>{escape(text)}</dd>" for term, text in _LEGEND.items()
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
    items = "".join(f"<li>{escape(n if isinstance(n, str) else n.text)}</li>" for n in notes)
    return f'<div class="notes"><b>The backend said:</b><ul>{items}</ul></div>'


def _shell(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body><main>"
        f"{body}</main></body></html>"
    )


def _subtitle(source: str) -> str:
    return f"<p class='muted'>Read from {escape(source)}</p>" if source else ""


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
        page = Page(href=_same_page(ids, members), ids=ids, notes=_causes(notes))
        base = members[0].base
        explained = _run_gaps(members, prefix, page)
        body.append(
            f'<h2 id="{prefix}">Run <code>{escape(run_id)}</code></h2>'
            + (f"<p class='muted'>Base: <code>{escape(base)}</code></p>" if base else "")
            + run_table(members, by_view, page)
            + explained
            + "".join(epoch_section(v, by_view.get(id(v)), page) for v in members)
        )
    return _shell(
        title,
        f"<h1>{escape(title)}</h1>{_subtitle(source)}<div class='summary'>{stats}</div>"
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
    page = Page(href=href, ids={id(view): f"e{view.epoch}"}, notes=_causes(notes))
    heading = title or (
        f"Run {view.run_id} · epoch {view.epoch}" if view.run_id else f"Span {view.span_id}"
    )
    others = ""
    if run:
        verdicts = {id(v): d for v, d in run if d is not None}
        others = (
            '<div class="section"><h4>Every epoch of this run</h4>'
            + run_table([v for v, _ in run], verdicts, page)
            + "</div>"
        )
    where = f"trace <code>{escape(view.trace_id)}</code> · span <code>{escape(view.span_id)}</code>"
    return _shell(
        heading,
        f"<h1>{escape(heading)}</h1>{_subtitle(source)}<p class='muted'>{where}</p>"
        + _notes(notes)
        + epoch_section(view, verdict, page)
        + others
        + _legend(),
    )


def render_notice(title: str, message: str, *, hints: Sequence[str] = ()) -> str:
    """A page that says why there is nothing to show (an unknown id, an unreachable backend, an
    unusable store), with what to try next; never a traceback."""
    items = "".join(f"<li>{escape(h)}</li>" for h in hints)
    return _shell(
        title,
        f"<h1>{escape(title)}</h1><p class='notice' data-notice>{escape(message)}</p>"
        + (f"<ul>{items}</ul>" if items else ""),
    )
