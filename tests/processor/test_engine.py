"""The enrichment core: epochs in start order, parents for fan-out, contiguous commit sequences,
and commits that fold back into exactly each call's request."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from af_otel import names
from af_otel.model import Request
from af_otel.processor import run
from af_otel.processor.history import carries_history
from tests.processor.conftest import Pipeline, make_pipeline
from tests.processor.helpers import (
    SYSTEM,
    TOOLS,
    af,
    assistant,
    chat,
    commits,
    end_attributes,
    llm_spans,
    start_chat,
    states,
    stored,
    user,
)


def _by_epoch(pipeline: Pipeline) -> dict[int, Any]:
    return {af(s)[names.EPOCH]: s for s in llm_spans(pipeline.spans())}


def test_fan_out_calls_share_their_parent(pipeline: Pipeline) -> None:
    """Calls that overlap are numbered by start and share the call that finished before them."""
    tracer = pipeline.tracer
    with tracer.start_as_current_span("agent"):
        chat(tracer, [user("plan")])
        a = start_chat(tracer)
        b = start_chat(tracer)
        c = start_chat(tracer)
        # They end in another order than they started.
        c.set_attributes(end_attributes([user("plan"), user("c")]))
        c.end()
        a.set_attributes(end_attributes([user("plan"), user("a")]))
        a.end()
        b.set_attributes(end_attributes([user("plan"), user("b")]))
        b.end()
        chat(tracer, [user("plan"), user("a"), user("b"), user("c")])
    spans = _by_epoch(pipeline)
    assert {e: af(s)[names.EPOCH_PARENT] for e, s in spans.items()} == {
        1: 0,
        2: 1,
        3: 1,
        4: 1,
        5: 2,  # a (epoch 2) holds the longest prefix of epoch 5's messages; b finished last
    }
    assert spans[2].context.span_id == a.get_span_context().span_id
    for epoch in (2, 3, 4):
        (commit,) = commits(spans[epoch])
        assert commit[names.COMMIT_VERB] == "append"
    seqs = [c[names.COMMIT_SEQ] for s in llm_spans(pipeline.spans()) for c in commits(s)]
    assert sorted(seqs) == list(range(1, len(seqs) + 1))
    folded = states(pipeline.spans(), pipeline.store)
    assert [m["parts"][0]["content"] for m in folded[5]["messages"]] == ["plan", "a", "b", "c"]
    assert [m["parts"][0]["content"] for m in folded[3]["messages"]] == ["plan", "b"]


def test_threads_mixing_runs_keep_each_run_contiguous(pipeline: Pipeline) -> None:
    """Many threads, each its own run, interleaving: epochs 1..n and seqs without holes per run."""
    turns = 8

    def agent(run_id: str) -> None:
        with run(run_id):
            history = [user("start")]
            for turn in range(turns):
                chat(pipeline.tracer, history)
                history = [*history, assistant(f"{run_id}-{turn}"), user("next")]

    threads = [threading.Thread(target=agent, args=(f"run-{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    by_run: dict[str, list[Any]] = {}
    for span in llm_spans(pipeline.spans()):
        by_run.setdefault(af(span)[names.RUN_ID], []).append(span)
    assert len(by_run) == 8
    for spans in by_run.values():
        assert sorted(af(s)[names.EPOCH] for s in spans) == list(range(1, turns + 1))
        seqs = sorted(c[names.COMMIT_SEQ] for s in spans for c in commits(s))
        assert seqs == list(range(1, len(seqs) + 1))
        assert all(af(s)[names.RECEIPT_STATE] == names.STATE_MINTED for s in spans)


def test_asyncio_tasks_each_see_their_own_run(pipeline: Pipeline) -> None:
    """The explicit run follows asyncio tasks through contextvars."""

    async def agent(run_id: str) -> None:
        with run(run_id):
            for turn in range(3):
                chat(pipeline.tracer, [user(f"{run_id}-{turn}")])
                await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(*(agent(f"task-{i}") for i in range(5)))

    asyncio.run(main())
    by_run: dict[str, list[int]] = {}
    for span in llm_spans(pipeline.spans()):
        by_run.setdefault(af(span)[names.RUN_ID], []).append(af(span)[names.EPOCH])
    assert {k: sorted(v) for k, v in by_run.items()} == {f"task-{i}": [1, 2, 3] for i in range(5)}


def test_declared_base_is_the_parent_of_the_first_call(pipeline: Pipeline) -> None:
    """af_otel.run(base=...) stores the base; the first call diffs against it."""
    base = {"system": SYSTEM, "messages": [user("old"), assistant("older")], "tools": TOOLS}
    with run("resumed", base=base):
        chat(pipeline.tracer, [user("old"), assistant("older"), user("new")])
    (span,) = llm_spans(pipeline.spans())
    address = af(span)[names.RUN_BASE]
    found = stored(pipeline.store, address)
    assert isinstance(found, dict)
    assert Request.from_dict(found) == Request.from_dict(base)
    assert af(span)[names.EPOCH_PARENT] == 0
    assert af(span)[names.RECEIPT_MESSAGES_KEPT] == 2
    keys = [(c[names.COMMIT_KEY], c[names.COMMIT_VERB]) for c in commits(span)]
    assert keys == [
        ("messages", "append"),
        ("params", "set"),
        ("model", "set"),
        ("provider", "set"),
    ]


def test_carries_history_rule() -> None:
    """Earlier turns are an assistant or tool message, a tool result, or a second user message."""
    assert not carries_history(Request.from_dict({"messages": [user("a")]}))
    system_message = {"role": "system", "parts": [{"type": "text", "content": "s"}]}
    assert not carries_history(Request.from_dict({"messages": [system_message, user("a")]}))
    assert carries_history(Request.from_dict({"messages": [user("a"), user("b")]}))
    assert carries_history(Request.from_dict({"messages": [user("a"), assistant("b")]}))
    tool_result = {
        "role": "user",
        "parts": [{"type": "tool_call_response", "id": "1", "response": "r"}],
    }
    assert carries_history(Request.from_dict({"messages": [tool_result]}))


_text = st.text(alphabet="abc", min_size=0, max_size=3)
_message = st.builds(
    lambda role, text: {"role": role, "parts": [{"type": "text", "content": text}]},
    st.sampled_from(["user", "assistant"]),
    _text,
)
_step = st.one_of(
    st.tuples(st.just("append"), st.lists(_message, min_size=0, max_size=3)),
    st.tuples(st.just("rewrite"), st.lists(_message, min_size=1, max_size=3)),
    st.tuples(st.just("system"), _text),
    st.tuples(st.just("tools"), st.booleans()),
    st.tuples(st.just("temperature"), st.one_of(st.none(), st.floats(0, 2, allow_nan=False))),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    first=st.lists(_message, min_size=1, max_size=4),
    steps=st.lists(_step, max_size=8),
    inline_limit=st.sampled_from([0, 64, 1024]),
)
def test_commits_fold_back_into_every_request(
    store: Any, first: list[Any], steps: list[Any], inline_limit: int
) -> None:
    """Folding each call's commits onto its parent's state gives exactly that call's request."""
    pipeline = make_pipeline(store, inline_limit=inline_limit)
    messages = first
    system: list[Any] | None = SYSTEM
    tools: list[Any] | None = TOOLS
    temperature: float | None = 0.5
    expected: list[dict[str, Any]] = []
    with pipeline.tracer.start_as_current_span("agent"):
        for kind, value in [("append", []), *steps]:
            if kind == "append":
                messages = [*messages, *value]
            elif kind == "rewrite":
                messages = value
            elif kind == "system":
                system = [{"type": "text", "content": value}] if value else None
            elif kind == "tools":
                tools = TOOLS if value else None
            else:
                temperature = value
            chat(pipeline.tracer, messages, system=system, tools=tools, temperature=temperature)
            request = {
                "system": system,
                "messages": messages,
                "tools": tools,
                "params": {"temperature": temperature},
                "model": "gpt-4o-mini",
                "provider": "anthropic",
            }
            expected.append(Request.from_dict(request).to_dict())
    spans = pipeline.spans()
    base_address = next((af(s).get(names.RUN_BASE) for s in llm_spans(spans)), None)
    base = stored(store, base_address) if base_address else None
    folded = states(spans, store, base)
    for epoch, want in enumerate(expected, start=1):
        assert Request.from_dict(folded[epoch]) == Request.from_dict(want)
    pipeline.provider.shutdown()
