"""A trace file as a `Source`: every span it holds, read whole, in whatever layout it is in."""

from __future__ import annotations

from dataclasses import dataclass

from af_otel.reader.sources.files import read_file
from af_otel.reader.sources.source import AllSpans, Ask, refused
from af_otel.reader.sources.stream import SpanStream

__all__ = ["FileSource"]


@dataclass(frozen=True, slots=True)
class FileSource:
    """The span file at ``path`` (OTLP JSON lines, one JSON document, length-prefixed protobuf:
    the content decides). Its records are read as the stream is read; a file that cannot be
    opened, or is in no known format, raises when it is asked."""

    path: str

    @property
    def label(self) -> str:
        return f"the trace file {self.path}"

    def read(self, ask: Ask, *, lenient: bool = False) -> SpanStream:
        if not isinstance(ask, AllSpans):
            raise refused(self, ask, "every span it holds")
        return read_file(self.path, lenient=lenient)
