"""One real call, one epoch: a LangGraph agent under a framework and an SDK instrumentation at
once, and the anthropic client with its own spans plus an instrumentation, in both forms.

Every real request (the server's log) is one epoch whose served view is that request; the other
span of the call is folded into it (``af.epoch.same_as``), never numbered and never `no-run-log`;
receipts agree across combinations; a second instrumentation costs no second commit stream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from af_otel import names, read_spans, served_views, verify
from af_otel.cli import main
from af_otel.reader import ServedView, Verdict, VerdictStatus
from tests.agents.stack import Recorded, anthropic_agent, langgraph_agent
from tests.wire.convert import differences, from_view, from_wire

pytestmark = pytest.mark.instrumentation

COMBINATIONS = (
    "oi-langchain",
    "oi-langchain+oi-openai",
    "genai-openai+oi-langchain",
    "ol-langchain+ol-openai",  # OpenLLMetry, in its side venv
)
# Spans per real call: OpenLLMetry's langchain instrumentation suppresses its openai one's span.
SPANS_PER_CALL = {
    "oi-langchain+oi-openai": 2,
    "genai-openai+oi-langchain": 2,
    "oi-anthropic+sdk": 2,  # the anthropic SDK's own span, on by default
}
# Every receipt field says what the call was sent but the digest and (af-2) the parent's digest,
# which bind the lane (random), and af-2's record of who recorded the call: its scope and version,
# where the request was read, the fields that instrumentation does not record.
NOT_SHARED = frozenset(
    {
        names.RECEIPT_DIGEST,
        names.RECEIPT_PARENT_DIGEST,
        names.RECEIPT_SCOPE_NAME,
        names.RECEIPT_SCOPE_VERSION,
        names.RECEIPT_SOURCE,
        names.RECEIPT_UNRECORDED,
    }
)

_runs: dict[tuple[str, str], Recorded] = {}


@pytest.fixture
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    def get(combination: str, form: str) -> Recorded:
        key = (combination, form)
        if key not in _runs:
            tmp = tmp_path_factory.mktemp(f"{combination}-{form}".replace("+", "_"))
            agent = anthropic_agent if "anthropic" in combination else langgraph_agent
            _runs[key] = agent(combination, form, tmp)
        return _runs[key]

    return get


def _views(run: Recorded) -> tuple[ServedView, ...]:
    return served_views(read_spans(run.traces), store=run.store)


def _whole(view: ServedView, verdict: Verdict) -> bool:
    """Verified, or every field recomputes and only a field the instrumentation does not record
    keeps it partial (unrecorded-field); a record that names no such field is verified."""
    if verdict.status is VerdictStatus.VERIFIED:
        return True
    partial = verdict.status is VerdictStatus.RECONSTRUCTED and not verdict.mismatches
    return partial and bool(view.unrecorded) and names.GAP_UNRECORDED in verdict.reason


def _check_one_epoch_per_call(run: Recorded, combination: str) -> tuple[ServedView, ...]:
    views = _views(run)
    assert len(run.wire) >= 2
    assert [v.epoch for v in views] == list(range(1, len(run.wire) + 1))
    assert {v.run_id for v in views} == {"lc-1"}
    for view, request in zip(views, run.wire, strict=True):
        assert names.GAP_NO_RUN_LOG not in view.gap_kinds, (view.epoch, view.gaps)
        assert _whole(view, verify(view)), (view.epoch, view.unrecorded, verify(view))
        # The served view is the request on the wire, dials included.
        found = differences(from_wire(request.path, request.body), from_view(view))
        assert found == [], (view.epoch, found)
    folded = [s for s in run.spans() if _attr(s, names.EPOCH_SAME_AS) is not None]
    if SPANS_PER_CALL.get(combination, 1) == 2:
        # Every real call was recorded twice: the second record is folded into its epoch.
        assert len(folded) == len(views)
        assert all(_attr(s, names.EPOCH) is None for s in folded)
        assert all(len(v.same_call) == 1 for v in views)
        assert all(v.same_call[0].scope != v.recorded_by for v in views)
    else:
        assert folded == []
    return views


def _attr(span: dict[str, Any], key: str) -> Any:
    for attribute in span.get("attributes", []):
        if attribute["key"] == key:
            return next(iter(attribute["value"].values()))
    return None


@pytest.mark.parametrize("form", ["processor", "exporter"])
@pytest.mark.parametrize("combination", COMBINATIONS)
def test_one_epoch_per_real_call(combination: str, form: str, recorded: Any) -> None:
    run = recorded(combination, form)
    assert len(run.wire) == 10
    views = _check_one_epoch_per_call(run, combination)
    if "oi-openai" in combination:
        assert {v.recorded_by for v in views} == {"openinference.instrumentation.openai"}
    if "genai-openai" in combination:
        assert {v.recorded_by for v in views} == {"opentelemetry.instrumentation.genai.openai"}


@pytest.mark.parametrize("form", ["processor", "exporter"])
@pytest.mark.parametrize("combination", COMBINATIONS[1:])
def test_receipts_and_commits_match_the_single_instrumentation(
    combination: str, form: str, recorded: Any
) -> None:
    """Receipts agree with the framework-only run on every field both record (OpenLLMetry's
    LangChain record holds the system prompt as a field; the one form puts it first, as the
    wire does), and the run commits no more than 1.5 times its bytes."""
    single, double = recorded(COMBINATIONS[0], form), recorded(combination, form)
    differ: set[str] = set()
    for one, two in zip(_views(single), _views(double), strict=True):
        a, b = one.receipt, two.receipt
        assert a is not None
        assert b is not None
        x, y = a.to_attributes(), b.to_attributes()
        assert {names.RECEIPT_SYSTEM_HASH, names.RECEIPT_MESSAGES_CHAIN} <= x.keys() & y.keys()
        differ |= {k for k in (x.keys() & y.keys()) - NOT_SHARED if x[k] != y[k]}
    assert differ == set()
    assert single.commit_bytes() > 0  # the ratio below measures something
    assert double.commit_bytes() <= 1.5 * single.commit_bytes()


@pytest.mark.parametrize("form", ["processor", "exporter"])
def test_the_anthropic_sdks_own_spans_fold_into_the_instrumentations(
    form: str, recorded: Any
) -> None:
    run = recorded("oi-anthropic", form)
    views = _check_one_epoch_per_call(run, "oi-anthropic+sdk")
    assert {v.recorded_by for v in views} == {"openinference.instrumentation.anthropic"}
    assert {c.scope for v in views for c in v.same_call} == {"com.anthropic.sdk.python"}


@pytest.mark.parametrize("form", ["processor", "exporter"])
def test_the_anthropic_sdks_own_spans_alone_are_the_calls(form: str, tmp_path: Path) -> None:
    run = anthropic_agent("", form, tmp_path)
    assert len(run.wire) >= 2
    views = _views(run)
    assert [v.epoch for v in views] == list(range(1, len(run.wire) + 1))
    assert {v.recorded_by for v in views} == {"com.anthropic.sdk.python"}
    assert all(v.same_call == () for v in views)
    assert all(names.GAP_NO_RUN_LOG not in v.gap_kinds for v in views)


def test_served_gaps_and_the_report_show_what_they_look_at(
    recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each epoch's span name and scope, and the span folded into it, in all three outputs."""
    run = recorded("oi-langchain+oi-openai", "processor")
    source = [str(run.traces), "--store", str(run.store)]
    capsys.readouterr()
    assert main(["served", *source]) == 0
    served = capsys.readouterr().out
    assert served.count("scope openinference.instrumentation.openai") == 10
    assert served.count("same call: span") == 10
    assert "'ChatOpenAI' · scope openinference.instrumentation.langchain" in served
    assert main(["gaps", *source]) == 0
    gaps = capsys.readouterr().out
    assert "scope openinference.instrumentation.openai" in gaps
    assert "same call as 1 more span(s)" in gaps
    assert names.GAP_NO_RUN_LOG not in gaps
    page = tmp_path / "report.html"
    assert main(["report", *source, "-o", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert html.count("same call: <code>") == 10
    assert "openinference.instrumentation.langchain" in html
