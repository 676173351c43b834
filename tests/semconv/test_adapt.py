"""`adapt` and `is_llm_call`: the convention table, the never-raise guarantee, and fuzzing with
hostile attribute mappings (wrong types, bad JSON, holes, huge and deeply nested values, objects
whose __str__/__eq__/__hash__ raise)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from af_otel import names, semconv
from af_otel.model import Request
from af_otel.semconv import (
    NOTE_ADAPTER_ERROR,
    Limits,
    adapt,
    content_keys,
    is_llm_call,
    ledger,
    record_of,
)

from .hostile import HostileMapping, attributes, hostile_value, span_name


def _check(adapted: semconv.Adapted) -> None:
    assert NOTE_ADAPTER_ERROR not in adapted.notes
    assert (adapted.request is None) == (adapted.absent_reason is not None)
    if adapted.request is not None:
        Request.from_dict(adapted.request)  # always a shape the model accepts


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attributes, span_name)
def test_adapt_never_raises_and_never_needs_its_guard(attrs: dict[Any, Any], name: str) -> None:
    """Hostile attribute values are read by total coercers: no exception, no guard, and any request
    produced is one Request.from_dict accepts."""
    _check(adapt(attrs, name))


@settings(max_examples=300, deadline=None)
@given(attributes, span_name)
def test_is_llm_call_never_raises(attrs: dict[Any, Any], name: str) -> None:
    """is_llm_call answers a bool for any mapping."""
    assert is_llm_call(attrs, name) in (True, False)


# A well-formed span of each convention, perturbed one key at a time.
def _openinference() -> dict[str, object]:
    return {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "hi",
        "llm.input_messages.1.message.role": "assistant",
        "llm.input_messages.1.message.tool_calls.0.tool_call.id": "c1",
        "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": "f",
        "llm.input_messages.1.message.tool_calls.0.tool_call.function.arguments": "{}",
        "llm.tools.0.tool.json_schema": '{"type":"function","function":{"name":"f"}}',
        "llm.invocation_parameters": '{"model":"m","temperature":0.5}',
    }


def _legacy() -> dict[str, object]:
    return {
        "llm.request.type": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "m",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "hi",
        "gen_ai.prompt.1.role": "assistant",
        "gen_ai.prompt.1.tool_calls.0.id": "c1",
        "gen_ai.prompt.1.tool_calls.0.name": "f",
        "llm.request.functions.0.name": "f",
        "llm.request.functions.0.parameters": '{"type":"object"}',
    }


def _genai() -> dict[str, object]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "m",
        "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]',
        "gen_ai.system_instructions": '[{"type":"text","content":"be brief"}]',
        "gen_ai.tool.definitions": '[{"type":"function","name":"f"}]',
    }


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([_openinference, _legacy, _genai]),
    st.data(),
    hostile_value,
)
def test_one_bad_value_in_a_real_span_never_raises(base: Any, data: Any, value: object) -> None:
    """Replacing any one attribute of a well-formed span with a hostile value yields a request or
    a reason, never an exception."""
    attrs = base()
    target = data.draw(st.sampled_from(sorted(attrs)))
    attrs[target] = value
    _check(adapt(attrs))


def _genai_by_name() -> dict[str, object]:
    """A GenAI span that lost its operation name: told an LLM call by its name and model."""
    attrs = _genai()
    del attrs["gen_ai.operation.name"]
    return attrs


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([_openinference, _legacy, _genai, _genai_by_name]),
    st.data(),
    hostile_value,
    span_name,
)
def test_no_content_value_decides_the_call_or_the_convention(
    base: Any, data: Any, value: object, name: str
) -> None:
    """The incremental path adapts a record whose messages hold only the new ones
    (`Recorded.with_content`): it keeps whether the span is an LLM call, which must be what the
    changed attributes read afresh say, whatever the content value; so must the convention."""
    attrs = base()
    recorded = record_of(attrs, name)
    key = data.draw(st.sampled_from(content_keys(recorded.attributes)))
    changed = recorded.with_content(key, value)
    fresh = record_of({**attrs, key: value}, name)
    assert changed.llm_call == fresh.llm_call
    assert changed.adapt().convention == adapt(attrs, name).convention
    assert changed.attributes[key] is value
    assert recorded.attributes[key] is attrs[key]  # the record it came from is unchanged


def test_only_a_content_value_is_replaced_in_a_record() -> None:
    """An identity key's value decides the call check: replacing it is refused."""
    recorded = record_of(_genai(), "chat m")
    with pytest.raises(ValueError):
        recorded.with_content("gen_ai.operation.name", "embeddings")


def test_hostile_mapping_is_caught_by_the_guard() -> None:
    """A mapping that raises when read is the one input the guard exists for: unreadable, noted."""
    adapted = adapt(HostileMapping(), "chat m")
    assert adapted.absent_reason == names.REASON_UNREADABLE
    assert adapted.notes == (NOTE_ADAPTER_ERROR,)
    assert is_llm_call(HostileMapping()) is False


def test_huge_values_are_read_or_refused_whole() -> None:
    """A 10 MB content attribute is parsed when it is JSON and unreadable when it is not."""
    big = "x" * 10_000_000
    as_json = json.dumps([{"role": "user", "parts": [{"type": "text", "content": big}]}])
    adapted = adapt({"gen_ai.operation.name": "chat", "gen_ai.input.messages": as_json})
    assert adapted.request is not None
    assert adapted.request["messages"] == [
        {"role": "user", "parts": [{"type": "text", "content": big}]}
    ]
    broken = adapt({"gen_ai.operation.name": "chat", "gen_ai.input.messages": as_json[:-1]})
    assert broken.absent_reason == names.REASON_UNREADABLE


def test_deep_nesting_is_unreadable_not_a_recursion_error() -> None:
    """Nesting deeper than any real message, as JSON text or as structured values, is unreadable."""
    deep_text = '[{"role":"user","parts":[{"type":"x","v":' + "[" * 100_000 + "]" * 100_000 + "}]}]"
    deep: list[Any] = []
    for _ in range(10_000):
        deep = [deep]
    structured = ({"role": "user", "parts": [{"type": "x", "v": deep}]},)
    for value in (deep_text, structured):
        adapted = adapt({"gen_ai.input.messages": value})
        assert adapted.absent_reason == names.REASON_UNREADABLE
        assert NOTE_ADAPTER_ERROR not in adapted.notes


def test_cyclic_structured_value_is_unreadable() -> None:
    """A structured attribute value that contains itself is unreadable."""
    cycle: list[Any] = []
    cycle.append(cycle)
    adapted = adapt({"gen_ai.input.messages": [{"role": "user", "parts": cycle}]})
    assert adapted.absent_reason == names.REASON_UNREADABLE


def test_convention_table_picks_by_the_keys_each_instrumentation_writes() -> None:
    """OpenInference wins over gen_ai.* it also writes; OpenLLMetry's markers mark its GenAI keys;
    indexed prompts mark its legacy era; anything else is read as the GenAI conventions."""
    both = {**_openinference(), **_genai()}
    assert adapt(both).convention == "openinference"
    assert adapt(_legacy()).convention == "openllmetry-legacy"
    assert adapt({**_genai(), "gen_ai.is_streaming": False}).convention == "openllmetry"
    assert adapt(_genai()).convention == "genai"
    assert adapt({}).convention == "genai"
    assert adapt({}).absent_reason == names.REASON_NOT_CAPTURED


def test_llm_calls_of_every_convention_are_recognized_and_others_are_not() -> None:
    """Chat, completion and generate-content spans are LLM calls in every convention; embeddings,
    tools, agents and chains are not."""
    yes = [
        ({"gen_ai.operation.name": "chat"}, ""),
        ({"gen_ai.operation.name": "text_completion"}, ""),
        ({"gen_ai.operation.name": "generate_content"}, ""),
        ({"openinference.span.kind": "LLM"}, "ChatCompletion"),
        ({"llm.request.type": "chat"}, "openai.chat"),
        ({"llm.request.type": "completion"}, "openai.completion"),
        ({"gen_ai.request.model": "m"}, "chat m"),  # operation name evicted by span limits
    ]
    no = [
        ({"gen_ai.operation.name": "embeddings"}, "embeddings m"),
        ({"gen_ai.operation.name": "execute_tool"}, "execute_tool f"),
        ({"gen_ai.operation.name": "invoke_agent"}, "invoke_agent a"),
        ({"openinference.span.kind": "EMBEDDING"}, ""),
        ({"openinference.span.kind": "TOOL"}, ""),
        ({"openinference.span.kind": "CHAIN"}, ""),
        ({"llm.request.type": "embedding"}, "openai.embeddings"),
        ({}, "chat m"),
        ({}, ""),
    ]
    assert [is_llm_call(attrs, name) for attrs, name in yes] == [True] * len(yes)
    assert [is_llm_call(attrs, name) for attrs, name in no] == [False] * len(no)


def test_content_keys_name_every_content_attribute_and_no_pointer() -> None:
    """content_keys lists the content-bearing keys present (of any convention), not `_ref`s."""
    attrs = {
        **_openinference(),
        "input.value": "{}",
        "output.value": "{}",
        "llm.output_messages.0.message.content": "x",
        "gen_ai.output.messages": "[]",
        "gen_ai.input.messages_ref": "file:///x",
    }
    keys = adapt(attrs).content_keys
    assert set(keys) == {
        "llm.input_messages.0.message.role",
        "llm.input_messages.0.message.content",
        "llm.input_messages.1.message.role",
        "llm.input_messages.1.message.tool_calls.0.tool_call.id",
        "llm.input_messages.1.message.tool_calls.0.tool_call.function.name",
        "llm.input_messages.1.message.tool_calls.0.tool_call.function.arguments",
        "llm.tools.0.tool.json_schema",
        "input.value",
        "output.value",
        "llm.output_messages.0.message.content",
        "gen_ai.output.messages",
    }


def test_public_names() -> None:
    """The package exports exactly its documented surface."""
    assert set(semconv.__all__) == {name for name in semconv.__all__ if hasattr(semconv, name)}
    assert {"Adapted", "adapt", "is_llm_call"} <= set(semconv.__all__)


def test_adapters_import_without_opentelemetry() -> None:
    """The adapters are pure: they import with every opentelemetry module blocked."""
    import subprocess
    import sys

    code = "import sys; sys.modules['opentelemetry'] = None; import af_otel.semconv"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def _genai_span(text: str) -> dict[str, object]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": text}]}]
        ),
        "gen_ai.output.messages": "y" * 200,
    }


def test_a_record_the_span_limits_may_have_cut_is_no_request() -> None:
    """Dropped attributes, or a request value as long as the length limit, give content-cut and
    name the limit; a response value at the limit, or no limits, cut nothing."""
    attrs = _genai_span("hello")
    assert adapt(attrs, limits=Limits()).request is not None
    evicted = adapt(attrs, limits=Limits(max_attributes=4, dropped_attributes=1))
    assert (evicted.request, evicted.absent_reason, evicted.cut) == (
        None,
        names.REASON_CUT,
        ledger.CUT_COUNT,
    )
    size = len(str(attrs["gen_ai.input.messages"]))
    at_limit = adapt(attrs, limits=Limits(max_value_length=size))
    assert (at_limit.absent_reason, at_limit.cut) == (names.REASON_CUT, ledger.CUT_LENGTH)
    assert adapt(attrs, limits=Limits(max_value_length=size + 1)).request is not None
    # The SDK cut a longer value to exactly the limit: it no longer parses, and is still "cut".
    cut_json = {**attrs, "gen_ai.input.messages": str(attrs["gen_ai.input.messages"])[:20]}
    assert adapt(cut_json, limits=Limits(max_value_length=20)).absent_reason == names.REASON_CUT
    assert adapt(cut_json).absent_reason == names.REASON_UNREADABLE
    # The response is not the request: a response value at the limit cuts nothing.
    assert adapt(attrs, limits=Limits(max_value_length=200)).request is not None
