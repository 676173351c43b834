"""`render_report`: one self-contained page, every recorded value escaped, each epoch with its
verdict, gaps, changes and the messages it added."""

from __future__ import annotations

import html
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from af_otel import names
from af_otel.processor import run
from af_otel.reader.report import render_report
from af_otel.reader.verify import verify
from af_otel.reader.view import served_views
from af_otel.store import LocalStore, Store

from .recordings import (
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
    assert 'id="m0"' not in second
    assert 'id="m2"' in second


def test_a_damaged_epoch_names_its_first_difference(store: Store) -> None:
    """The report of an edited recording shows the damaged badge and the field and message."""
    spans = hostile_run(store)
    span = span_of(spans, 2, HOSTILE)

    def edit(event: Any) -> Any:
        if event.attributes.get(names.COMMIT_KEY) != "messages":
            return event
        payload = json.loads(event.attributes[names.COMMIT_VALUE])
        payload[-1]["parts"][0]["content"] = "edited"
        return event_with(event, af__commit__value=json.dumps(payload))

    views = served_views(replace_span(spans, span, edit_events(span, edit)), store=store)
    page = render_report(views, [verify(v) for v in views])
    assert 'data-verdict="damaged"' in page
    assert "First difference: messages.added, message 2 (looks altered)." in page


def test_views_without_verdicts_render() -> None:
    """Verdicts are optional: the page says an epoch was not checked."""
    store_free = served_views([], store=LocalStore("/nonexistent-af-otel-store"))
    assert "0</b>LLM calls" in render_report(store_free)
