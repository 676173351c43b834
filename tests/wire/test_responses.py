"""Verdicts against what the model saw on OpenAI's Responses API: the real openai client's
``client.responses.create`` (plain and streamed) under each instrumentation, against the loopback
server's ``/v1/responses``, which holds history per response id (responses_server.py).

For every epoch: `verified` means the served view is the context the model saw, held history
included; any other verdict differs from it only where a gap on the epoch names the field.
Comparison is item by item (the Responses API has no turns): each input item is one message of
one part, and a function call is compared by its ``call_id``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import pytest

import af_otel
from af_otel import names
from af_otel.reader.verify import VerdictStatus
from tests.wire.convert import Comparable, Difference, _choice, differences, from_view
from tests.wire.harness import (
    _GENAI_CONTENT,
    Scenario,
    replayed,
    run_agent,
    unnamed_differences,
)
from tests.wire.responses_server import Seen, input_items
from tests.wire.server import WireServer

CALLS: Final = 17
# The calls whose answer is `incomplete` (max_output_tokens below the server's threshold): the
# first plain, the second streamed.
INCOMPLETE: Final = (7, 16)
FAILED: Final = 17  # names a response the server does not hold: HTTP 400
# Calls OpenLLMetry writes no span for: an incomplete answer, unless it was streamed.
_NO_SPAN: Final = INCOMPLETE[:1]
# The stateless call that carries the incomplete answer of the call before it.
AFTER_INCOMPLETE: Final = 8
HELD_FROM: Final = 9  # the first call of the conversation continued by previous_response_id
_NOT_DIALS: Final = frozenset(
    {"model", "input", "instructions", "tools", "stream", "include", "previous_response_id"}
    | {"metadata", "user"}
)

SCENARIOS: Final = (
    Scenario("responses-genai", "genai-openai", profile="responses", env_vars=_GENAI_CONTENT),
    Scenario(
        "responses-genai-hook",
        "genai-openai",
        profile="responses",
        env_vars={"OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK": "af_otel"},
    ),
    Scenario("responses-openinference", "openinference-openai", profile="responses"),
    Scenario("responses-openllmetry", "openllmetry-openai", profile="responses"),
)


# -- what the model saw, comparable --------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(block.get("text", "")) for block in content or ())


def _item(item: Mapping[str, Any], system: list[str]) -> tuple[str, tuple[Any, ...]] | None:
    kind = item.get("type", "message")
    if kind == "message":
        role = item["role"]
        if role in ("system", "developer"):
            system.append(_text(item.get("content")))
            return None
        return role, (("text", _text(item.get("content"))),)
    if kind == "function_call":
        call = ("tool_call", item["call_id"], item["name"], json.loads(item["arguments"]))
        return "assistant", (call,)
    if kind == "function_call_output":
        return "tool", (("tool_result", item["call_id"], _text(item["output"]), False),)
    if kind == "reasoning":
        summary = "".join(str(s.get("text", "")) for s in item.get("summary") or ())
        return "assistant", (("thinking", summary, item.get("encrypted_content") or None),)
    return "assistant", (("other", kind),)


def from_seen(seen: Sequence[Mapping[str, Any]], instructions: str | None, body: Any) -> Comparable:
    """The context the model saw (``seen``: its items, held history first) as one comparable."""
    system = [instructions] if instructions else []
    messages = [m for m in (_item(i, system) for i in seen) if m is not None]
    tools = tuple(
        (t["name"], t.get("description"), t.get("parameters")) for t in body.get("tools") or ()
    )
    params: dict[str, Any] = {}
    for key, value in body.items():
        if key in _NOT_DIALS or value is None:
            continue
        if key == "max_output_tokens":
            params["max_tokens"] = value
        elif key == "tool_choice":
            params["tool_choice"] = _choice(value)
        elif key == "reasoning":
            params |= {f"reasoning_{k}": v for k, v in value.items()}
        elif key == "text":
            params["response_format"] = value["format"]
        else:
            params[key] = value
    return Comparable(tuple(system), tuple(messages), tools, body.get("model"), params)


def _flat(comparable: Comparable) -> Comparable:
    """One message a part (a served turn may hold a call and reasoning together)."""
    flat = []
    for role, parts in comparable.messages:
        for part in parts:
            if part != ("text", ""):
                flat.append(("tool" if part[0] == "tool_result" else role, (part,)))
    return replace(comparable, messages=tuple(flat))


def _no_thinking(messages: Sequence[Any]) -> list[Any]:
    return [m for m in messages if m[1][0][0] != "thinking"]


def _no_bare_arguments(wire: Sequence[Any], view: Sequence[Any]) -> list[Any]:
    """``wire`` with each call's arguments as the view shows them where the view shows none."""
    out = []
    for (role, parts), (_, shown) in zip(wire, view, strict=False):
        a, b = parts[0], shown[0]
        bare = a[0] == b[0] == "tool_call" and b[3] is None and a[:3] == b[:3]
        out.append((role, (b,) if bare else parts))
    return out + list(wire[len(view) :])


def _no_call_ids(messages: Sequence[Any]) -> list[Any]:
    return [
        (r, tuple(p[:1] + p[2:] if p[0] == "tool_call" else p for p in ps)) for r, ps in messages
    ]


def compare(
    seen: Comparable,
    request: Comparable,
    served: Comparable,
    wire_tools: Sequence[Mapping[str, Any]],
    view_tools: Sequence[Mapping[str, Any]] | None,
) -> list[Difference]:
    """How the served view differs from what the model saw, each kind once: held history not
    shown, reasoning items left out, calls under another id, a tool's `strict`, else as the Chat
    Completions comparison says."""
    found: list[Difference] = []
    held = len(seen.messages) - len(request.messages)
    if held > 0:
        found.append(Difference("messages", f"{held} held items", "not shown", 0, "held history"))
    wire, view = list(request.messages), list(served.messages)
    rest = [d for d in differences(request, served) if d.field != "messages"]
    if wire != view and len(wire) == len(view) and _no_bare_arguments(wire, view) == view:
        found.append(Difference("messages", wire, view, None, "tool call arguments"))
        wire = view
    if wire != view:
        if _no_thinking(wire) != _no_thinking(view) and _no_call_ids(
            _no_thinking(wire)
        ) == _no_call_ids(_no_thinking(view)):
            found.append(Difference("messages", wire, view, None, "tool call id"))
            wire, view = _no_call_ids(wire), _no_call_ids(view)
        if _no_thinking(wire) == _no_thinking(view) and wire != view:
            found.append(Difference("messages", wire, view, None, "reasoning items"))
        elif wire != view:
            found += [d for d in differences(request, served) if d.field == "messages"]
    view_strict = [bool(t.get("strict")) for t in view_tools or ()]
    wire_strict = [bool(t.get("strict")) for t in wire_tools]
    if view_strict != wire_strict:
        found.append(Difference("tools", wire_strict, view_strict, None, "strict"))
    return found + rest


@dataclass(frozen=True)
class Epoch:
    epoch: int
    wire_seq: int
    status: str
    gaps: tuple[tuple[str, str], ...]
    differences: tuple[Difference, ...]
    unnamed: tuple[Difference, ...]
    minted: bool
    # The view's held history: (epoch or None, response id) per call the server held, oldest first.
    held: tuple[tuple[int | None, str], ...] = ()
    opens_with: str = "message"  # the type of the request's first input item
    source: object = None  # af.receipt.source: wire or instrumentation
    record_differs: tuple[str, ...] = ()  # af.record.differs
    replay: str = ""  # `replay` held to the logged body (tests.wire.harness.replayed)


def run_responses(scenario: Scenario, tmp: Path) -> tuple[int, list[Epoch]]:
    with WireServer() as server:
        run_agent(scenario, tmp, server.port)
        requests = {r.span_id: r for r in server.requests}
        by_seq = {r.seq: r for r in server.requests}
        seen: dict[int, Seen] = dict(server.responses.seen)
        count = len(server.requests)
    spans = list(af_otel.read_spans(tmp / "trace.jsonl"))
    answered = {s.span_id: s.attributes.get("gen_ai.response.id") for s in spans}
    sources = {s.span_id: s.attributes.get(names.RECEIPT_SOURCE) for s in spans}
    views = af_otel.served_views(spans, store=tmp / "store")
    matched = {}
    for view in views:
        wire = requests.get(view.span_id)
        answer = answered[view.span_id]
        if wire is None and isinstance(answer, str):  # no span current while it went out
            wire = by_seq[int(answer.removeprefix("resp_w"))]
        if wire is not None:
            matched[view.span_id] = wire
    # A span with neither (a failed call under OpenLLMetry): the one request left, if one is.
    left = [r for r in by_seq.values() if r not in matched.values() and r.seq not in _NO_SPAN]
    epochs = []
    for view in views:
        if view.span_id not in matched:
            assert len(left) == 1, f"span {view.span_id} matches no single request"
            matched[view.span_id] = left.pop()
        wire = matched[view.span_id]
        context = seen[wire.seq]
        full = _flat(from_seen(context.items, context.instructions, wire.body))
        only = _flat(from_seen(input_items(wire.body), context.instructions, wire.body))
        served = _flat(from_view(view))
        found = tuple(compare(full, only, served, wire.body.get("tools") or (), view.tools))
        verdict = af_otel.verify(view)
        gaps = tuple((g.kind, g.detail) for g in view.gaps)
        unnamed = unnamed_differences(found, gaps, verdict.status)
        epochs.append(
            Epoch(
                view.epoch,
                wire.seq,
                str(verdict.status),
                gaps,
                found,
                unnamed,
                view.minted,
                tuple((h.epoch, h.response_id) for h in view.held),
                input_items(wire.body)[0]["type"],
                sources[view.span_id],
                view.record_differs,
                replayed(view, wire, tmp / "store"),
            )
        )
    return count, epochs


def _account(epochs: Sequence[Epoch]) -> str:
    lines = []
    for e in epochs:
        lines.append(f"epoch {e.epoch} wire #{e.wire_seq} {e.status} gaps {[k for k, _ in e.gaps]}")
        for d in e.differences:
            flag = "UNNAMED " if d in e.unnamed else ""
            overclaim = "OVERCLAIM " if e.status == VerdictStatus.VERIFIED else ""
            lines.append(
                f"  {overclaim}{flag}{d.field} {d.aspect}: {str(d.wire)[:120]} / {str(d.served)[:120]}"
            )
    return "\n".join(lines)


@pytest.mark.instrumentation
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_no_responses_epoch_claims_more_than_the_model_saw(
    scenario: Scenario, tmp_path: Path
) -> None:
    """Seventeen Responses calls, stateless and continued by previous_response_id, plain and
    streamed, incomplete and failed: no verified epoch differs from the context the model saw, every difference
    elsewhere is named by a gap, every span written carries a receipt minted from the body its
    client sent, every stateless call verifies (the one after a call that left no span too) with its
    served view and `served --request` the logged body, and a call that left no span is named on
    the call that carries its answer."""
    count, epochs = run_responses(scenario, tmp_path)
    account = _account(epochs)
    assert count == CALLS
    missing = scenario.instrumentation == "openllmetry-openai"
    if missing:
        # OpenLLMetry writes no span for a plain incomplete response, one for a streamed one
        # (docs/instrumentations.md).
        assert sorted(e.wire_seq for e in epochs) == [
            s for s in range(1, CALLS + 1) if s not in _NO_SPAN
        ], account
    else:
        assert len(epochs) == CALLS, account
    assert not [d for e in epochs if e.status == VerdictStatus.VERIFIED for d in e.differences], (
        account
    )
    assert not [d for e in epochs for d in e.unnamed], account
    assert all(e.minted for e in epochs), account  # incomplete and failed calls too
    # `served --request`: a verified call from the wire is its logged body exactly (RFC 8785,
    # nothing left out); from a record, in one spelling, saying so; any other call refused (the
    # continued ones by server-held-history).
    for e in epochs:
        if e.status != VerdictStatus.VERIFIED:
            assert e.replay.startswith("refused: "), (e.wire_seq, e.replay)
        elif e.source == names.SOURCE_WIRE:
            assert e.replay == "equal", (e.wire_seq, e.replay)
        else:
            assert e.replay.startswith("not exact: "), (e.wire_seq, e.replay)
    # Every call is minted from the body its client sent, under every instrumentation: where the
    # instrumentation's span is current while the request goes out, at once; OpenLLMetry's,
    # made after the response, by a late claim its record vouches for once the body is seen as
    # OpenLLMetry keeps a Responses request (no reasoning items, no tool call's item id:
    # `openllmetry.responses_kept`). So a call's earlier response id is on record (the body
    # names it) whatever the instrumentation.
    assert {e.source for e in epochs} == {names.SOURCE_WIRE}, account
    continued = [e.replay for e in epochs if e.wire_seq > HELD_FROM]
    assert all("server-held-history" in r for r in continued), continued
    # The call after the incomplete one carries its cut answer: with that call's span missing,
    # two model turns since its parent name the hole; with every span there, nothing does.
    holes = {e.wire_seq for e in epochs for k, _ in e.gaps if k == "unrecorded-call"}
    # That hole is about another call: this one's receipt came from its own body, which the
    # served view equals, so it verifies with the gap standing as a caveat.
    (after,) = [e for e in epochs if e.wire_seq == AFTER_INCOMPLETE]
    assert after.status == VerdictStatus.VERIFIED, account
    held = [e for e in epochs if e.wire_seq > HELD_FROM]  # every call continued by its id
    # A continued response no call answered is the same hole.
    expected = {AFTER_INCOMPLETE} if missing else set()
    assert holes == expected | {FAILED}, account
    assert all(e.status != VerdictStatus.VERIFIED for e in held), account
    # The tell-tale every convention shows: a continued request that opens with a tool result
    # carries server-held-history; a stateless one never.
    telling = {e.wire_seq for e in held if e.opens_with == "function_call_output"}
    assert len(telling) == 4, account  # calls 10, 12, 14 and 16 answer the call before them
    marked = {e.wire_seq for e in epochs for k, _ in e.gaps if k == "server-held-history"}
    assert telling <= marked, account
    assert not {s for s in marked if s <= HELD_FROM}, account
    stateless = [e for e in epochs if e.wire_seq <= HELD_FROM]
    if scenario.instrumentation in ("genai-openai", "openllmetry-openai"):
        # genai-openai and OpenLLMetry leave replayed reasoning items out of their record:
        # stateless calls that replay them say the record differs from the body on the messages
        # (and on nothing else); the tap's body is the truth, so they verify all the same.
        differ = {e.wire_seq for e in epochs if "messages" in e.record_differs}
        assert differ, account
        assert differ <= {e.wire_seq for e in stateless}, account
        assert not {f for e in epochs for f in e.record_differs} - {"messages"}, account
    else:
        assert not [e for e in epochs if e.record_differs], account
    # Each call that holds no history on the server verifies, its served view the logged body
    # (no difference) and `served --request` that body exactly, the call after OpenLLMetry's
    # missing span too. Nothing passes by verifying nothing.
    whole = stateless
    assert len(whole) == HELD_FROM - (len(_NO_SPAN) if missing else 0), account
    assert all(e.status == VerdictStatus.VERIFIED for e in whole), account
    assert all(not e.differences and e.replay == "equal" for e in whole), account
    # the earlier response id is on record: the gap names it, and the call that answered
    details = [d for e in held for k, d in e.gaps if k == "server-held-history"]
    assert len(details) == len(held), account
    linked = [
        d for e in held for k, d in e.gaps if k == "server-held-history" and e.wire_seq != FAILED
    ]
    assert all("resp_w" in d and "of epoch" in d for d in linked), account
    # each continued call links every earlier call of the conversation, oldest first, by
    # its epoch (one less than its wire number after a call that left no span)
    epoch_of = {e.wire_seq: e.epoch for e in epochs}
    for e in held:
        if e.wire_seq != FAILED:
            chain = [(epoch_of[s], f"resp_w{s}") for s in range(HELD_FROM, e.wire_seq)]
            assert list(e.held) == chain, (e.wire_seq, e.held)
    # the last continued call: the server held every call of the conversation before it
    (last,) = [
        d for e in held for k, d in e.gaps if k == "server-held-history" and e.wire_seq == CALLS - 1
    ]
    earlier = ", ".join(str(epoch_of[s]) for s in range(HELD_FROM, CALLS - 1))
    assert f"epochs {earlier}, in that order" in last, last
    assert "from its start" in last, last
    failed = [d for e in held for k, d in e.gaps if e.wire_seq == FAILED]
    assert any("resp_gone" in d and "not in this run" in d for d in failed), account
    (gone,) = [e.held for e in held if e.wire_seq == FAILED]
    assert gone == ((None, "resp_gone"),), gone


def main() -> None:
    """Print the verdict table of every Responses scenario (``python -m tests.wire.test_responses``)."""
    import tempfile

    print(
        "| scenario | calls | spans | minted | verified | reconstructed | damaged | overclaims "
        "| unnamed | unrecorded-call at |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for scenario in SCENARIOS:
        with tempfile.TemporaryDirectory() as directory:
            count, epochs = run_responses(scenario, Path(directory))
        statuses = [sum(1 for e in epochs if e.status == s) for s in VerdictStatus]
        overclaims = sum(1 for e in epochs if e.status == VerdictStatus.VERIFIED and e.differences)
        print(
            f"| {scenario.name} | {count} | {len(epochs)} | {sum(e.minted for e in epochs)} | "
            + " | ".join(map(str, statuses))
            + f" | {overclaims} | {sum(len(e.unnamed) for e in epochs)} | "
            + (", ".join(f"call {e.wire_seq}" for e in epochs if _hole(e)) or "none")
            + " |"
        )


def _hole(epoch: Epoch) -> bool:
    return any(k == "unrecorded-call" for k, _ in epoch.gaps)


if __name__ == "__main__":
    main()
