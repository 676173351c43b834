"""Conversation (af_otel/model/conversation.py): an append-only, frozen history for `llm_call`."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from af_otel import Conversation
from af_otel.canonical import canonical_json
from af_otel.errors import RequestShapeError
from af_otel.model import FrozenDict, Request

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


def _tool_call(arguments: Any) -> dict[str, Any]:
    part = {"type": "tool_call", "id": "c", "name": "f", "arguments": arguments}
    return {"role": "assistant", "parts": [part]}


def test_add_leaves_the_earlier_conversation_as_it_was() -> None:
    """add gives a new conversation holding the earlier one's very messages, then the new ones."""
    first = Conversation([{"role": "user", "content": "a"}])
    second = first.add({"role": "assistant", "content": "b"})
    assert len(first) == 1
    assert len(second) == 2
    assert second[0] is first[0]
    assert type(second) is Conversation


def test_nothing_in_a_conversation_can_change() -> None:
    """The caller's dicts are copied: changing them later changes nothing, and the messages
    refuse changes at every depth (dicts are FrozenDict, lists tuples)."""
    arguments = {"a": [1, {"b": 2}]}
    message = _tool_call(arguments)
    conversation = Conversation([message])
    arguments["a"][1]["b"] = 3  # type: ignore[index]
    message["role"] = "user"
    held = conversation[0]
    assert held["role"] == "assistant"
    assert held["parts"][0]["arguments"] == {"a": (1, {"b": 2})}
    with pytest.raises(TypeError):
        held["parts"][0]["arguments"]["a"][1]["b"] = 4
    assert type(held["parts"][0]["arguments"]["a"][1]) is FrozenDict


@given(_JSON)
def test_freezing_changes_no_canonical_json(arguments: Any) -> None:
    """A message in a conversation canonicalizes to the bytes the list's normalized message does."""
    message = _tool_call(arguments)
    (listed,) = Request.from_dict({"messages": [message]}).messages
    (held,) = Conversation([message])
    assert canonical_json(held) == canonical_json(listed)


def test_a_message_that_is_not_one_raises_where_it_is_added() -> None:
    """A malformed message raises RequestShapeError from add, naming its place."""
    conversation = Conversation([{"role": "user", "content": "a"}])
    with pytest.raises(RequestShapeError, match=r"messages\[1\]"):
        conversation.add({"content": "no role"})
