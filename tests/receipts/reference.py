"""An independent receipt minter for tests: the rules of docs/receipt-spec.md (af-1 and af-2)
written out with hashlib, hmac and the `rfc8785` package, sharing no code with af_otel's mint,
memo or hashing (it imports only the attribute names)."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import rfc8785
from hypothesis import strategies as st

from af_otel import names

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**53) + 1, 2**53 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        _text,
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3)),
    max_leaves=8,
)


def plain(value: Any) -> Any:
    """Tuples and dict subclasses as the plain lists and dicts rfc8785 takes."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def jcs(value: Any) -> bytes:
    return rfc8785.dumps(plain(value))


def h(salt: str, data: bytes, key: bytes | None = None, digits: int = 16) -> str:
    message = salt.encode() + b"\x1f" + data
    if key is None:
        return hashlib.sha256(message).hexdigest()[:digits]
    return hmac.new(key, message, hashlib.sha256).hexdigest()[:digits]


def key_ident(key: bytes) -> str:
    """af-2's key id: 16 hex digits of SHA-256 over "af.key-id.v1", 0x1f, the key."""
    return hashlib.sha256(b"af.key-id.v1\x1f" + key).hexdigest()[:16]


def forced(choice: Any) -> str | None:
    if isinstance(choice, str):
        return {"required": "required", "any": "required", "auto": None, "none": None}.get(
            choice, choice or None
        )
    if isinstance(choice, dict):
        inner = choice.get("function")
        name = inner.get("name") if isinstance(inner, dict) else choice.get("name")
        if isinstance(name, str) and name:
            return name
        if choice.get("type") in ("any", "required"):
            return "required"
    return None


def expected_attributes(
    request: dict[str, Any],
    *,
    run_id: str,
    epoch: int,
    parent: int = 0,
    parent_entries: list[str] | None = None,
    key: bytes | None = None,
    scheme: str = "af-1",
    span: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The af.receipt.* attributes of a *normalized* plain request (``Request.to_dict()``), in
    ``scheme`` ``af-1`` or ``af-2`` (keyed with ``key``). ``span`` holds, for af-2, the span's
    other bound attributes by their wire names (af.gaps, af.receipt.unrecorded,
    af.receipt.source, af.receipt.scope.name, af.receipt.scope.version,
    af.receipt.parent_digest, af.epoch.lane, af.run.base, af.held_history)."""
    af2 = scheme == "af-2"
    digits = 64 if af2 else 16
    system = request.get("system", [])
    messages = request["messages"]
    tools = request.get("tools", [])
    params = request.get("params", {})

    def hh(data: bytes) -> str:
        return h(run_id, data, key, digits)

    entries = [hh(jcs(message)) for message in messages]
    link = hh(b"af.messages.v1")
    for entry in entries:
        link = hh((link + "\x1f" + entry).encode())
    kept = 0
    for new, old in zip(entries, parent_entries or [], strict=False):
        if new != old:
            break
        kept += 1
    body: dict[str, Any] = {
        names.RECEIPT_SCHEME: scheme if key is None else scheme + "-hmac",
        names.RECEIPT_SYSTEM_HASH: hh(jcs(system)),
        names.RECEIPT_SYSTEM_PIECES: [hh(jcs(part)) for part in system],
        names.RECEIPT_MESSAGES_COUNT: len(messages),
        names.RECEIPT_MESSAGES_CHAIN: link,
        names.RECEIPT_MESSAGES_KEPT: kept,
        names.RECEIPT_MESSAGES_ADDED: entries[kept:],
        names.RECEIPT_TOOLS_NAMES: [tool["name"] for tool in tools],
        names.RECEIPT_TOOLS_HASHES: [hh(jcs(tool)) for tool in tools],
        names.RECEIPT_PARAMS: jcs(params).decode(),
        names.RECEIPT_BYTES: len(jcs(request)),
    }
    if "model" in request:
        body[names.RECEIPT_MODEL] = request["model"]
    if "provider" in request:
        body[names.RECEIPT_PROVIDER] = request["provider"]
    if forced(params.get("tool_choice")) is not None:
        body[names.RECEIPT_TOOLS_FORCED] = forced(params.get("tool_choice"))
    preimage = {**body, names.EPOCH: epoch, names.EPOCH_PARENT: parent}
    if af2:
        bound = dict(span or {})
        body[names.RECEIPT_UNRECORDED] = list(bound.get(names.RECEIPT_UNRECORDED, []))
        body[names.RECEIPT_SOURCE] = bound.get(names.RECEIPT_SOURCE, "instrumentation")
        optional = {
            names.RECEIPT_SCOPE_NAME: bound.get(names.RECEIPT_SCOPE_NAME, ""),
            names.RECEIPT_SCOPE_VERSION: bound.get(names.RECEIPT_SCOPE_VERSION, ""),
            names.RECEIPT_PARENT_DIGEST: bound.get(names.RECEIPT_PARENT_DIGEST, ""),
            names.RECEIPT_KEY_ID: key_ident(key) if key is not None else "",
        }
        body.update({name: value for name, value in optional.items() if value})
        preimage = {
            **body,
            **optional,
            names.EPOCH: epoch,
            names.EPOCH_PARENT: parent,
            names.EPOCH_LANE: bound.get(names.EPOCH_LANE, ""),
            names.GAPS: list(bound.get(names.GAPS, [])),
            names.RUN_BASE: bound.get(names.RUN_BASE, ""),
            names.HELD_HISTORY: bound.get(names.HELD_HISTORY, ""),
        }
    return {
        names.RECEIPT_STATE: "minted",
        **body,
        names.RECEIPT_DIGEST: hh(jcs(preimage)),
    }


def entries_of(
    request: dict[str, Any], run_id: str, key: bytes | None = None, digits: int = 16
) -> list[str]:
    return [h(run_id, jcs(message), key, digits) for message in request["messages"]]


@st.composite
def requests(draw: st.DrawFn, values: st.SearchStrategy[Any] = json_values) -> dict[str, Any]:
    """Already-normalized GenAI requests (what ``Request.from_dict(...).to_dict()`` gives back
    for them), floats and nulls inside the free-form content included."""
    messages = []
    for index in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["text", "call", "response", "reasoning", "other"]))
        if kind == "text":
            part: dict[str, Any] = {"type": "text", "content": draw(_text)}
        elif kind == "call":
            arguments = draw(st.dictionaries(_text, values, max_size=3))
            part = {"type": "tool_call", "id": f"c{index}", "name": "f", "arguments": arguments}
        elif kind == "response":
            part = {"type": "tool_call_response", "id": f"c{index}", "response": draw(values)}
            if draw(st.booleans()):
                part["is_error"] = True  # false is the default and is dropped
        elif kind == "reasoning":
            part = {"type": "reasoning", "content": draw(_text), "signature": draw(_text)}
        else:
            part = {"type": "weird", "payload": draw(values)}
        message: dict[str, Any] = {"role": draw(st.sampled_from(["user", "assistant", "tool"]))}
        message["parts"] = [part]
        messages.append(message)
    request: dict[str, Any] = {"messages": messages}
    system = draw(st.lists(_text.filter(bool), max_size=2))
    if system:
        request["system"] = [{"type": "text", "content": text} for text in system]
    tools = draw(st.lists(st.sampled_from(["f", "g", "lookup"]), max_size=2, unique=True))
    if tools:
        request["tools"] = [
            {
                "type": "function",
                "name": name,
                "parameters": draw(st.dictionaries(_text, values, max_size=2)),
            }
            for name in tools
        ]
    params = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "temperature": st.floats(0, 2),
                "seed": st.integers(0, 99),
                "tool_choice": st.sampled_from(
                    [
                        "auto",
                        "required",
                        "none",
                        "f",
                        {"type": "function", "function": {"name": "g"}},
                        {"type": "tool", "name": "f", "disable_parallel_tool_use": True},
                        {"type": "none"},
                    ]
                ),
                "parallel_tool_calls": st.booleans(),
                "response_format": st.builds(
                    lambda schema: {
                        "type": "json_schema",
                        "json_schema": {"name": "out", "schema": schema},
                    },
                    st.dictionaries(_text, values, max_size=2),
                ),
                "reasoning_effort": st.sampled_from(["low", "medium", "high"]),
                "thinking": st.builds(
                    lambda budget: {"type": "enabled", "budget_tokens": budget},
                    st.integers(1024, 4096),
                ),
                "stop_sequences": st.lists(_text, min_size=1, max_size=2),
            },
        )
    )
    if params:
        request["params"] = params
    if draw(st.booleans()):
        request["model"] = draw(_text)
    if draw(st.booleans()):
        request["provider"] = draw(_text)
    return json.loads(json.dumps(request))  # plain lists/dicts, as a span would carry them
