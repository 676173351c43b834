"""Which request fields a record can lack, and when lacking one matters for a request."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from af_otel.model import Request, fields

TOOL = {"type": "function", "name": "lookup"}


def _request(**extra: Any) -> Request:
    return Request.from_dict({"messages": [{"role": "user", "content": "hi"}], **extra})


def test_tool_settings_matter_only_with_tools_or_tools_off_the_record() -> None:
    """tool_choice is unrecorded when the request has tools, or when its tools are unrecorded."""
    plain = _request(provider="openai")
    recorded = {fields.TOOLS}
    assert "tool_choice" not in fields.unrecorded(plain, recorded)
    assert "tool_choice" in fields.unrecorded(_request(provider="openai", tools=[TOOL]), recorded)
    assert "tool_choice" in fields.unrecorded(plain, set())


def test_a_provider_without_a_field_never_misses_it() -> None:
    """Anthropic has no seed or penalties; OpenAI has no top_k, thinking or tool error flag."""
    anthropic = fields.unrecorded(_request(provider="anthropic"), set())
    assert not {"seed", "frequency_penalty", "presence_penalty", "choice_count"} & set(anthropic)
    assert {"temperature", "thinking", "top_k"} <= set(anthropic)
    openai = fields.unrecorded(_request(provider="openai"), set())
    assert not {"top_k", "thinking", fields.TOOL_ERROR, fields.SIGNATURE} & set(openai)
    assert {"seed", "response_format", "reasoning_effort"} <= set(openai)


def test_part_flags_matter_only_when_their_part_is_there() -> None:
    """A tool result's error flag matters only with a tool result; a signature only with
    reasoning; both only at Anthropic."""
    result = {"role": "user", "parts": [{"type": "tool_call_response", "id": "1", "response": 1}]}
    thought = {"role": "assistant", "parts": [{"type": "thinking", "content": "t"}]}
    bare = _request(provider="anthropic")
    assert fields.TOOL_ERROR not in fields.unrecorded(bare, set())
    with_parts = Request.from_dict({"messages": [thought, result], "provider": "anthropic"})
    assert {fields.TOOL_ERROR, fields.SIGNATURE} <= set(fields.unrecorded(with_parts, set()))


def test_a_false_error_flag_is_the_default() -> None:
    """is_error false normalizes to absent; true is kept and changes the request."""
    part = {"type": "tool_call_response", "id": "1", "response": "boom"}
    quiet = Request.from_dict({"messages": [{"role": "user", "parts": [part]}]})
    false = Request.from_dict(
        {"messages": [{"role": "user", "parts": [{**part, "is_error": False}]}]}
    )
    true = Request.from_dict(
        {"messages": [{"role": "user", "parts": [{**part, "is_error": True}]}]}
    )
    assert quiet == false
    assert quiet != true


def test_steering_settings_join_params() -> None:
    """tool_choice none, parallel_tool_calls, response_format, reasoning effort and thinking
    are kept as given; an unknown key is still dropped."""
    params = {
        "tool_choice": "none",
        "parallel_tool_calls": False,
        "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}},
        "reasoning_effort": "high",
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "user": "someone",
    }
    got = dict(_request(params=params).params)
    assert got == {k: v for k, v in params.items() if k != "user"}


@given(st.sets(st.sampled_from(fields.FIELDS)), st.sampled_from(["openai", "anthropic", None]))
def test_unrecorded_and_defaulted_never_overlap(recorded: set[str], provider: str | None) -> None:
    """A field is either off the record or a provider default, never both, and never recorded."""
    request = _request(provider=provider, tools=[TOOL]) if provider else _request(tools=[TOOL])
    missing = fields.unrecorded(request, recorded)
    defaults = fields.defaulted(request.params, provider, tools=True, unrecorded_fields=missing)
    assert not set(missing) & recorded
    assert not set(missing) & set(defaults)
