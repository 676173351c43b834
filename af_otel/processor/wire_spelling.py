"""A wire call's spelling (`af_otel.wire.spelling`) kept in the store, so that ``af-otel served
--request`` can send exactly the body again: the blobs go to the store beside the call's content,
and the span names the spelling's address (`af.wire.spelling`), never its content. Not when the
settings keep no content (``content="none"``) or there is no store. Raises nothing."""

from __future__ import annotations

from typing import Any

from af_otel import names
from af_otel.processor import settings as settings_module
from af_otel.processor.guard import report
from af_otel.processor.settings import Settings
from af_otel.wire.spelling import Spelling


def keep(settings: Settings, spelling: Spelling, attributes: dict[str, Any]) -> None:
    """Store ``spelling``'s blobs (those not stored yet) and name it in the span's
    ``attributes``; nothing when the settings keep no content or the store fails."""
    store = settings.store
    if settings.content == "none" or store is None:
        return
    try:
        for address, data in spelling.blobs():
            if not store.has(address):
                store.put(data)
    except Exception as exc:
        report("store", exc)
        return
    settings_module.note_written(store)
    attributes[names.WIRE_SPELLING] = spelling.address
