"""The OpenAI Agents SDK against the wire: a two-tool agent of 8 model calls on the real
``openai-agents`` under each of its instrumentations, every epoch held against the body the
loopback server logged (tests/stacks/soa/harness.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Final

import pytest

from af_otel import names
from af_otel.cli import main
from af_otel.reader.verify import VerdictStatus
from tests.stacks.soa import envs
from tests.stacks.soa.harness import GENAI_CONTENT, Outcome, Stack, describe, run_stack

AGENT: Final = Path(__file__).resolve().parent / "agent.py"
CALLS: Final = 8
# The run an agent span without a conversation gives its calls: its trace and span id.
AGENT_SPAN_RUN: Final = re.compile(r"[0-9a-f]{32}-[0-9a-f]{16}")

TURNS: Final = 4  # the four questions of tests/stacks/soa/common.py, each a Runner.run


STACKS: Final = (
    # genai-openai-agents writes agent and tool spans; genai-openai's LLM span is current while
    # the client sends, so the wire tap reads each call's body.
    Stack(
        "openai-agents-genai",
        envs.OPENAI_AGENTS,
        AGENT,
        {"instrumentation": "genai", "api": "responses"},
        GENAI_CONTENT,
    ),
    Stack(
        "openai-agents-genai-chat",
        envs.OPENAI_AGENTS,
        AGENT,
        {"instrumentation": "genai", "api": "chat"},
        GENAI_CONTENT,
    ),
    Stack(
        "openai-agents-openinference",
        envs.OPENAI_AGENTS,
        AGENT,
        {"instrumentation": "openinference", "api": "responses"},
    ),
    # The record alone (tap off): OpenInference builds its LLM spans from the SDK's response
    # span data, whose tools, instructions and settings are the response's echo.
    Stack(
        "openai-agents-openinference-no-wire",
        envs.OPENAI_AGENTS,
        AGENT,
        {"instrumentation": "openinference", "api": "responses"},
        {"AF_OTEL_WIRE": "off"},
    ),
    Stack(
        "openai-agents-genai-no-wire",
        envs.OPENAI_AGENTS,
        AGENT,
        {"instrumentation": "genai", "api": "responses"},
        {**GENAI_CONTENT, "AF_OTEL_WIRE": "off"},
    ),
)


def _stack(name: str, instrumentation: str, **config: object) -> Stack:
    env_vars = GENAI_CONTENT if instrumentation == "genai" else {}
    settings = {"instrumentation": instrumentation, "api": "responses", **config}
    return Stack(name, envs.OPENAI_AGENTS, AGENT, settings, env_vars)


# Runs without af_otel.run, and handoffs: the conversation as the SDK names it (`group_id`,
# which genai-openai-agents records; OpenInference's `using_session`), and a triage agent that
# hands each question to the travel agent.
GENAI_TWO = _stack("openai-agents-genai-two-conversations", "genai", conversations=2)
OI_SESSION = _stack("openai-agents-openinference-session", "openinference", session=True)
OI_TWO_SESSIONS = _stack(
    "openai-agents-openinference-two-sessions", "openinference", session=True, conversations=2
)
GENAI_HANDOFF = _stack("openai-agents-genai-handoff", "genai", handoff=True)
OI_HANDOFF = _stack(
    "openai-agents-openinference-handoff", "openinference", handoff=True, session=True
)
RUN_STACKS: Final = (STACKS[0], STACKS[2], GENAI_TWO, OI_SESSION, OI_TWO_SESSIONS)
HANDOFF_STACKS: Final = (GENAI_HANDOFF, OI_HANDOFF)

_OUTCOMES: dict[str, tuple[Outcome, Path]] = {}


def _outcome(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    return _run(stack, tmp_path_factory)[0]


def _run(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> tuple[Outcome, Path]:
    """The stack's outcome and the folder of its trace (trace.jsonl) and store, run once."""
    if stack.name not in _OUTCOMES:
        folder = tmp_path_factory.mktemp(stack.name)
        _OUTCOMES[stack.name] = (run_stack(stack, folder), folder)
    return _OUTCOMES[stack.name]


def _names_conversation(stack: Stack) -> bool:
    """Whether the stack records the conversation: genai-openai-agents the SDK's ``group_id``,
    OpenInference only a ``using_session`` session."""
    return stack.config["instrumentation"] == "genai" or bool(stack.config.get("session"))


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", STACKS + HANDOFF_STACKS, ids=lambda s: s.name)
def test_one_truthful_epoch_per_model_call(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outcome = _outcome(stack, tmp_path_factory)
    account = describe(outcome)
    assert outcome.wire_requests == CALLS, account
    assert sorted(e.wire_seq for e in outcome.epochs) == list(range(1, CALLS + 1)), account
    assert not outcome.overclaims, account
    assert not outcome.unnamed, account
    assert all(e.minted for e in outcome.epochs), account
    if {e.source for e in outcome.epochs} == {names.SOURCE_WIRE}:
        assert outcome.count(VerdictStatus.VERIFIED) == CALLS, account


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", RUN_STACKS, ids=lambda s: s.name)
def test_without_af_otel_run_each_conversation_is_one_run(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Each turn is a ``Runner.run``, a trace of its own. Where the stack records the
    conversation, its four turns (8 calls) are one run named by it, and two conversations two
    runs of 4 calls each; OpenInference without a session records none, and each turn is the run
    of its root AGENT span (2 calls each)."""
    outcome = _outcome(stack, tmp_path_factory)
    account = describe(outcome)
    conversations = outcome.result["conversations"]
    runs = list(dict.fromkeys(outcome.runs))
    if _names_conversation(stack):
        assert runs == conversations, account
        per = CALLS // len(conversations)
        assert list(outcome.runs) == [c for c in conversations for _ in range(per)], account
    else:
        assert len(runs) == TURNS, account
        assert all(outcome.runs.count(run) == 2 for run in runs), account
        assert all(run is not None and AGENT_SPAN_RUN.fullmatch(run) for run in runs), account


@pytest.mark.instrumentation
@pytest.mark.parametrize("stack", HANDOFF_STACKS, ids=lambda s: s.name)
def test_a_handoff_shows_in_the_agent_tree(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """Triage hands each question to travel: each turn's first call is the triage agent's, the
    second the travel agent's, handed off from triage (OpenInference: by its handoff span, which
    is no tool run); a new turn starting at triage again is no handoff. One conversation, one
    run. ``served``, ``served --json`` and the report say the same."""
    outcome, folder = _run(stack, tmp_path_factory)
    account = describe(outcome)
    assert len(set(outcome.runs)) == 1, account
    places = [(e.agent, e.handoff_from) for e in outcome.epochs]
    assert places == [("triage", None), ("travel", "triage")] * (CALLS // 2), account
    assert not [e.tools_run for e in outcome.epochs if e.tools_run], account
    trace, store = str(folder / "trace.jsonl"), str(folder / "store")
    assert main(["served", trace, "--store", store]) == 0
    assert capsys.readouterr().out.count("handoff: triage -> travel") == CALLS // 2
    assert main(["served", trace, "--store", store, "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    handed = [(v["agent"]["name"], (v["agent"]["handoff_from"] or {}).get("name")) for v in lines]
    assert handed == places, account
    page = folder / "report.html"
    assert main(["report", trace, "--store", store, "-o", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert html.count("<li>handoff: triage -&gt; travel</li>") == CALLS // 2
