"""The fixed text of every page: its style sheet (one, inline: the pages load nothing) and the
legend's words for the terms a reader meets on it."""

from __future__ import annotations

from typing import Final

__all__ = ["LEGEND", "STYLE"]

STYLE: Final = """
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

LEGEND: Final = {
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
