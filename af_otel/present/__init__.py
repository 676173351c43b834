"""How evidence is shown to people: the HTML pages of ``af-otel report`` and ``af-otel serve``, and
the words for content parts that the pages and the terminal share.

``parts`` words one value or content part (page and terminal alike); ``pages`` draws the HTML
pages, each epoch by one function, in the style and with the legend of ``sheet``; ``terminal`` is
what ``af-otel served`` prints. The reader decides what is true; nothing here decides anything,
it only shows it.
"""

from __future__ import annotations

from af_otel.present.pages import render_epoch_page, render_notice, render_report
from af_otel.present.parts import FOLD_CHARS, ShownPart, held_shown, json_text, show_part

__all__ = [
    "FOLD_CHARS",
    "ShownPart",
    "held_shown",
    "json_text",
    "render_epoch_page",
    "render_notice",
    "render_report",
    "show_part",
]
