"""The files util-genai's upload hook wrote: one ref's content, read under the ``--upload-base``
the reader was given, never from wherever a span's attribute points.

The hook names each file by a random id or a content hash under its own base path and stamps the
whole URL on the span (``gen_ai.input.messages_ref``, ...). The reader takes only the file name of
that URL and reads it under the base it was told to trust, so a span cannot make it read anything
else, and a copy of the uploads moved elsewhere reads the same. A file holds the JSON array of
the part (the hook's ``json`` format) or one element per line with its ``index`` (``jsonl``).
"""

from __future__ import annotations

import json
import posixpath
from typing import Any

from af_otel.errors import SourceError

__all__ = ["UnreadableUpload", "check_base", "read_upload"]


class UnreadableUpload(SourceError):
    """A file the ref names is there but is not the hook's JSON (a data problem of that call)."""


def check_base(base: str) -> None:
    """Raise `SourceError` naming ``base`` when it names no location that can be read: every ref
    would then read as not uploaded, which says nothing of the uploads."""
    import fsspec  # noqa: PLC0415 - optional, like the store's fsspec URLs

    try:
        fs, path = fsspec.url_to_fs(base)
        found = fs.exists(path)
    except (OSError, ValueError, ImportError) as exc:
        raise SourceError(f"--upload-base {base}: cannot be read: {exc}") from exc
    if not found:
        raise SourceError(f"--upload-base {base}: no such location")


def read_upload(base: str, ref: str) -> list[Any] | None:
    """The list the upload ``ref`` names, read under ``base``; None when no such file is there.
    Raises `UnreadableUpload` naming the file when it is there but is not the hook's JSON, and
    `SourceError` naming the base when the base itself cannot be read."""
    import fsspec  # noqa: PLC0415 - optional, like the store's fsspec URLs

    name = posixpath.basename(ref.rstrip("/"))
    url = base.rstrip("/") + "/" + name
    try:
        fs, path = fsspec.url_to_fs(url)
        if not name or not fs.exists(path):
            return None
        with fs.open(path, "r", encoding="utf-8") as file:
            text = file.read()
    except (OSError, ValueError, ImportError) as exc:
        raise SourceError(f"--upload-base {base}: cannot read {name!r}: {exc}") from exc
    return _parsed(text, url)


def _parsed(text: str, url: str) -> list[Any]:
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        if len(lines) == 1:
            whole = json.loads(lines[0])
            if isinstance(whole, list):
                return whole
        items = [json.loads(line) for line in lines]
    except json.JSONDecodeError as exc:
        raise UnreadableUpload(f"{url}: line {exc.lineno}: not JSON: {exc.msg}") from exc
    if not all(isinstance(item, dict) for item in items):
        raise UnreadableUpload(f"{url}: neither a JSON array nor one JSON object per line")
    items.sort(key=lambda item: item.get("index", 0))
    return [{k: v for k, v in item.items() if k != "index"} for item in items]
