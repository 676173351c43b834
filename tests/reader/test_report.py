"""`render_report`: one self-contained page, every recorded value escaped, each epoch with its
verdict, gaps, changes and the messages it added."""

from __future__ import annotations

import html
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from af_otel import names
from af_otel.present import (
    FOLD_CHARS,
    render_epoch_page,
    render_notice,
    render_report,
    show_part,
)
from af_otel.present.pages import _part
from af_otel.present.terminal import part_text
from af_otel.processor import run
from af_otel.reader.verify import verify
from af_otel.reader.view import served_views
from af_otel.store import LocalStore, Store

from .recordings import (
    agent,
    assistant,
    edit_events,
    event_with,
    recorder,
    replace_span,
    span_of,
    user,
)

HOSTILE = '<script>document.title="pwned"</script> "><img src=x onerror=alert(1)> & done'


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> Tags:
    tags = Tags()
    tags.feed(page)
    return tags


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return LocalStore(tmp_path / "store")


def hostile_run(store: Store) -> Any:
    with recorder(store) as rec, run(HOSTILE):
        history = [user(HOSTILE)]
        rec.chat(history, system=[{"type": "text", "content": HOSTILE}])
        history += [assistant("ok"), user("and then?")]
        rec.chat(history, system=[{"type": "text", "content": HOSTILE}])
        rec.chat([user("a new start")], system=None)
        rec.blind_chat()
        return rec.records()


def test_every_recorded_value_is_text_not_markup(store: Store) -> None:
    """A prompt, system text and run id full of markup come out as text: no script, no image,
    no attribute broken out of."""
    spans = hostile_run(store)
    views = served_views(spans, store=store)
    page = render_report(views, [verify(v) for v in views], title=HOSTILE)
    tags = parse(page)
    assert {tag for tag, _ in tags.tags} <= {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "main",
        "h1",
        "h2",
        "h3",
        "h4",
        "p",
        "div",
        "section",
        "header",
        "span",
        "code",
        "pre",
        "ul",
        "li",
        "table",
        "tr",
        "th",
        "td",
        "a",
        "b",
        "details",
        "summary",
        "dl",
        "dt",
        "dd",
    }
    assert any(HOSTILE in chunk for chunk in tags.text)
    for _, attributes in tags.tags:
        assert "onerror" not in attributes
        assert "src" not in attributes


def test_the_page_needs_nothing_from_outside() -> None:
    """No script, no external stylesheet, font, image or link: one file says it all."""
    page = render_report([], [])
    assert "<script" not in page
    assert "http://" not in page
    assert "https://" not in page
    assert "url(" not in page
    assert "@import" not in page


def test_each_epoch_shows_verdict_gaps_and_changes(store: Store) -> None:
    """Badges per epoch, gap sentences verbatim (with the cause of a missing receipt), what
    changed since the parent, and only the messages an epoch added."""
    spans = hostile_run(store)
    views = served_views(spans, store=store)
    verdicts = [verify(v) for v in views]
    page = render_report(views, verdicts)
    tags = parse(page)
    badges = [a["data-verdict"] for t, a in tags.tags if t == "span" and "data-verdict" in a]
    assert badges.count("verified") >= 3
    assert "reconstructed" in badges
    assert html.escape(views[1].gaps[0].why) in page
    causes = [
        a.get("data-cause") for t, a in tags.tags if a.get("data-gap") == names.GAP_NO_RECEIPT
    ]
    assert causes == ["no-receipt-committed"]
    assert "2 message(s) added to epoch 1's 1." in page
    assert "History changed: 0 of epoch 2's 3 messages kept, 1 new." in page
    assert "System instructions changed." in page
    second = page[page.index('data-epoch="2"') : page.index('data-epoch="3"')]
    assert "Messages #0–#0 are epoch 1" in second
    assert 'id="run-1-e2-m0"' not in second
    assert 'id="run-1-e2-m2"' in second


def _report_with_epoch_2_edited(spans: Any, store: Store) -> str:
    """The report of the recording with the last message epoch 2 committed edited."""
    span = span_of(spans, 2, HOSTILE)

    def edit(event: Any) -> Any:
        if event.attributes.get(names.COMMIT_KEY) != "messages":
            return event
        payload = json.loads(event.attributes[names.COMMIT_VALUE])
        payload[-1]["parts"][0]["content"] = "edited"
        return event_with(event, af__commit__value=json.dumps(payload))

    views = served_views(replace_span(spans, span, edit_events(span, edit)), store=store)
    return render_report(views, [verify(v) for v in views])


def test_a_damaged_epoch_names_its_first_difference(store: Store) -> None:
    """The report of an edited recording shows the damaged badge and the field and message."""
    spans = hostile_run(store)
    page = _report_with_epoch_2_edited(spans, store)
    assert 'data-verdict="damaged"' in page
    assert "First difference: messages.added, message 2 (looks altered)." in page


def test_views_without_verdicts_render() -> None:
    """Verdicts are optional: the page says an epoch was not checked."""
    store_free = served_views([], store=LocalStore("/nonexistent-af-otel-store"))
    assert "0</b>LLM calls" in render_report(store_free)


def ids_of(page: str) -> list[str]:
    return [a["id"] or "" for _, a in parse(page).tags if "id" in a]


def test_element_ids_are_unique_across_twenty_runs(store: Store) -> None:
    """Twenty runs of three epochs each: every element id on the page is used once, and every
    in-page link points at an id that exists."""
    with recorder(store) as rec:
        for number in range(20):
            agent(rec, f"run-{number % 3}" if number < 3 else f"r{number}", 3)
        spans = rec.records()
    views = served_views(spans, store=store)
    page = render_report(views, [verify(v) for v in views])
    ids = ids_of(page)
    assert len(ids) > 20 * 3 * 3
    assert len(ids) == len(set(ids))
    targets = {
        a["href"][1:] for t, a in parse(page).tags if t == "a" and (a["href"] or "")[:1] == "#"
    }
    assert targets
    assert targets <= set(ids)


def test_a_legend_explains_the_words_the_page_uses() -> None:
    """Receipt, epoch, parent, the three verdicts and gap are each explained once."""
    page = render_report([], [])
    tags = parse(page)
    terms = [
        "".join(tags.text[i] for i in range(len(tags.text))).count(word)
        for word in ("Receipt", "Epoch", "Parent")
    ]
    assert all(terms)
    dts = page.count("<dt>")
    assert dts == 7
    for word in ("verified", "reconstructed", "damaged", "gap"):
        assert f'<dt><span class="badge {word}">{word}</span></dt>' in page


def test_each_epoch_shows_its_digest_and_the_hashes_that_matched(store: Store) -> None:
    """A verified epoch prints the span's digest and marks every fingerprint as matching; a
    damaged one marks the field that differs."""
    spans = hostile_run(store)
    views = served_views(spans, store=store)
    verdicts = [verify(v) for v in views]
    page = render_report(views, verdicts)
    for view, verdict in zip(views, verdicts, strict=True):
        if verdict.status.value == "verified":
            assert f"<code data-digest>{view.receipt.digest}</code>" in page  # type: ignore[union-attr]
    first = page[page.index('data-epoch="1"') : page.index('data-epoch="2"')]
    assert first.count("class='ok'>matches") == 5
    assert "differs" not in first

    page = _report_with_epoch_2_edited(spans, store)
    second = page[page.index('data-epoch="2"') : page.index('data-epoch="3"')]
    row = second[second.index('data-hash="messages.added"') :]
    assert row.index("differs") < row.index("</tr>")


def test_system_instructions_sent_as_a_message_are_not_called_none(store: Store) -> None:
    """A request whose instructions travel as a system message says so; no "None" line sits
    above the system message."""
    system_message = {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]}
    with recorder(store) as rec, run("inline-system"):
        rec.chat([system_message, user("hi")], system=None, provider="openai")
        spans = rec.records()
    (view,) = served_views(spans, store=store)
    assert view.system == ()
    page = render_report([view], [verify(view)])
    section = page[page.index("<h4>System instructions</h4>") :]
    assert section.index("Sent as message #0") < section.index("</div>")
    assert "None." not in page


def test_a_gap_sentence_shows_once_per_run_with_its_epochs(store: Store) -> None:
    """A gap every epoch of a run has is explained once, listing the epochs; each epoch links to
    that explanation instead of repeating it."""
    with recorder(store) as rec:
        agent(rec, "three", 3)
        spans = rec.records()
    views = served_views(spans, store=store)
    shared = set.intersection(*(set(v.gap_kinds) for v in views))
    assert shared
    kind = sorted(shared)[0]
    page = render_report(views, [verify(v) for v in views])
    assert page.count(html.escape(views[0].gap(kind).why)) == 1  # type: ignore[union-attr]
    item = page[page.index(f'data-gap-kind="{kind}"') :]
    item = item[: item.index("</li>")]
    assert "Applies to epoch(s)" in item
    for view in views:
        assert f'href="#run-1-e{view.epoch}">{view.epoch}</a>' in item
    assert page.count(f'href="#run-1-gap-{kind}"') == len(views)


def test_backend_notes_are_shown() -> None:
    """What the backend said about the spans (a partial trace) is on the page."""
    page = render_report([], [], notes=["Tempo returned a partial trace (<cut>)"])
    assert "Tempo returned a partial trace (&lt;cut&gt;)" in page


def test_the_served_page_draws_the_epoch_as_the_report_does(store: Store) -> None:
    """`render_epoch_page` and `render_report` share the epoch's drawing: the same verdict,
    receipt, changes and messages, with every gap sentence in place and links to the run's
    other epochs."""
    spans = hostile_run(store)
    views = served_views(spans, store=store)
    verdicts = [verify(v) for v in views]
    run_views = [(v, d) for v, d in zip(views, verdicts, strict=True) if v.run_id == HOSTILE]
    view, verdict = run_views[1]
    page = render_epoch_page(
        view, verdict, run=run_views, href=lambda v: f"/runs/x/epochs/{v.epoch}", source="here"
    )
    report = render_report(views, verdicts)
    drawn = report[report.index('data-epoch="2"') : report.index('data-epoch="3"')]
    for piece in ("2 message(s) added to epoch 1's 1.", "Messages #0–#0 are epoch 1"):
        assert piece in page
        assert piece in drawn
    assert 'href="/runs/x/epochs/1">shown there</a>' in page
    for g in view.gaps:
        assert html.escape(g.why) in page
    assert page.count('data-verdict="verified"') >= 3
    ids = ids_of(page)
    assert len(ids) == len(set(ids))


def test_a_notice_is_text_not_markup() -> None:
    """The error page escapes what it is told."""
    page = render_notice("Not found", "no trace <b>x</b>", hints=["try <i>y</i>"])
    assert "&lt;b&gt;x&lt;/b&gt;" in page
    assert "try &lt;i&gt;y&lt;/i&gt;" in page
    assert "<b>" not in page


@given(st.text(max_size=50), st.one_of(st.none(), st.integers(0, 60)))
def test_a_part_folds_at_the_length_it_is_given(text: str, fold: int | None) -> None:
    """The shown head plus what the fold cut is the whole text, and the head is never longer
    than the fold."""
    shown = show_part({"type": "text", "content": text}, fold)
    assert shown.head + text[len(shown.head) :] == text
    assert len(shown.head) + shown.cut == len(text)
    if fold is not None:
        assert len(shown.head) <= fold


def test_the_page_and_the_terminal_fold_a_part_alike() -> None:
    """One renderer: a long tool result is labelled the same and cut at FOLD_CHARS on the page
    and at the terminal; the terminal shows it whole with --full."""
    part = {"type": "tool_call_response", "id": "call_1", "response": "x" * (FOLD_CHARS + 5)}
    page = _part(part)
    assert "tool result for call_1" in page
    assert f"<pre>{'x' * FOLD_CHARS}…</pre>" in page
    assert f"all {FOLD_CHARS + 5:,} characters" in page
    folded = part_text(part, full=False)
    assert folded.startswith(f"[tool result for call_1] {'x' * FOLD_CHARS}… (5 more characters")
    assert part_text(part, full=True) == f"[tool result for call_1] {'x' * (FOLD_CHARS + 5)}"
