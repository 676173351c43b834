"""The one form of docs/receipt-spec.md §11: the system prompt where the provider's API puts it,
no `name` on tool messages, OpenInference's omitted arguments empty; each example of the table
there, and the receipts two records of one request mint."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from af_otel.receipts import mint_receipt
from af_otel.semconv import adapt
from af_otel.semconv.placement import wire_form

S = {"type": "text", "content": "Be brief."}
S1 = {"type": "text", "content": "One."}
U = {"type": "text", "content": "Hi"}
R = {"type": "tool_call_response", "id": "call_1", "response": "sunny"}


def _system(parts: list[Any]) -> dict[str, Any]:
    return {"role": "system", "parts": parts}


def _user(parts: list[Any], **extra: Any) -> dict[str, Any]:
    return {"role": "user", "parts": parts, **extra}


@pytest.mark.parametrize(
    ("recorded", "normalized"),
    [
        (
            {"provider": "anthropic", "messages": [_system([S]), _user([U])]},
            {"provider": "anthropic", "system": [S], "messages": [_user([U])]},
        ),
        (
            {"provider": "openai", "messages": [_system([S]), _user([U])]},
            {"provider": "openai", "messages": [_system([S]), _user([U])]},
        ),
        (
            {"provider": "anthropic", "system": [S1], "messages": [_system([S]), _user([U])]},
            {"provider": "anthropic", "system": [S1, S], "messages": [_user([U])]},
        ),
        (
            {"messages": [{"role": "tool", "name": "get_weather", "parts": [R]}]},
            {"messages": [{"role": "tool", "parts": [R]}]},
        ),
        (
            {"messages": [_user([U], name="ann")]},
            {"messages": [_user([U], name="ann")]},
        ),
        (
            {"provider": "anthropic", "messages": [_user([U]), _system([S])]},
            {"provider": "anthropic", "messages": [_user([U]), _system([S])]},
        ),
        (
            {"provider": "openai", "system": [S], "messages": [_user([U])]},
            {"provider": "openai", "system": [], "messages": [_system([S]), _user([U])]},
        ),
        (
            {"provider": "openai", "system": [S1], "messages": [_system([S]), _user([U])]},
            {
                "provider": "openai",
                "system": [],
                "messages": [_system([S1]), _system([S]), _user([U])],
            },
        ),
        (
            {"provider": "langgraph", "system": [S], "messages": [_user([U])]},
            {"provider": "langgraph", "system": [S], "messages": [_user([U])]},
        ),
        (
            {"system": [S], "messages": [_user([U])]},
            {"system": [S], "messages": [_user([U])]},
        ),
    ],
)
def test_the_examples_of_the_spec(recorded: dict[str, Any], normalized: dict[str, Any]) -> None:
    assert wire_form(recorded) == normalized


def test_the_responses_apis_instructions_stay_a_field() -> None:
    """On the Responses API ``instructions`` is a field of its own on the wire: a record that
    holds it as ``system`` keeps it there, whichever way the record shows the API."""
    recorded = {"provider": "openai", "system": [S], "messages": [_user([U])]}
    for attributes in (
        {"openai.api.type": "responses"},
        {"llm.invocation_parameters": '{"model": "gpt-5", "instructions": "Be brief."}'},
    ):
        assert wire_form(recorded, attributes) == recorded
    assert wire_form(recorded, {"openai.api.type": "chat_completions"})["system"] == []


_parts = st.lists(st.fixed_dictionaries({"type": st.just("text"), "content": st.text()}))


@given(system=_parts, leading=_parts, name=st.text(min_size=1))
def test_both_places_mint_one_receipt(system: list[Any], leading: list[Any], name: str) -> None:
    """An Anthropic request recorded with its prompt as a field, or as a leading message, and with
    or without `name` on its tool message, mints the same receipt fields."""
    turns = [_user([U]), {"role": "tool", "parts": [R]}]
    as_field = {"provider": "anthropic", "system": system + leading, "messages": turns}
    named = [_user([U]), {"role": "tool", "name": name, "parts": [R]}]
    as_message = {"provider": "anthropic", "system": system, "messages": [_system(leading), *named]}
    a = mint_receipt(wire_form(as_field), run_id="r", epoch=1)
    b = mint_receipt(wire_form(as_message), run_id="r", epoch=1)
    assert a.system_hash == b.system_hash
    assert a.messages_chain == b.messages_chain
    assert a.digest == b.digest


def test_openinference_omits_empty_arguments() -> None:
    """OpenInference writes a call's arguments only when they are not empty: without them, the
    call had `{}` (as the wire sends), the same as a record that wrote `{}`."""
    base = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o-mini",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "Time?",
        "llm.input_messages.1.message.role": "assistant",
        "llm.input_messages.1.message.tool_calls.0.tool_call.id": "call_1",
        "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": "get_time",
    }
    written = {
        **base,
        "llm.input_messages.1.message.tool_calls.0.tool_call.function.arguments": "{}",
    }
    omitted, explicit = adapt(base, "ChatOpenAI").request, adapt(written, "ChatOpenAI").request
    assert omitted is not None
    assert omitted == explicit
    call = omitted["messages"][1]["parts"][0]
    assert call["arguments"] == "{}"


@given(system=_parts.filter(bool), named=st.text(min_size=1))
def test_an_openai_prompt_as_a_field_mints_the_leading_messages_receipt(
    system: list[Any], named: str
) -> None:
    """An OpenAI Chat Completions request recorded with its prompt as ``system`` (OpenLLMetry's
    LangChain instrumentation) mints the receipt of the record that holds it as the first message,
    which is also what that record minted before the rule (its form does not change)."""
    turns = [_user([U]), {"role": "tool", "name": named, "parts": [R]}]
    as_field = {"provider": "openai", "system": system, "messages": turns}
    as_message = {"provider": "openai", "system": [], "messages": [_system(system), *turns]}
    unchanged = {
        **as_message,
        "messages": [_system(system), _user([U]), {"role": "tool", "parts": [R]}],
    }
    a = mint_receipt(wire_form(as_field), run_id="r", epoch=1)
    b = mint_receipt(wire_form(as_message), run_id="r", epoch=1)
    c = mint_receipt(unchanged, run_id="r", epoch=1)
    assert wire_form(as_message) == unchanged
    assert a.system_hash == b.system_hash == c.system_hash
    assert a.messages_count == b.messages_count == len(turns) + 1
    assert a.messages_chain == b.messages_chain == c.messages_chain
    assert a.digest == b.digest == c.digest
