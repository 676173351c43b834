"""Which request fields a record can lack, and when lacking one matters for a request."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
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


@given(
    st.sampled_from(fields.NON_REASONING_MODELS),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.:", max_size=20),
    st.sampled_from(["", "ft:"]),
)
def test_reasoning_effort_does_not_matter_for_a_known_non_reasoning_family(
    family: str, rest: str, prefix: str
) -> None:
    """gpt-4*, gpt-3.5*, chatgpt-4o* (also fine-tuned) take no reasoning_effort: a record without
    it hides nothing, and the provider chose no default for it."""
    request = _request(provider="openai", model=prefix + family + rest)
    assert "reasoning_effort" not in fields.unrecorded(request, {fields.MODEL})
    assert "reasoning_effort" not in fields.defaulted(
        {}, "openai", tools=False, model=request.model
    )


@given(st.text(max_size=20).filter(fields.takes_reasoning_effort))
@example("o3-mini")
@example("o1")
@example("gpt-5")
@example("my-azure-deployment")
def test_reasoning_effort_matters_for_any_other_model(model: str) -> None:
    """Any model not of a known non-reasoning family (o3-mini, gpt-5, a deployment name) may have
    been sent reasoning_effort: a record without it names it."""
    request = _request(provider="openai", model=model or None)
    assert "reasoning_effort" in fields.unrecorded(request, {fields.MODEL})
    assert "reasoning_effort" in fields.defaulted({}, "openai", tools=False, model=model)


def test_reasoning_effort_matters_when_the_model_is_off_the_record() -> None:
    """The model shown is not the request model (or none is): the family excuses nothing."""
    for model in ("o3-mini", "gpt-5", "my-azure-deployment", "gpt-4o-mini"):
        request = _request(provider="openai", model=model)
        assert "reasoning_effort" in fields.unrecorded(request, set())
        assert "reasoning_effort" in fields.defaulted(
            {}, "openai", tools=False, unrecorded_fields=(fields.MODEL,), model=model
        )
    assert "reasoning_effort" in fields.unrecorded(_request(provider="openai"), {fields.MODEL})


def test_which_models_take_reasoning_effort() -> None:
    """The rule each way: known non-reasoning families do not; reasoning models, unknown names
    and a missing model do."""
    for model in ("gpt-4o-mini", "GPT-4o", "gpt-4.1", "gpt-3.5-turbo", "chatgpt-4o-latest"):
        assert not fields.takes_reasoning_effort(model), model
    assert not fields.takes_reasoning_effort("ft:gpt-4o-mini-2024-07-18:org::abc")
    for other in ("o1", "o3-mini", "o4-mini", "gpt-5", "gpt-5-mini", "gpt4o", "deployment", ""):
        assert fields.takes_reasoning_effort(other), other
    assert fields.takes_reasoning_effort(None)
