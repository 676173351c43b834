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

import importlib.abc
import sys
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


class _Watch(importlib.abc.MetaPathFinder):
    """Patches ``botocore.client`` right after it is first imported: importing botocore to patch
    it would cost every process that has it installed but never sends through it (1.6 s measured
    on this project's loaded 2-core machine). Finds nothing itself; it wraps the loader the other finders find."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != MODULE or _keep is None:
            return None
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None and spec.loader is not None:
                    spec.loader = _Loader(spec.loader)
                    return spec
        except Exception:
            return None
        return None


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        _wrap_creator(module)

    def __getattr__(self, name: str) -> Any:  # get_source, resource readers, ...: the real one's
        return getattr(self._inner, name)


MODULE: Final = "botocore.client"
_watch = _Watch()


def patch(keep: Keep) -> None:
    """Have every Bedrock Runtime client made from now on hand its bodies to ``keep``: wrap
    ``ClientCreator.create_client`` now if botocore is imported, else when it is."""
    global _keep
    _keep = keep
    module = sys.modules.get(MODULE)
    if module is not None:
        _wrap_creator(module)
    elif _watch not in sys.meta_path:
        sys.meta_path.insert(0, _watch)


def _wrap_creator(module: Any) -> None:
    global _original
    if _original is not None:
        return
    try:
        creator = module.ClientCreator
        original = creator.create_client
    except Exception:
        return

    def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = original(self, *args, **kwargs)
        _register(client)
        return client

    create_client.__wrapped__ = original  # type: ignore[attr-defined]
    creator.create_client = create_client
    _original = original


def unpatch() -> None:
    """Put ``create_client`` back and stop watching; clients already made stop keeping bodies."""
    global _keep, _original
    _keep = None
    if _watch in sys.meta_path:
        sys.meta_path.remove(_watch)
    if _original is None:
        return
    try:
        sys.modules[MODULE].ClientCreator.create_client = _original
    finally:
        _original = None


def patched() -> tuple[str, ...]:
    return ("botocore",) if _original is not None else ()
