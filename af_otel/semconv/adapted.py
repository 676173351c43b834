"""What an adapter hands back, the notes it can attach, and which span keys hold content."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from af_otel import names
from af_otel.errors import RequestShapeError
from af_otel.model.request import shape_request
from af_otel.semconv.builders import Absent, refuse_placeholders
from af_otel.semconv.convention import tables
from af_otel.semconv.placement import wire_form

# Notes name what a span shows about the request beyond the request itself; the field ledger
# (`af_otel.semconv.ledger`) reads them.
NOTE_MODEL_FROM_RESPONSE: Final = "model-from-response"
"""No request model on the span; ``model`` is the model the response named."""
NOTE_MODEL_NOT_CAPTURED: Final = "model-not-captured"
"""Neither a request nor a response model is on the span."""
NOTE_OUTPUT_TYPE: Final = "output-type"
"""The span names an output type (``gen_ai.output.type``): the request set a response format,
whose schema (if any) is not on the span."""
NOTE_PARAMS_UNREADABLE: Final = "params-unreadable"
"""The dials attribute is there but unreadable (bad JSON, a placeholder): ``params`` is empty."""
NOTE_TOOLS_ECHOED: Final = "tools-echoed"
"""The span's tools are the ones the response echoed (with defaults such as ``strict`` the client
never sent), not the request's: the adapter leaves them out and the request's are unrecorded."""
NOTE_UNPLACED: Final = "unplaced:"
"""Prefix of a note naming a request argument on the span that the adapter does not place in the
request (``unplaced:output_config``, ``unplaced:functions``): the ledger names it unrecorded."""
NOTE_ADAPTER_ERROR: Final = "adapter-error"
"""The adapter failed on an input it did not foresee; the request is treated as unreadable."""


# What may have cut a record (`Adapted.cut`): the attribute count limit, the value-length limit, or
# a hole in an indexed family (`af_otel.semconv.limits.cut_by` tells the first two).
CUT_COUNT: Final = "count"
CUT_LENGTH: Final = "length"
CUT_HOLES: Final = "holes"


@dataclass(frozen=True, slots=True)
class Adapted:
    """One span's request as its convention recorded it, or why none can be had.

    ``request`` is a plain GenAI-shaped dict (docs/receipt-spec.md §3) for ``Request.from_dict``; it is
    ``None`` exactly when ``absent_reason`` names one of the ``names.REASON_*`` values.
    """

    convention: str  # the name of the family that read it (`Convention.name`)
    request: Mapping[str, object] | None
    absent_reason: str | None
    content_keys: tuple[str, ...]
    notes: tuple[str, ...] = ()
    # With ``content-cut``: which span limit may have cut the record (`af_otel.semconv.limits`).
    cut: str | None = None


def content_keys(keys: Iterable[str]) -> tuple[str, ...]:
    """The content-bearing keys among ``keys``, in their order: those that carry conversation or
    tool content in any registered family (`Convention.content`), what a caller strips when
    content must not leave the process. `_ref` pointers are not content and stay."""
    content = tables().content
    exact, prefixes = content.exact, content.prefixes  # inlined: this runs on every span's keys
    return tuple(key for key in keys if key in exact or key.startswith(prefixes))


def conclude(
    convention: str,
    attributes: Mapping[str, object],
    build: Callable[[], tuple[dict[str, object], Iterable[str]]],
) -> Adapted:
    """Run one convention's ``build``, read its request into the GenAI shape by the request
    model's rules, and wrap it, or the reason there is none, as Adapted."""
    keys = content_keys(attributes)
    try:
        built, notes = build()
        request = wire_form(shape_request(built), attributes)
        refuse_placeholders(request.get("system") or ())
        for message in request["messages"]:
            refuse_placeholders(message["parts"])
    except RequestShapeError:
        return Adapted(convention, None, names.REASON_UNREADABLE, keys)
    except Absent as absent:
        cut = CUT_HOLES if absent.reason == names.REASON_CUT else None
        return Adapted(convention, None, absent.reason, keys, cut=cut)
    return Adapted(convention, request, None, keys, tuple(notes))
