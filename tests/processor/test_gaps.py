"""Gap kinds known at export, each rule on its own."""

from __future__ import annotations

from typing import Any

from af_otel import names
from af_otel.model import Request
from af_otel.model.fields import defaulted
from af_otel.processor.export_gaps import captured_at_sdk, gaps_of
from af_otel.reader.gaps import CAUSE_NOT_COMMITTED, gap, order_gaps
from af_otel.receipts import mint_receipt

ALL_DIALS = {
    "temperature": 0.1,
    "max_tokens": 10,
    "top_p": 1,
    "top_k": 5,
    "stop_sequences": ["x"],
    "seed": 1,
    "frequency_penalty": 0,
    "presence_penalty": 0,
    "choice_count": 1,
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "response_format": {"type": "text"},
    "reasoning_effort": "low",
    "thinking": {"type": "disabled"},
}
ANTHROPIC_DIALS = {
    "temperature": 0.1,
    "max_tokens": 10,
    "top_p": 1,
    "top_k": 5,
    "stop_sequences": ["x"],
    "thinking": {"type": "enabled", "budget_tokens": 1024},
}


def _gaps(request: dict[str, Any], **kwargs: Any) -> list[str]:
    normalized = Request.from_dict(request)
    receipt = mint_receipt(normalized, run_id="r", epoch=1)
    options = {"dropped": False, "direct_capture": True, "order_unknown": False, **kwargs}
    return gaps_of(receipt=receipt, request=normalized, **options)


def _user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "parts": list(parts)}


def test_provider_defaults_unless_every_dial_is_set() -> None:
    """Any dial left unset raises provider-defaults; all of them set lifts it."""
    text = {"type": "text", "content": "hi"}
    assert _gaps({"messages": [_user(text)]}) == [names.GAP_PROVIDER_DEFAULTS]
    assert _gaps({"messages": [_user(text)], "params": ALL_DIALS}) == []


def test_provider_defaults_lists_only_the_dials_the_provider_has() -> None:
    """Anthropic has no seed or penalties: its every dial set lifts the gap; tool settings count
    only when the request has tools."""
    text = {"type": "text", "content": "hi"}
    request = {"messages": [_user(text)], "params": ANTHROPIC_DIALS, "provider": "anthropic"}
    assert _gaps(request) == []
    tools = [{"type": "function", "name": "answer"}]
    assert _gaps({**request, "tools": tools}) == [names.GAP_PROVIDER_DEFAULTS]
    normalized = Request.from_dict({**request, "tools": tools})
    unset = defaulted(normalized.params, "anthropic", tools=True)
    assert unset == ("tool_choice",)
    openai = defaulted({}, "openai", tools=False)
    assert "seed" in openai
    assert not {"top_k", "thinking", "tool_choice"} & set(openai)


def test_unrecorded_fields_and_cut_records_have_their_gaps() -> None:
    """Fields the instrumentation cannot record raise unrecorded-field (and leave provider-defaults
    to the fields it does record); a cut record raises span-limits."""
    text = {"type": "text", "content": "hi"}
    request = {"messages": [_user(text)], "params": ALL_DIALS}
    assert _gaps(request, unrecorded=("tools",)) == [names.GAP_UNRECORDED]
    assert gaps_of(
        receipt=None,
        request=None,
        dropped=False,
        direct_capture=True,
        order_unknown=False,
        cut=True,
    ) == [names.GAP_SPAN_LIMITS, names.GAP_NO_RECEIPT]


def test_forced_tool_without_its_schema() -> None:
    """tool_choice naming a tool that is not in tools raises forced-tool-schema."""
    text = {"type": "text", "content": "hi"}
    forced = {**ALL_DIALS, "tool_choice": {"type": "function", "function": {"name": "answer"}}}
    assert _gaps({"messages": [_user(text)], "params": forced}) == [names.GAP_FORCED_TOOL_SCHEMA]
    tools = [{"type": "function", "name": "answer"}]
    assert _gaps({"messages": [_user(text)], "params": forced, "tools": tools}) == []
    required = {**ALL_DIALS, "tool_choice": "required"}
    assert _gaps({"messages": [_user(text)], "params": required}) == []


def test_withheld_reasoning_is_thinking_replay() -> None:
    """A reasoning part that is empty, signed or encrypted raises thinking-replay."""
    for part in (
        {"type": "reasoning", "content": ""},
        {"type": "reasoning", "content": "t", "signature": "abc"},
        {"type": "reasoning", "encrypted_content": "zz"},
        {"type": "redacted_thinking", "data": "zz"},
    ):
        message = {"role": "assistant", "parts": [part]}
        assert _gaps({"messages": [message], "params": ALL_DIALS}) == [names.GAP_THINKING_REPLAY]
    plain = {"role": "assistant", "parts": [{"type": "reasoning", "content": "visible"}]}
    assert _gaps({"messages": [plain], "params": ALL_DIALS}) == []


def test_order_of_gaps_is_most_suspicious_first() -> None:
    """Gaps come in the reader's order: run log, limits, receipt, then caveats."""
    found = gaps_of(
        receipt=None, request=None, dropped=True, direct_capture=False, order_unknown=True
    )
    assert found == [
        names.GAP_NO_RUN_LOG,
        names.GAP_SPAN_LIMITS,
        names.GAP_NO_RECEIPT,
        names.GAP_CACHE_TRANSFORM,
    ]
    text = {"type": "text", "content": "hi"}
    minted = _gaps({"messages": [_user(text)]}, unrecorded=("tools",), direct_capture=False)
    assert minted == [
        names.GAP_UNRECORDED,
        names.GAP_CACHE_TRANSFORM,
        names.GAP_PROVIDER_DEFAULTS,
    ]


def test_the_writer_lists_gaps_in_the_readers_order() -> None:
    """A span's ``af.gaps`` lists its kinds in the order the reader lists the same kinds."""
    found = gaps_of(
        receipt=None,
        request=None,
        dropped=True,
        direct_capture=False,
        order_unknown=True,
        unrecorded=("tools",),
        held=True,
    )
    assert len(found) == 6
    causes = {names.GAP_NO_RECEIPT: CAUSE_NOT_COMMITTED}
    as_read = order_gaps(gap(kind, cause=causes.get(kind)) for kind in reversed(found))
    assert [g.kind for g in as_read] == found


def test_cache_transform_is_lifted_only_at_the_provider_sdk_with_its_own_host() -> None:
    """Only a provider-SDK instrumentation talking to the provider's own host lifts cache-transform."""
    scope = "opentelemetry.instrumentation.genai.openai"
    assert captured_at_sdk(scope, {"server.address": "api.openai.com"}, "openai")
    assert not captured_at_sdk(scope, {"server.address": "litellm.internal"}, "openai")
    assert not captured_at_sdk(scope, {}, "openai")
    assert not captured_at_sdk("my.framework", {"server.address": "api.openai.com"}, "openai")
    assert not captured_at_sdk("af_otel", {"server.address": "api.openai.com"}, "openai")
