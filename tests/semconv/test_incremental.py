"""Reading only what is new (af_otel/semconv/incremental.py) gives the full path's evidence.

Two engines see the same calls of one run: one reads each call's tail after the run's last call,
the other is made to read every call in full. Every attribute and commit event must be equal,
over random histories that grow, branch, get edited in the middle, change key order or JSON
layout, in both attribute shapes (the GenAI JSON array and OpenInference's indexed attributes).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import blake3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from af_otel.model import Request
from af_otel.processor import commits
from af_otel.processor.engine import CallFacts, Engine, Enrichment
from af_otel.processor.run_table import Finished, RunState
from af_otel.processor.settings import resolve_settings
from af_otel.semconv import Limits, incremental, record_of, responses
from tests.without_otel import run_without

LANE = "0123456789abcdef"
RUN = "r-incremental"

texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
# Call ids that pair, miss each other, or are Responses item ids (the held-history tell-tales).
call_ids = st.sampled_from(["t1", "t2", "fc_1"])
parts = st.lists(
    st.one_of(
        st.builds(lambda c: {"type": "text", "content": c}, texts),
        st.builds(
            lambda i, n, a: {"type": "tool_call", "id": i, "name": n, "arguments": a},
            call_ids,
            texts,
            st.dictionaries(texts, st.integers() | st.booleans() | texts, max_size=2),
        ),
        st.builds(
            lambda i, r, e: {"type": "tool_call_response", "id": i, "response": r, **e},
            call_ids,
            texts,
            st.sampled_from([{}, {"is_error": True}]),
        ),
        # Reasoning, sealed (no content, or a signature) or not: the thinking-replay gap.
        st.builds(
            lambda c, sig: {"type": "reasoning", "content": c, **sig},
            texts,
            st.sampled_from([{}, {"signature": "s"}]),
        ),
    ),
    min_size=1,
    max_size=2,
)
messages = st.builds(
    lambda role, ps, name: {"role": role, "parts": ps, **({"name": name} if name else {})},
    st.sampled_from(["user", "assistant", "tool", "system"]),
    parts,
    st.none() | st.just("bob"),
)
# What happens to the history between two calls.
appends = st.tuples(st.just("append"), st.lists(messages, min_size=1, max_size=3))
steps = st.lists(
    st.one_of(
        *[appends] * 8,
        st.tuples(st.just("append"), st.just([])),
        st.tuples(st.just("edit"), st.integers(0, 50), messages),
        st.tuples(st.just("drop"), st.integers(1, 3)),
        st.tuples(st.just("reorder"), st.integers(0, 50)),
        st.tuples(st.just("layout"), st.sampled_from(["compact", "spaced", "indented"])),
        st.tuples(st.just("dials"), st.floats(0, 1, allow_nan=False)),
        # The system prompt changes, goes or comes back (the one form may put it first).
        st.tuples(st.just("system"), st.sampled_from([None, "be brief", "be long"])),
    ),
    min_size=1,
    max_size=12,
)


def dump(history: list[dict[str, Any]], layout: str) -> str:
    if layout == "compact":
        return json.dumps(history, separators=(",", ":"), ensure_ascii=False)
    if layout == "indented":
        return json.dumps(history, indent=1)
    return json.dumps(history)


def genai_attributes(
    history: list[dict[str, Any]],
    layout: str,
    temperature: float,
    system: str | None = "be brief",
    provider: str = "openai",
) -> Any:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": "m",
        "gen_ai.request.temperature": temperature,
        "gen_ai.input.messages": dump(history, layout),
    }
    if system is not None:
        attributes["gen_ai.system_instructions"] = json.dumps([{"type": "text", "content": system}])
    return attributes


def anthropic_attributes(
    history: list[dict[str, Any]], layout: str, temperature: float, system: str | None
) -> Any:
    return genai_attributes(history, layout, temperature, system, "anthropic")


def openinference_attributes(
    history: list[dict[str, Any]], layout: str, temperature: float, system: str | None = None
) -> Any:
    attributes: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "m",
        "llm.provider": "openai",
        "llm.invocation_parameters": json.dumps({"temperature": temperature}),
    }
    for index, message in enumerate(history):
        prefix = f"llm.input_messages.{index}.message."
        attributes[prefix + "role"] = message["role"]
        text = "".join(p.get("content", "") for p in message["parts"] if p["type"] == "text")
        attributes[prefix + "content"] = text
    return attributes


def apply(history: list[dict[str, Any]], step: tuple[Any, ...]) -> list[dict[str, Any]]:
    kind = step[0]
    if kind == "append":
        return [*history, *step[1]]
    if kind == "edit" and history:
        at = step[1] % len(history)
        return [*history[:at], step[2], *history[at + 1 :]]
    if kind == "drop":
        return history[: max(1, len(history) - step[1])]
    if kind == "reorder" and history:
        at = step[1] % len(history)
        flipped = dict(reversed(list(history[at].items())))
        return [*history[:at], flipped, *history[at + 1 :]]
    return history


def run_calls(engine: Engine, calls: list[Any], *, full: bool) -> list[Enrichment]:
    out = []
    for number, attributes in enumerate(calls, start=1):
        run = engine.runs.get(RUN)
        run.lane = LANE
        if full:
            run.seen = None  # nothing remembered: every call takes the full path
        facts = CallFacts(
            key=(7, number),
            name="chat m",
            start_time=number * 10,
            end_time=number * 10 + 5,
            attributes={**attributes, "af.run.id": RUN},
            scope="test",
            limits=Limits(),
        )
        out.append(engine.enrich(facts))
    return out


def engine() -> Engine:
    return Engine(resolve_settings(store=None, content="none"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    start=st.lists(messages, min_size=1, max_size=4),
    steps=steps,
    shape=st.sampled_from(["genai", "genai-anthropic", "openinference"]),
)
def test_reading_the_tail_gives_the_full_paths_evidence(
    start: list[dict[str, Any]], steps: list[tuple[Any, ...]], shape: str
) -> None:
    build = {
        "genai": genai_attributes,
        "genai-anthropic": anthropic_attributes,
        "openinference": openinference_attributes,
    }[shape]
    history, layout, temperature, system = start, "spaced", 0.5, "be brief"
    calls = [build(history, layout, temperature, system)]
    for step in steps:
        history = apply(history, step)
        if step[0] == "layout":
            layout = step[1]
        if step[0] == "dials":
            temperature = step[1]
        if step[0] == "system":
            system = step[1]
        calls.append(build(history, layout, temperature, system))
    fast = run_calls(engine(), calls, full=False)
    slow = run_calls(engine(), calls, full=True)
    for one, other in zip(fast, slow, strict=True):
        assert one.attributes == other.attributes
        assert one.events == other.events
        assert one.state == other.state


@settings(max_examples=200, deadline=None)
@given(history=st.lists(messages, max_size=8), cut=st.integers(0, 8), api=st.booleans())
def test_the_held_history_scan_folds_over_new_messages(
    history: list[dict[str, Any]], cut: int, api: bool
) -> None:
    whole = Request.from_dict({"messages": history})
    head, tail = whole.messages[:cut], whole.messages[cut:]
    folded = responses.scan(tail, responses.scan(head))
    assert folded == responses.scan(whole.messages)
    assert responses.telltale(whole, api, folded) == responses.telltale(whole, api)


def read_in_turn(texts_in_order: list[str]) -> list[incremental.Read]:
    seen: incremental.Remembered | None = None
    reads = []
    for text in texts_in_order:
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.input.messages": text,
        }
        read = incremental.read(record_of(attributes, "chat m"), Limits(), seen)
        reads.append(read)
        seen = read.seen
    return reads


def vars_of(record: Any) -> list[Any]:
    return [getattr(record, name) for name in type(record).__slots__]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def test_an_appended_message_is_the_only_one_read() -> None:
    history = [user("a"), user("b")]
    first, second = read_in_turn([json.dumps(history), json.dumps([*history, user("c")])])
    assert first.reused == 0
    assert second.reused == 2
    assert second.request is not None
    assert first.request is not None
    assert second.request.messages[:2] == first.request.messages
    assert all(
        a is b for a, b in zip(second.request.messages[:2], first.request.messages, strict=True)
    )


def test_an_edit_in_the_middle_takes_the_full_path() -> None:
    before = [user("a"), user("b"), user("c")]
    after = [user("a"), user("B"), user("c"), user("d")]
    _, edited = read_in_turn([json.dumps(before), json.dumps(after)])
    assert edited.reused == 0
    assert edited.request is not None
    assert [m["parts"][0]["content"] for m in edited.request.messages] == ["a", "B", "c", "d"]


def test_a_tail_that_does_not_read_is_read_in_full_and_says_so() -> None:
    good = json.dumps([user("a")])
    bad = good[:-1] + ', {"role": 3}]'
    _, second = read_in_turn([good, bad])
    assert second.reused == 0
    assert second.request is None
    assert second.adapted.absent_reason == "content-unreadable"


def test_a_first_call_with_an_empty_list_is_never_extended() -> None:
    # "[" + ", x]" would read as a message while "[, x]" is not JSON.
    _, second = read_in_turn(["[]", '[, {"role": "user", "parts": []}]'])
    assert second.reused == 0
    assert second.request is None


def test_span_limits_that_may_have_cut_the_text_take_the_full_path() -> None:
    history = json.dumps([user("a")])
    longer = json.dumps([user("a"), user("b")])
    first = read_in_turn([history])[0]
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": longer}
    cut = incremental.read(
        record_of(attributes, "chat m"), Limits(max_value_length=len(longer)), first.seen
    )
    assert cut.reused == 0
    assert cut.request is None
    assert cut.adapted.absent_reason == "content-cut"


@pytest.mark.parametrize("new_hash", [blake3.blake3, hashlib.sha256], ids=["blake3", "sha256"])
def test_a_long_run_remembers_a_digest_of_its_text_and_still_reads_only_the_tail(
    new_hash: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the ``fast`` extra's BLAKE3 and with the standard library's SHA-256 alike."""
    monkeypatch.setattr(incremental, "new_hash", new_hash)
    history = [user("q0")]
    texts = []
    for turn in range(1, 80):
        texts.append(json.dumps(history))
        history = [*history, user(f"a{turn}"), user(f"q{turn}")]
    reads = read_in_turn(texts)
    assert [r.reused for r in reads[1:]] == [2 * n - 1 for n in range(1, len(texts))]
    last = reads[-1].seen
    assert last is not None
    # The text before the closing bracket, as its length and digest: never the text itself.
    assert last.length == len(texts[-1]) - 1
    assert last.digest == new_hash(texts[-1][:-1].encode()).digest()
    assert not any(isinstance(value, str) and len(value) > 100 for value in vars_of(last))
    full = incremental.full(
        record_of(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "m",
                "gen_ai.input.messages": texts[-1],
            },
            "chat m",
        ),
        Limits(),
    )
    assert reads[-1].request == full.request


def test_the_last_calls_messages_are_a_proven_prefix_for_the_diff_and_the_parent() -> None:
    history = [user("a"), user("b")]
    first, second = read_in_turn([json.dumps(history), json.dumps([*history, user("c")])])
    assert first.request is not None
    assert second.request is not None
    assert second.prefix is first.request.messages
    assert first.prefix is None  # the full path proves nothing
    found = commits.changes(first.request, second.request, prefix=second.prefix)
    assert [(c.key, c.verb) for c in found] == [("messages", "append")]
    assert found[0].payload == list(second.request.messages[2:])
    # Without the proof the diff compares, and says the same.
    assert commits.changes(first.request, second.request) == found
    run = RunState("r")
    run.finish((1, 1), Finished(10, 1, first.request, None))
    assert run.parent_of(20, second.request, second.prefix) is run.finished[0]
    # An edited history read in full carries no proof: it is compared, and is no append.
    edited = read_in_turn([json.dumps([user("A"), user("b"), user("c")])])[0]
    assert edited.request is not None
    assert edited.prefix is None
    assert run.parent_of(20, edited.request, edited.prefix) is run.finished[0]  # the latest
    verbs = {c.key: c.verb for c in commits.changes(first.request, edited.request)}
    assert verbs["messages"] == "set"


def test_a_prompt_put_first_still_reads_only_the_tail() -> None:
    """An OpenAI record with its prompt in ``gen_ai.system_instructions`` (put first by the one
    form): the second call reads only its new message, and its request is the full path's."""
    history = [user("a"), user("b")]
    texts = [json.dumps(history), json.dumps([*history, user("c")])]
    seen: incremental.Remembered | None = None
    reads = []
    for text in texts:
        attributes = {**genai_attributes([], "spaced", 0.5), "gen_ai.input.messages": text}
        reads.append(incremental.read(record_of(attributes, "chat m"), Limits(), seen))
        seen = reads[-1].seen
    full = incremental.full(record_of(attributes, "chat m"), Limits())
    assert reads[1].reused == 3
    assert reads[1].request == full.request
    assert full.request is not None
    assert [m["role"] for m in full.request.messages] == ["system", "user", "user", "user"]


@settings(max_examples=25, deadline=None)
@given(at=st.integers(0, 3 * 20_000 - 1), ascii_only=st.booleans())
def test_a_long_history_is_recognised_across_hashed_pieces_and_an_edit_anywhere_is_not(
    at: int, ascii_only: bool
) -> None:
    """Texts longer than the pieces the prefix is hashed in, with characters of every width: the
    appended call reads only its tail, and a call with one character changed anywhere (here in
    the content of the earlier messages) is read in full."""
    alphabet = "ab" if ascii_only else "aé€😀"
    contents = [
        "".join(alphabet[(i * 7 + k) % len(alphabet)] for i in range(20_000)) for k in range(3)
    ]
    history = [user(c) for c in contents]
    text = json.dumps(history, ensure_ascii=False)
    appended = json.dumps([*history, user("next")], ensure_ascii=False)
    edited = list(contents)
    which, where = divmod(at, 20_000)
    edited[which] = edited[which][:where] + "Z" + edited[which][where + 1 :]
    changed = json.dumps([user(c) for c in edited] + [user("next")], ensure_ascii=False)
    _, second = read_in_turn([text, appended])
    assert second.reused == 3
    _, third = read_in_turn([text, changed])
    assert third.reused == 0
    assert third.request is not None
    assert [m["parts"][0]["content"] for m in third.request.messages][:3] == edited


def test_without_the_fast_extra_the_prefix_is_recognised_by_sha256() -> None:
    """``blake3`` is optional: without it a run's calls still read only their tail."""
    done = run_without(
        """
        import hashlib, json
        from af_otel.semconv import incremental
        from af_otel.semconv import Limits, record_of
        assert incremental.new_hash is hashlib.sha256, incremental.new_hash
        history = [{"role": "user", "content": "q0"}]
        seen, reused = None, []
        for turn in range(1, 5):
            attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                          "gen_ai.input.messages": json.dumps(history)}
            read = incremental.read(record_of(attributes, "chat m"), Limits(), seen)
            seen = read.seen
            reused.append(read.reused)
            history = [*history, {"role": "user", "content": f"q{turn}"}]
        print(reused)
        """,
        blocked="blake3",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[0,", "1,", "2,", "3]"]
