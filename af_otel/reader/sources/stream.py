"""The lazy iterator every source returns, and the one place strict and lenient reading differ.

Strict reading raises ``SourceError`` at the first bad line, record or span, naming it; lenient
reading skips it, counts it and keeps the first few messages, so a long file with one torn line
still reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from types import TracebackType
from typing import Any, Final, Literal, TypeVar

from af_otel.errors import SourceError
from af_otel.reader.records import SpanRecord

__all__ = ["MAX_MESSAGES", "NoteKind", "SourceFormat", "SourceNote", "SpanStream"]

# Messages are kept for the person reading, counts for everything else: a bound keeps a file
# with millions of torn lines from filling memory with their descriptions.
MAX_MESSAGES: Final = 20

# The JSON containers a body's members are checked to be, as messages name them.
_Member = TypeVar("_Member", list[Any], dict[str, Any])
_ARTICLED: Final[dict[type, str]] = {list: "a list", dict: "an object"}


class SourceFormat(Enum):
    """The formats the reader recognizes; each value says how a person would know it."""

    OTLP_JSON_LINES = (
        "OTLP JSON lines, one export request per line "
        "(Collector file exporter, opentelemetry-exporter-otlp-json-file)"
    )
    OTLP_JSON = 'one OTLP JSON document {"resourceSpans": [...]}'
    OTLP_PROTO = "length-prefixed OTLP protobuf (Collector file exporter, format: proto)"
    TEMPO_V1 = 'Tempo GET /api/traces/<id> {"batches": [...]}'
    TEMPO_V2 = 'Tempo GET /api/v2/traces/<id> {"trace": {"resourceSpans": [...]}}'
    JAEGER_V3 = 'Jaeger GET /api/v3/traces/<id> {"result": {"resourceSpans": [...]}}'
    JAEGER_V1 = 'Jaeger GET /api/traces/<id> {"data": [{"spans": [...]}]}'
    SDK = "OpenTelemetry SDK ReadableSpan objects (e.g. InMemorySpanExporter)"
    TEMPO_SEARCH = "Tempo GET /api/search, then each trace by id"
    JAEGER_SEARCH = 'Jaeger GET /api/v3/traces?query.service_name=... {"result": {...}}'
    PHOENIX = 'Phoenix GET /v1/projects/<project>/spans/otlpv1 {"data": [spans], "next_cursor"}'
    CLICKHOUSE = "the Collector ClickHouse exporter's otel_traces table (plain or JSON columns)"


class NoteKind(Enum):
    """What a backend said about its own answer."""

    PARTIAL = "partial"  # the backend says the trace it returned is incomplete (Tempo PARTIAL)
    TRUNCATED = "truncated"  # a limit cut the answer: a search hit its trace limit
    ERROR = "error"  # the backend reported an error next to the data (Jaeger errors)
    WARNING = "warning"  # the backend adjusted or doubted the data (Jaeger warnings)


@dataclass(frozen=True, slots=True)
class SourceNote:
    """One thing a source reported about its own completeness; ``str()`` is the text."""

    kind: NoteKind
    text: str

    @property
    def missing_spans(self) -> bool:
        """Whether the note means spans may be missing from what was read (not a mere warning)."""
        return self.kind is not NoteKind.WARNING

    def __str__(self) -> str:
        return self.text


def expected_formats() -> str:
    """The list an ``UnknownFormatError`` message ends with."""
    return "; ".join(f.value for f in SourceFormat)


class SpanStream(Iterator[SpanRecord]):
    """Span records read lazily from one source, plus what lenient reading skipped.

    Iterate it once. The tallies grow while iterating, so read them after the loop:
    ``skipped_lines`` counts lines (or protobuf records) that could not be decoded at all,
    ``skipped_spans`` spans dropped from otherwise readable lines, ``problems`` the first
    ``MAX_MESSAGES`` messages about them, ``notes`` the first ``MAX_MESSAGES`` ``SourceNote``
    values the backend itself reported (a partial trace, a search cut at its limit, warnings and
    errors). Closing the stream (or leaving its ``with`` block) closes the file.
    """

    __slots__ = (
        "_records",
        "format",
        "lenient",
        "notes",
        "problems",
        "skipped_lines",
        "skipped_spans",
        "source",
        "traces_expected",
        "traces_read",
    )

    def __init__(self, source: str, fmt: SourceFormat, *, lenient: bool) -> None:
        self.source = source
        self.format = fmt
        self.lenient = lenient
        self.skipped_lines = 0
        self.skipped_spans = 0
        self.problems: list[str] = []
        self.notes: list[SourceNote] = []
        # Window reads count whole traces too, for a progress line: None when not known.
        self.traces_read = 0
        self.traces_expected: int | None = None
        self._records: Iterator[SpanRecord] = iter(())

    def feed(self, records: Iterator[SpanRecord]) -> SpanStream:
        """Attach the generator that yields the records (sources call this once)."""
        self._records = records
        return self

    @property
    def skipped(self) -> int:
        """Lines, records and spans skipped in all."""
        return self.skipped_lines + self.skipped_spans

    def problem(
        self,
        message: str,
        *,
        unit: Literal["line", "span"],
        count: int = 1,
        error: type[SourceError] = SourceError,
    ) -> None:
        """Report undecodable input: raise when strict; when lenient, count it and go on."""
        if not self.lenient:
            raise error(message)
        if unit == "line":
            self.skipped_lines += count
        else:
            self.skipped_spans += count
        if len(self.problems) < MAX_MESSAGES:
            self.problems.append(message)

    def member(self, value: object, kind: type[_Member], where: str) -> _Member | None:
        """``value`` when it is a ``kind`` (a list or an object); None when it is absent, and a
        problem of the whole line, named by ``where``, when it is anything else."""
        if value is None:
            return None
        if isinstance(value, kind):
            return value
        self.problem(f"{where} must be {_ARTICLED[kind]}", unit="line")
        return None

    def note(self, message: str, kind: NoteKind = NoteKind.WARNING) -> None:
        """Keep something the source reported about its own completeness."""
        if len(self.notes) < MAX_MESSAGES:
            self.notes.append(SourceNote(kind, message))

    def absorb(self, other: SpanStream) -> None:
        """Add what reading ``other`` (one trace of a window) skipped and noted to this stream."""
        self.skipped_lines += other.skipped_lines
        self.skipped_spans += other.skipped_spans
        room = MAX_MESSAGES - len(self.problems)
        self.problems.extend(other.problems[: max(room, 0)])
        room = MAX_MESSAGES - len(self.notes)
        self.notes.extend(other.notes[: max(room, 0)])

    def __iter__(self) -> SpanStream:
        return self

    def __next__(self) -> SpanRecord:
        return next(self._records)

    def close(self) -> None:
        """Stop reading and release the file, if any."""
        close = getattr(self._records, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> SpanStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"SpanStream({self.source!r}, {self.format.name}, skipped_lines={self.skipped_lines}, "
            f"skipped_spans={self.skipped_spans})"
        )
