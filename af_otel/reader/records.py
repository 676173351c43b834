"""Span records: one OTel-free value per exported span, whatever format or backend it was read from.

Every source (OTLP files, Tempo, Jaeger, the SDK's in-memory spans) normalizes to these values so
that the fold and the verifier never see an export format. Nothing here imports OpenTelemetry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType
from typing import TypeAlias

__all__ = [
    "AttrScalar",
    "AttrValue",
    "EventRecord",
    "SpanKind",
    "SpanRecord",
    "StatusCode",
    "freeze_attributes",
]

AttrScalar: TypeAlias = str | bool | int | float
# Arrays keep OTel's rule that a null inside an array is preserved as-is (spec common/README), so
# an element may be None; a whole attribute is never None (an empty value is simply absent).
AttrValue: TypeAlias = AttrScalar | tuple[AttrScalar | None, ...]

_EMPTY: Mapping[str, AttrValue] = MappingProxyType({})
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_SPAN_ID = re.compile(r"[0-9a-f]{16}")


class SpanKind(IntEnum):
    """OTLP ``Span.SpanKind`` numbering (not the OTel Python API's, which has no UNSPECIFIED)."""

    UNSPECIFIED = 0
    INTERNAL = 1
    SERVER = 2
    CLIENT = 3
    PRODUCER = 4
    CONSUMER = 5


class StatusCode(IntEnum):
    """OTLP ``Status.StatusCode`` numbering."""

    UNSET = 0
    OK = 1
    ERROR = 2


def freeze_attributes(
    values: Mapping[str, AttrValue], *, owned: bool = False
) -> Mapping[str, AttrValue]:
    """A read-only view of ``values``: over a private copy, or over ``values`` itself when the
    caller hands over a dict nobody else holds (``owned``); an existing view is reused."""
    if isinstance(values, MappingProxyType):
        return values
    if not values:
        return _EMPTY
    return MappingProxyType(values if owned and type(values) is dict else dict(values))


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One span event (af_otel's commits travel as events named ``af.commit``)."""

    name: str
    time_ns: int
    attributes: Mapping[str, AttrValue] = field(default_factory=lambda: _EMPTY)
    dropped_attributes_count: int = 0

    def __post_init__(self) -> None:
        if type(self.attributes) is not MappingProxyType:  # a decoder's view is kept as it is
            object.__setattr__(self, "attributes", freeze_attributes(self.attributes))

    # Records hold read-only mappings, which do not hash; events are identified by content.
    def __hash__(self) -> int:
        return hash((self.name, self.time_ns))


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One finished span as exported: ids in lowercase hex, times in Unix nanoseconds.

    ``origin`` says where the span was read (``trace.jsonl:17``, a URL, ``ReadableSpan[3]``) so
    that every later message can point back at it. Equality and hashing ignore ``origin``: the
    same span read from a file and from Tempo is the same record.
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: SpanKind
    start_ns: int
    end_ns: int
    attributes: Mapping[str, AttrValue] = field(default_factory=lambda: _EMPTY)
    events: tuple[EventRecord, ...] = ()
    resource: Mapping[str, AttrValue] = field(default_factory=lambda: _EMPTY)
    scope: str = ""
    status_code: StatusCode = StatusCode.UNSET
    dropped_attributes_count: int = 0
    dropped_events_count: int = 0
    origin: str = field(default="", compare=False)
    # The instrumentation scope's version, where the format carries one (OTLP, the SDK, Jaeger's
    # ``otel.scope.version`` tag; Phoenix does not): not compared, so that the same span read
    # from two backends is still one record.
    scope_version: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not _TRACE_ID.fullmatch(self.trace_id):
            raise ValueError(f"trace_id must be 32 lowercase hex digits, got {self.trace_id!r}")
        if not _SPAN_ID.fullmatch(self.span_id):
            raise ValueError(f"span_id must be 16 lowercase hex digits, got {self.span_id!r}")
        if self.parent_span_id is not None and not _SPAN_ID.fullmatch(self.parent_span_id):
            raise ValueError(
                "parent_span_id must be 16 lowercase hex digits or None, "
                f"got {self.parent_span_id!r}"
            )
        # Decoders hand over enum members and read-only views, and an Enum call costs more than
        # the rest of these checks together: each conversion is made only where it is needed.
        if type(self.kind) is not SpanKind:
            object.__setattr__(self, "kind", SpanKind(self.kind))
        if type(self.status_code) is not StatusCode:
            object.__setattr__(self, "status_code", StatusCode(self.status_code))
        if type(self.attributes) is not MappingProxyType:
            object.__setattr__(self, "attributes", freeze_attributes(self.attributes))
        if type(self.resource) is not MappingProxyType:
            object.__setattr__(self, "resource", freeze_attributes(self.resource))
        if not isinstance(self.events, tuple):
            object.__setattr__(self, "events", tuple(self.events))

    # Read-only mappings do not hash; a span is identified by its ids (equal records share them).
    def __hash__(self) -> int:
        return hash((self.trace_id, self.span_id))

    @property
    def service_name(self) -> str | None:
        """The resource's ``service.name``, or None when the resource does not name a service."""
        value = self.resource.get("service.name")
        return value if isinstance(value, str) else None
