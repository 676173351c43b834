"""The normalized request: equal requests normalize equal whatever their spelling, shape errors name
the field, and the plain form is what the receipt measures."""

from __future__ import annotations

import copy
import json
import pickle
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from af_otel import Request, canonical_json
from af_otel.errors import RequestShapeError
from af_otel.model import FrozenDict, forced_tool
from af_otel.model.request import PARAM_KEYS, shape_request

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=10)
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), _text),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3)),
    max_leaves=8,
)
_args = st.dictionaries(_text, _json, max_size=4)


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """A GenAI-shaped request in its plainest spelling: no nulls, arguments as objects."""
    messages = []
    for index in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["text", "call", "response", "other"]))
        if kind == "text":
            part: dict[str, Any] = {"type": "text", "content": draw(_text)}
        elif kind == "call":
            part = {"type": "tool_call", "id": f"c{index}", "name": "f", "arguments": draw(_args)}
        elif kind == "response":
            part = {"type": "tool_call_response", "id": f"c{index}", "response": draw(_json)}
        else:
            part = {"type": "weird", "payload": draw(_json)}
        message: dict[str, Any] = {"role": draw(st.sampled_from(["user", "assistant", "tool"]))}
        message["parts"] = [part]
        if draw(st.booleans()):
            message["name"] = draw(_text)
        messages.append(message)
    request: dict[str, Any] = {"messages": messages}
    if draw(st.booleans()):
        request["system"] = [{"type": "text", "content": draw(_text.filter(bool))}]
    if draw(st.booleans()):
        request["tools"] = [
            {"type": "function", "name": "f", "description": draw(_text), "parameters": draw(_args)}
        ]
    params = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "temperature": st.floats(0, 2),
                "max_tokens": st.integers(1, 1000),
                "seed": st.integers(0, 99),
                "stop_sequences": st.lists(_text, min_size=1, max_size=2),
                "tool_choice": st.sampled_from(["auto", "required", "f"]),
            },
        )
    )
    if params:
        request["params"] = params
    if draw(st.booleans()):
        request["model"] = draw(_text)
    if draw(st.booleans()):
        request["provider"] = draw(_text)
    return request


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: _shuffled(item, rng) for key, item in items}
    if isinstance(value, list):
        return [_shuffled(item, rng) for item in value]
    return value


def _respelled(request: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The same request as another instrumentation might spell it: null optionals, arguments as a
    JSON string, OpenAI-nested tools, result instead of response, string content and system."""
    out = copy.deepcopy(request)
    out.setdefault("model", None)
    out["temperature_extra"] = "ignored: not a request key"
    for message in out["messages"]:
        message.setdefault("name", None)
        parts = message["parts"]
        for part in parts:
            part["extra_null"] = None
            if part["type"] == "tool_call" and rng.random() < 0.7:
                part["arguments"] = json.dumps(part["arguments"], indent=rng.choice([None, 2]))
            if part["type"] == "tool_call_response" and rng.random() < 0.5:
                part["result"] = part.pop("response")
        if len(parts) == 1 and parts[0]["type"] == "text" and rng.random() < 0.5:
            message["content"] = parts[0]["content"]
            del message["parts"]
    if "system" in out and rng.random() < 0.5:
        out["system"] = out["system"][0]["content"]
    tools = out.get("tools")
    if tools and rng.random() < 0.5:
        out["tools"] = [
            {"type": "function", "function": {**tool, "strict": None}} for tool in tools
        ]
    params = out.setdefault("params", {})
    params["top_k"] = None
    params["not_a_dial"] = 3
    if "stop_sequences" in params and len(params["stop_sequences"]) == 1 and rng.random() < 0.5:
        params["stop_sequences"] = params["stop_sequences"][0]
    return _shuffled(out, rng)


class TestNormalization:
    @given(request=requests(), seed=st.integers(0, 2**32))
    @settings(max_examples=150)
    def test_spellings_normalize_equal(self, request: dict[str, Any], seed: int) -> None:
        """Key order, null optionals, argument encoding and tool nesting do not change the request."""
        other = _respelled(request, random.Random(seed))
        assert Request.from_dict(other) == Request.from_dict(request)
        assert canonical_json(Request.from_dict(other).to_dict()) == canonical_json(
            Request.from_dict(request).to_dict()
        )

    @given(request=requests(), seed=st.integers(0, 2**32))
    @settings(max_examples=100)
    def test_the_shape_the_adapters_hand_on_normalizes_alike(
        self, request: dict[str, Any], seed: int
    ) -> None:
        """`shape_request` (the adapters' form) is the reading step of normalization: a request
        read by it normalizes to the same request, with or without reading it again
        (`Request.from_shaped` does not), and reading it again changes nothing."""
        other = _respelled(request, random.Random(seed))
        shaped = shape_request(other)
        assert Request.from_dict(shaped) == Request.from_dict(request)
        assert Request.from_shaped(shaped) == Request.from_dict(request)
        assert shape_request(shaped) == shaped
        assert all(set(m) <= {"role", "parts", "name"} for m in shaped["messages"])
        assert all("function" not in tool for tool in shaped.get("tools", ()))

    @given(request=requests())
    @settings(max_examples=100)
    def test_normalizing_twice_changes_nothing(self, request: dict[str, Any]) -> None:
        """A normalized request's plain form normalizes to the same request."""
        once = Request.from_dict(request)
        assert Request.from_dict(once.to_dict()) == once

    def test_roles_and_part_types_are_held_once(self) -> None:
        """Two requests parsed from separate JSON share their role and part type strings (a run
        holds thousands of messages), and stay equal to the values they were read from."""
        text = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
        one, other = (Request.from_dict(json.loads(text)) for _ in range(2))
        assert one == other
        assert one.messages[0]["role"] is other.messages[0]["role"] == "user"
        assert one.messages[0]["parts"][0]["type"] is other.messages[0]["parts"][0]["type"]

    def test_openai_tools_flatten(self) -> None:
        """{"type":"function","function":{...}} becomes {"type":"function","name",...}."""
        nested = {
            "type": "function",
            "function": {"name": "lookup", "description": "d", "parameters": {"type": "object"}},
        }
        request = Request.from_dict({"tools": [nested, {"name": "plain"}]})
        assert request.tools == (
            {
                "type": "function",
                "name": "lookup",
                "description": "d",
                "parameters": {"type": "object"},
            },
            {"type": "function", "name": "plain"},
        )
        assert request.tool_names == ("lookup", "plain")

    def test_anthropic_input_schema_is_parameters(self) -> None:
        """A tool in Anthropic's shape normalizes equal to the same tool in OpenAI's shape."""
        schema = {"type": "object", "properties": {"city": {"type": "string"}}}
        anthropic = {"name": "get_weather", "description": "d", "input_schema": schema}
        openai = {
            "type": "function",
            "function": {"name": "get_weather", "description": "d", "parameters": schema},
        }
        assert Request.from_dict({"tools": [anthropic]}) == Request.from_dict({"tools": [openai]})
        both = {"name": "t", "parameters": {"a": 1}, "input_schema": {"b": 2}}
        assert Request.from_dict({"tools": [both]}).tools[0]["input_schema"] == {"b": 2}

    def test_unknown_part_types_kept(self) -> None:
        """A part of a type af_otel does not know is kept exactly, nulls inside it included."""
        part = {"type": "image_sketch", "strokes": [1, 2, {"z": None}], "meta": {"k": None}}
        request = Request.from_dict({"messages": [{"role": "user", "parts": [part]}]})
        assert request.messages[0]["parts"] == (part,)

    def test_free_form_nulls_kept_schema_nulls_dropped(self) -> None:
        """Nulls inside arguments, responses and schemas are content; nulls of schema keys are not."""
        call = {
            "type": "tool_call",
            "id": "c",
            "name": "f",
            "arguments": {"x": None},
            "extra": None,
        }
        request = Request.from_dict(
            {"messages": [{"role": "assistant", "parts": [call], "name": None}]}
        )
        assert request.messages[0] == {
            "role": "assistant",
            "parts": ({"type": "tool_call", "id": "c", "name": "f", "arguments": {"x": None}},),
        }

    def test_unparseable_argument_string_kept(self) -> None:
        """Tool-call arguments that are not valid JSON stay the string they were."""
        call = {"type": "tool_call", "id": "c", "name": "f", "arguments": "{not json"}
        request = Request.from_dict({"messages": [{"role": "assistant", "parts": [call]}]})
        assert request.messages[0]["parts"][0]["arguments"] == "{not json"

    def test_content_shapes(self) -> None:
        """String content is one text part; list content is the parts; bare strings are text parts."""
        as_string = Request.from_dict({"messages": [{"role": "user", "content": "hi"}]})
        as_list = Request.from_dict({"messages": [{"role": "user", "content": ["hi"]}]})
        as_parts = Request.from_dict(
            {"messages": [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]}
        )
        parts_as_string = Request.from_dict({"messages": [{"role": "user", "parts": "hi"}]})
        assert as_string == as_list == as_parts == parts_as_string

    def test_system_shapes(self) -> None:
        """System as a string is one text part; an empty string, None or [] is no system."""
        assert Request.from_dict({"system": "be brief"}).system == (
            {"type": "text", "content": "be brief"},
        )
        for empty in ("", None, []):
            assert Request.from_dict({"system": empty}).system == ()

    def test_params_keep_only_set_dials(self) -> None:
        """Params keep the gen_ai.request dials and tool_choice that are set, nothing else."""
        raw = dict.fromkeys(PARAM_KEYS, 1) | {"stop_sequences": ["x"], "top_k": None, "user": "u"}
        params = Request.from_dict({"params": raw}).params
        assert set(params) == set(PARAM_KEYS) - {"top_k"}
        assert Request.from_dict({"params": {"stop_sequences": "END"}}).params == {
            "stop_sequences": ["END"]
        }

    def test_empty_collections_equal_absent(self) -> None:
        """Empty system, tools and params are the same request as absent ones."""
        assert Request.from_dict({"system": [], "tools": [], "params": {}}) == Request.from_dict({})


class TestPlainForm:
    def test_to_dict_keys(self) -> None:
        """messages always; system, tools, params when non-empty; model, provider when set."""
        assert Request.from_dict({}).to_dict() == {"messages": []}
        full = Request.from_dict(
            {
                "system": "s",
                "messages": [{"role": "user", "content": "m"}],
                "tools": [{"name": "t"}],
                "params": {"seed": 1},
                "model": "gpt",
                "provider": "openai",
            }
        ).to_dict()
        assert list(full) == ["messages", "system", "tools", "params", "model", "provider"]

    def test_values_are_frozen(self) -> None:
        """Schema-level values refuse mutation but compare, hash, copy and pickle as dicts."""
        request = Request.from_dict({"messages": [{"role": "user", "content": "m"}]})
        message = request.messages[0]
        with pytest.raises(TypeError):
            message["role"] = "x"  # type: ignore[index]
        with pytest.raises(TypeError):
            message.update(role="x")
        assert message == {"role": "user", "parts": ({"type": "text", "content": "m"},)}
        assert hash(FrozenDict(a=1)) == hash(FrozenDict(a=True))  # equal dicts, equal hashes
        assert pickle.loads(pickle.dumps(request)) == request
        assert copy.deepcopy(request) == request
        assert hash(request) == hash(Request.from_dict(request.to_dict()))


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        ([], "request"),
        ({"messages": "hello"}, "messages"),
        ({"messages": [{"content": "no role"}]}, "messages[0]"),
        ({"messages": [{"role": "user"}, 3]}, "messages[1]"),
        ({"messages": [{"role": "user", "parts": {"type": "text"}}]}, "messages[0].parts"),
        (
            {"messages": [{"role": "user", "parts": [{"content": "no type"}]}]},
            "messages[0].parts[0]",
        ),
        ({"messages": [{"role": "user", "parts": ["ok", 7]}]}, "messages[0].parts[1]"),
        ({"messages": [{"role": "user", "content": 42}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "name": 5}]}, "messages[0]"),
        ({"system": [{"type": "text"}, {"no": "type"}]}, "system[1]"),
        ({"system": 5}, "system"),
        ({"tools": [{"description": "no name"}]}, "tools[0]"),
        ({"tools": [{"name": "f"}, {"name": "g", "type": 5}]}, "tools[1]"),
        (
            {"messages": [{"role": "user"}, {"role": "user", "parts": ["ok", 7]}]},
            "messages[1].parts[1]",
        ),
        ({"tools": {"name": "f"}}, "tools"),
        ({"params": [1]}, "params"),
        ({"params": {"stop_sequences": 5}}, "params.stop_sequences"),
        ({"model": 5}, "model"),
        ({"provider": ["p"]}, "provider"),
    ],
)
def test_shape_errors_name_the_field(request_: Any, field: str) -> None:
    """A request that is not GenAI-shaped raises RequestShapeError naming the offending field."""
    with pytest.raises(RequestShapeError) as caught:
        Request.from_dict(request_)
    assert str(caught.value).startswith(field + ":")


@pytest.mark.parametrize(
    ("choice", "forced"),
    [
        (None, None),
        ("auto", None),
        ("none", None),
        ("", None),
        ("required", "required"),
        ("any", "required"),
        ("lookup", "lookup"),
        ({"type": "function", "function": {"name": "lookup"}}, "lookup"),
        ({"type": "tool", "name": "lookup"}, "lookup"),
        ({"type": "any"}, "required"),
        ({"type": "auto"}, None),
        (3, None),
    ],
)
def test_forced_tool(choice: object, forced: str | None) -> None:
    """tool_choice in each provider's spelling reads as the forced tool's name, "required" or None."""
    assert forced_tool(choice) == forced
    params = {} if choice is None else {"tool_choice": choice}
    assert Request.from_dict({"params": params}).forced_tool() == forced
