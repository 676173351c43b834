"""The wire tap for ``botocore`` (boto3's Bedrock Runtime client): botocore sends through its own
HTTP stack, not httpx, so the tap listens on the client's ``before-send`` event instead.

Why ``before-send``: botocore emits it once per HTTP attempt (its retry loop included), with the
request as it goes out, after every handler that edits the body has run; ``request-created``
comes before signing and before some of them. Why at client creation: each client copies its
session's handlers when it is made, so the tap wraps ``ClientCreator.create_client`` and
registers on every ``bedrock-runtime`` client made while it is installed (a client made before
then is not seen, and its calls keep the instrumentation's record).

The handler only looks: the method, the path of the URL (which names the operation and the
model), the host, and for a Bedrock LLM operation the body bytes; never a header, so no
signature or credential is read into anything. It returns None (a value would stop botocore's
send) and never raises.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import urlsplit

from af_otel.wire.endpoints import endpoint_of

SERVICE: Final = "bedrock-runtime"
EVENT: Final = f"before-send.{SERVICE}"
UNIQUE_ID: Final = "af_otel.wire.botocore_tap"

Keep = Callable[[str, str, bytes, bytes], None]
_keep: Keep | None = None
_original: Any = None  # ClientCreator.create_client before the tap wrapped it


def on_send(request: Any = None, **_: Any) -> None:
    """botocore's ``before-send`` handler: keep a Bedrock LLM request's body. Returns None."""
    try:
        keep = _keep
        if keep is None or request is None or request.method != "POST":
            return
        parts = urlsplit(request.url)
        path = parts.path.encode("latin-1")
        endpoint = endpoint_of(path)
        if endpoint is None:
            return
        body = request.body
        if isinstance(body, str):
            body = body.encode("utf-8")
        if isinstance(body, bytes | bytearray) and body:
            keep(endpoint, parts.hostname or "", bytes(body), path)
    except Exception:  # the tap never raises into the client
        return


def _register(client: Any) -> None:
    try:
        if client.meta.service_model.service_name == SERVICE:
            client.meta.events.register(EVENT, on_send, unique_id=UNIQUE_ID)
    except Exception:
        return


def patch(keep: Keep) -> None:
    """Wrap ``ClientCreator.create_client`` (once), so that every Bedrock Runtime client made from
    now on hands its bodies to ``keep``. Without botocore, nothing."""
    global _keep, _original
    _keep = keep
    if _original is not None:
        return
    try:
        creator = importlib.import_module("botocore.client").ClientCreator
    except Exception:
        return
    original = creator.create_client

    def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = original(self, *args, **kwargs)
        _register(client)
        return client

    create_client.__wrapped__ = original  # type: ignore[attr-defined]
    creator.create_client = create_client
    _original = original


def unpatch() -> None:
    """Put ``create_client`` back; clients already made stop keeping bodies."""
    global _keep, _original
    _keep = None
    if _original is None:
        return
    try:
        importlib.import_module("botocore.client").ClientCreator.create_client = _original
    finally:
        _original = None


def patched() -> tuple[str, ...]:
    return ("botocore",) if _original is not None else ()
