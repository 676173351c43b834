"""util-genai's completion hook (`af_otel.processor.hook`): handed the request's objects, with
content capture off or on, it writes them as the content attributes util-genai writes with capture
on, and reads them back as the GenAI conventions (`genai`), so the hook and a span with capture on
mint the same receipt. It records what its instrumentation records (the GenAI ledger rows).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Final

from af_otel.semconv.convention import Convention
from af_otel.semconv.conventions.genai import SLOTS


def completion_attributes(
    inputs: Sequence[Any],
    system_instruction: Sequence[Any],
    tool_definitions: Sequence[Any] | None,
) -> dict[str, str]:
    """The content attributes util-genai writes with capture on: compact JSON of the dataclasses."""
    given = {"messages": inputs, "system": system_instruction, "tools": tool_definitions or ()}
    return {
        slot.key: _dumps([_plain(item) for item in given[slot.target]])
        for slot in SLOTS
        if given[slot.target]
    }


def _plain(item: Any) -> Any:
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return dataclasses.asdict(item)
    return item


def _dumps(value: Any) -> str:
    # util-genai is optional (the `genai` extra) and is what calls this hook: import it only here.
    # Without it there is no writing the request as util-genai would, so nothing else is tried: any
    # other serialization could mint a receipt the span's own content would not reproduce.
    from opentelemetry.util.genai.utils import gen_ai_json_dumps  # noqa: PLC0415

    return str(gen_ai_json_dumps(value))


# Claims no span: its record is the GenAI one it writes (`completion_attributes`).
COMPLETION_HOOK: Final = Convention("completion-hook")
