"""The store blobs a trace refers to, so that a reader can tell a store that cannot be the
trace's (none of them there) from one that lost a few (each loss is a gap on its call)."""

from __future__ import annotations

from collections.abc import Iterable

from af_otel import names
from af_otel.errors import InvalidAddressError
from af_otel.reader.records import SpanRecord
from af_otel.store import validate_address

__all__ = ["referenced_blobs"]


def referenced_blobs(spans: Iterable[SpanRecord]) -> list[str]:
    """The valid store addresses ``spans`` refer to (run bases, commit payloads), each once, in
    the order met. An invalid address is left out: the fold reports it as a gap on its call.
    The messages a stored list names by reference (`af_otel.store.items`) are not followed: they
    are behind these blobs, so a store holding none of these cannot be the trace's either."""
    found: dict[str, None] = {}
    for span in spans:
        base = span.attributes.get(names.RUN_BASE)
        candidates = [base] if isinstance(base, str) else []
        for event in span.events:
            if event.name == names.COMMIT_EVENT:
                ref = event.attributes.get(names.COMMIT_REF)
                if isinstance(ref, str):
                    candidates.append(ref)
        for address in candidates:
            try:
                found[validate_address(address)] = None
            except InvalidAddressError:
                continue
    return list(found)
