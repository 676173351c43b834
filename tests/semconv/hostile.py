"""Hypothesis strategies for hostile span attributes: real keys of every convention with holed or
malformed indexes, values of wrong types, bad or deeply nested JSON, huge integers, and objects
whose __str__/__eq__/__hash__/__iter__ raise."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from hypothesis import strategies as st


class Boom(Exception):
    pass


class Raising:
    """An attribute value whose every dunder a careless adapter might call raises."""

    def __str__(self) -> str:
        raise Boom

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        raise Boom

    def __hash__(self) -> int:
        raise Boom

    def __bool__(self) -> bool:
        raise Boom

    def __len__(self) -> int:
        raise Boom

    def __iter__(self) -> Iterator[Any]:
        raise Boom


class RaisingStr(str):
    """A string that refuses to be compared, hashed, printed or iterated."""

    def __eq__(self, other: object) -> bool:
        raise Boom

    def __ne__(self, other: object) -> bool:
        raise Boom

    def __hash__(self) -> int:
        raise Boom

    def __str__(self) -> str:
        raise Boom

    def startswith(self, *args: Any, **kwargs: Any) -> bool:
        raise Boom

    def __iter__(self) -> Iterator[str]:
        raise Boom


class RaisingKey(str):
    """A key that hashes like its text but refuses comparison, printing and prefix tests."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        raise Boom

    def __ne__(self, other: object) -> bool:
        raise Boom

    def __str__(self) -> str:
        raise Boom

    def startswith(self, *args: Any, **kwargs: Any) -> bool:
        raise Boom


class RaisingList(list[Any]):
    def __iter__(self) -> Iterator[Any]:
        raise Boom


class RaisingDict(dict[str, Any]):
    def items(self) -> Any:
        raise Boom


class HostileMapping(Mapping[str, object]):
    """A mapping that fails as soon as it is read."""

    def __getitem__(self, key: str) -> object:
        raise Boom

    def __iter__(self) -> Iterator[str]:
        raise Boom

    def __len__(self) -> int:
        raise Boom


INDEXED_KEYS = [
    "gen_ai.prompt.{i}.role",
    "gen_ai.prompt.{i}.content",
    "gen_ai.prompt.{i}.tool_calls.{j}.name",
    "gen_ai.prompt.{i}.tool_calls.{j}.arguments",
    "gen_ai.prompt.{i}.tool_call_id",
    "gen_ai.prompt.{i}.user",
    "llm.request.functions.{i}.name",
    "llm.request.functions.{i}.parameters",
    "llm.request.functions.{i}.description",
    "llm.input_messages.{i}.message.role",
    "llm.input_messages.{i}.message.content",
    "llm.input_messages.{i}.message.name",
    "llm.input_messages.{i}.message.tool_call_id",
    "llm.input_messages.{i}.message.function_call_name",
    "llm.input_messages.{i}.message.contents.{j}.message_content.type",
    "llm.input_messages.{i}.message.contents.{j}.message_content.text",
    "llm.input_messages.{i}.message.contents.{j}.message_content.image.image.url",
    "llm.input_messages.{i}.message.tool_calls.{j}.tool_call.id",
    "llm.input_messages.{i}.message.tool_calls.{j}.tool_call.function.name",
    "llm.input_messages.{i}.message.tool_calls.{j}.tool_call.function.arguments",
    "llm.tools.{i}.tool.json_schema",
    "llm.tools.{i}.tool.name",
    "llm.tools.{i}.tool.parameters",
    "llm.prompts.{i}.prompt.text",
]
PLAIN_KEYS = [
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.system",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.request.temperature",
    "gen_ai.request.max_tokens",
    "gen_ai.request.stop_sequences",
    "gen_ai.request.choice.count",
    "gen_ai.input.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.input.messages_ref",
    "gen_ai.tool.definitions_ref",
    "gen_ai.is_streaming",
    "llm.request.type",
    "llm.frequency_penalty",
    "openinference.span.kind",
    "llm.invocation_parameters",
    "llm.model_name",
    "llm.provider",
    "llm.system",
    "input.value",
]

# GenAI-shaped JSON with wrong types sprinkled in, so parsing succeeds and shape checks are hit.
json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(
                ["role", "parts", "type", "content", "name", "id", "arguments", "response",
                 "result", "function", "parameters", "input_schema", "tool_choice", "model", "n",
                 "stop", "temperature", "max_tokens", "text", "url"]
            ) | st.text(max_size=4),
            inner,
            max_size=5,
        ),
    ),
    max_leaves=20,
)  # fmt: skip
placeholder = st.sampled_from(["__REDACTED__", "REDACTED", "[redacted]", "****", "<REDACTED>"])
role = st.sampled_from(["system", "user", "assistant", "tool", "LLM", "chat", "completion"])
hostile_leaf = st.one_of(
    json_leaf,
    role,
    placeholder,
    st.floats(),  # NaN and infinities
    st.integers(min_value=-(2**200), max_value=2**200),
    st.binary(max_size=8),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3),
    st.builds(Raising),
    st.builds(RaisingStr, st.sampled_from(["chat", "LLM", "x", "[]", "__REDACTED__"])),
    json_value.map(json.dumps),
    json_value.map(lambda v: json.dumps(v)[:-1]),  # truncated JSON
    st.integers(min_value=1, max_value=5000).map(lambda n: "[" * n + "]" * n),  # deep nesting
    st.builds(frozenset, st.lists(st.integers(), max_size=3)),
)
hostile_value = st.recursive(
    hostile_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.lists(inner, max_size=3).map(RaisingList),
        st.dictionaries(st.text(max_size=5), inner, max_size=3),
        st.dictionaries(st.text(max_size=5), inner, max_size=3).map(RaisingDict),
    ),
    max_leaves=8,
)
index = st.one_of(st.integers(0, 3), st.sampled_from(["-1", "x", "01", "9999999", "²"]))
indexed_key = st.builds(
    lambda template, i, j: template.format(i=i, j=j), st.sampled_from(INDEXED_KEYS), index, index
)
key = st.one_of(
    st.sampled_from(PLAIN_KEYS),
    indexed_key,
    st.text(max_size=12),
    st.builds(RaisingKey, st.sampled_from(PLAIN_KEYS)),
    st.integers(),
)


def _mapping(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for name, value in pairs:
        try:
            out[name] = value
        except Boom:  # two keys with one hash: the RaisingKey refused the comparison
            continue
    return out


attributes = st.lists(st.tuples(key, hostile_value), max_size=12).map(_mapping)
span_name = st.one_of(st.text(max_size=12), st.sampled_from(["chat gpt", "openai.chat"]))
