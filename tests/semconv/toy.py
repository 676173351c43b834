"""A toy instrumentation family, written as a new family is: one module declaring one
`Convention` (docs/instrumentations.md, "Adding a convention"). Its spans carry ``toy.kind``,
``toy.model`` and one ``toy.prompt.N`` attribute per user turn; ``toy.reply.N`` are the answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from af_otel import names
from af_otel.model import fields
from af_otel.semconv import Adapted, Convention, Entry, Keys
from af_otel.semconv.adapted import conclude
from af_otel.semconv.builders import Absent, holed
from af_otel.semconv.coerce import text
from af_otel.semconv.rows import bucket, dense

SCOPE: Final = "toy.instrumentation"
KIND: Final = "toy.kind"
PROMPTS: Final = "toy.prompt."
REPLIES: Final = "toy.reply."


def claims(attributes: Mapping[str, object], span_name: str) -> bool:
    return KIND in attributes


def is_llm_call(attributes: Mapping[str, object], span_name: str) -> bool:
    return text(attributes.get(KIND)) == "llm"


def _build(attributes: Mapping[str, object]) -> tuple[dict[str, object], list[str]]:
    items = list(attributes.items())
    turns = dense({i: {"text": v} for i, v in _numbered(items, PROMPTS).items()})
    replies = dense({i: {"text": v} for i, v in _numbered(items, REPLIES).items()})
    if turns is None or replies is None:
        raise holed()
    if not turns:
        raise Absent(names.REASON_NOT_CAPTURED)
    messages: list[dict[str, object]] = []
    for at, turn in enumerate(turns):
        messages.append({"role": "user", "parts": [{"type": "text", "content": turn["text"]}]})
        if at < len(replies):
            part = {"type": "text", "content": replies[at]["text"]}
            messages.append({"role": "assistant", "parts": [part]})
    request: dict[str, object] = {
        "system": [],
        "messages": messages,
        "tools": [],
        "params": {},
        "model": text(attributes.get("toy.model")),
        "provider": "openai",
    }
    return request, []


def _numbered(items: list[tuple[str, object]], prefix: str) -> dict[int, object]:
    """``{prefix}{i}`` values by ``i`` (`bucket` wants a rest after the index: give it one)."""
    found = bucket(((key + ".v", value) for key, value in items), prefix)
    return {i: fields_["v"] for i, fields_ in found.items()}


def adapt(attributes: Mapping[str, object]) -> Adapted:
    return conclude("toy", attributes, lambda: _build(attributes))


TOY: Final = Convention(
    "toy",
    claims=claims,
    is_llm_call=is_llm_call,
    adapt=adapt,
    content=Keys(prefixes=(PROMPTS, REPLIES)),
    # It records the whole request: a span without tools shows a request without tools.
    ledger=(Entry("toy", (SCOPE,), ("toy",), frozenset(fields.FIELDS)),),
    sdk_scopes=frozenset({SCOPE}),
    model_keys=("toy.model",),
)
