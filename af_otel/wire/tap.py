"""The wire tap: the exact body an LLM client sends, seen at ``Client.send`` of ``httpx`` (and of
``httpx2``, the same API under another name, which the ``openai`` 3.x and ``anthropic`` 2.x clients
send through), kept a short while under its span: the span current when it was sent, or, for
instrumentations that never make their LLM span current, the span the processor says was started
last in the sending context (`Owner`, docs/processor.md "Pairing"). A body no current LLM span
owns is also kept by its trace (`af_otel.wire.loose`) for an LLM span that ends later.

Why ``Client.send`` / ``AsyncClient.send``: every request a client makes passes there once per
attempt (``Client.request``, ``post`` and the provider SDKs' own retry loops all call it), whatever
transport the client holds: the default ``HTTPTransport``, a subclass of it, ``MockTransport`` or a
user's own ``BaseTransport``. A transport method would miss transports that do not inherit it, and
a redirect or an auth retry inside ``send`` would show one request twice.

The tap only looks: it reads the method, the path and, for an LLM endpoint, the body bytes the
request already holds (a streamed body is never read), the host; never a header. It never raises
into the client (each look is guarded) and never blocks (one short lock around a dict, made by `af_otel.forksafe`, so a forked child gets
it unlocked and an empty table).
"""

from __future__ import annotations

import importlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from af_otel import forksafe
from af_otel.wire import botocore_tap
from af_otel.wire.endpoints import endpoint_of
from af_otel.wire.loose import LooseTable
from af_otel.wire.sent import VIA_CURRENT, Key, Sent

# Bounds of the table of sent bodies (docs/processor.md, the wire tap): a body is taken off when
# its call is minted, at its span's end (the processor form) or when its span is exported (the
# exporter form, where a `BatchSpanProcessor` holds thousands of ended calls between exports on a
# busy service, so the call count must not be what evicts them: 1,024 did). Memory is bounded by
# bytes: 64 MiB of bodies, each entry's own objects counted as `ENTRY_BYTES` more, so tiny bodies
# cannot grow it past the bound either; the call count (as many as the exporter form's awaited
# spans) and the age (10 minutes) only bound spans that never end or are never seen (not sampled,
# another provider's).
MAX_CALLS: Final = 65_536
MAX_BYTES: Final = 64 * 1024 * 1024
ENTRY_BYTES: Final = 640  # an entry, its list, its key and one `Sent`: ~530 bytes (tracemalloc)
MAX_AGE_NS: Final = 600 * 1_000_000_000
# Attempts kept per call (retries under one span); more are counted, not kept.
MAX_ATTEMPTS: Final = 8
# Spans whose bodies the bounds above dropped before their call was minted, remembered so that
# the call says so (`wire-body-evicted`) rather than fall back to its record in silence: their
# keys only, oldest out first past 4,096 (~1 MiB at most; a drop past that is still counted in
# `SentTable.dropped`, not named on its span).
MAX_EVICTED: Final = 4096
MODULES: Final = ("httpx", "httpx2")


@dataclass(frozen=True, slots=True)
class Owner:
    """The span a body is filed under (None: none) and how it was chosen (``VIA_*``); ``loose``:
    the trace (0: none) the body is also kept by, when no LLM span was current. A bare key means
    the current span, an LLM call."""

    key: Key | None
    via: str
    loose: int | None = None


@dataclass(slots=True)
class _Entry:
    at: int
    sent: list[Sent]
    size: int


class SentTable:
    """Bodies sent under each span, least recently sent first out (bounds above)."""

    def __init__(self) -> None:
        self._lock = forksafe.lock(self)
        self._table: OrderedDict[Key, _Entry] = OrderedDict()
        self._bytes = 0
        self._evicted: OrderedDict[Key, bool] = OrderedDict()  # keys of dropped bodies
        self.dropped = 0  # bodies dropped by the bounds since the process (or its fork) began
        # In a forked child: nothing sent (the parent's calls are not the child's).
        forksafe.on_fork(self, SentTable._clear)

    def add(self, key: Key, sent: Sent) -> None:
        now = time.monotonic_ns()
        with self._lock:
            entry = self._table.get(key)
            if entry is None:
                entry = self._table[key] = _Entry(now, [], ENTRY_BYTES)
                self._bytes += ENTRY_BYTES
            else:
                self._table.move_to_end(key)
            if len(entry.sent) < MAX_ATTEMPTS:
                entry.sent.append(sent)
                entry.size += len(sent.body)
                self._bytes += len(sent.body)
            entry.at = now
            while self._table and (len(self._table) > MAX_CALLS or self._bytes > MAX_BYTES):
                self._drop_oldest()
            while self._table:
                oldest = next(iter(self._table.values()))
                if now - oldest.at <= MAX_AGE_NS:
                    break
                self._drop_oldest()

    def _drop_oldest(self) -> None:
        key, entry = self._table.popitem(last=False)
        self._bytes -= entry.size
        self._evict(key, entry)

    def _evict(self, key: Key, entry: _Entry) -> None:
        """Remember that ``key``'s bodies were dropped, and count them (under the lock)."""
        self.dropped += len(entry.sent)
        self._evicted[key] = True
        self._evicted.move_to_end(key)
        if len(self._evicted) > MAX_EVICTED:
            self._evicted.popitem(last=False)

    def take(self, key: Key) -> tuple[Sent, ...]:
        """The attempts sent under ``key``, removed from the table (none: empty; one past its age
        is dropped, as the bounds drop one)."""
        with self._lock:
            entry = self._table.pop(key, None)
            if entry is None:
                return ()
            self._bytes -= entry.size
            if time.monotonic_ns() - entry.at > MAX_AGE_NS:
                self._evict(key, entry)
                return ()
        return tuple(entry.sent)

    def evicted(self, key: Key) -> bool:
        """Whether bodies sent under ``key`` were dropped before it took them (once: the mark
        goes). Costs a truth test when nothing was ever dropped."""
        # No lock for the hint: a span asks after its `take`, which waited for any drop of its
        # own bodies under the lock.
        if not self._evicted:
            return False
        with self._lock:
            return self._evicted.pop(key, False)

    def discard(self, key: Key, sent: Sent) -> None:
        """Forget one body filed under ``key`` (another span claimed it, by identity)."""
        with self._lock:
            entry = self._table.get(key)
            if entry is None or not any(s is sent for s in entry.sent):
                return
            entry.sent = [s for s in entry.sent if s is not sent]
            entry.size -= len(sent.body)
            self._bytes -= len(sent.body)
            if not entry.sent:
                del self._table[key]
                self._bytes -= entry.size  # the entry's own cost

    def __len__(self) -> int:
        return len(self._table)

    def _clear(self) -> None:
        self._table = OrderedDict()
        self._bytes = 0
        self._evicted = OrderedDict()
        self.dropped = 0

    def reset(self) -> None:
        """Forget everything sent (tests, `uninstall`)."""
        with self._lock:
            self._clear()


SENT: Final = SentTable()
LOOSE: Final = LooseTable()
# The span a request sent now is filed under, as (trace id, span id) (the current span) or an
# `Owner`, or None: handed in by the processor (only processor/ touches OpenTelemetry).
_current: Callable[[], Key | Owner | None] | None = None
_users = 0  # engines that want the tap; it records nothing while none does
_patched: dict[str, tuple[Any, Any]] = {}  # module -> the original (send, async send)
_install_lock = forksafe.lock()


def note(request: Any) -> None:
    """Keep ``request``'s body if it goes to an LLM endpoint under a current span. Guarded: a
    request af_otel cannot read is one it does not keep."""
    try:
        url = request.url
        endpoint = endpoint_of(url.raw_path)
        if endpoint is None or _current is None:
            return
        owner = _current()
        if owner is None:
            return
        try:
            body = request.content  # raises for a streamed body that was not read: not ours to read
        except Exception:
            return
        if isinstance(body, bytes) and body:
            _file(owner, endpoint, url.host, body, url.raw_path)
    except Exception:  # the tap never raises into the client
        return


def _file(owner: Key | Owner, endpoint: str, host: str, body: bytes, path: bytes) -> None:
    """Keep a body under its span, and by its trace when no LLM span owns it for certain."""
    if not isinstance(owner, Owner):
        SENT.add(owner, Sent(endpoint, host, body, time.time_ns(), VIA_CURRENT, path))
        return
    trace = owner.loose
    sent = Sent(
        endpoint, host, body, time.time_ns(), owner.via, path, trace or 0, trace is not None
    )
    if owner.key is not None:
        SENT.add(owner.key, sent)
    if trace is not None:
        LOOSE.add(trace, sent, owner.key)


def keep(endpoint: str, host: str, body: bytes, path: bytes) -> None:
    """Keep a body another client's tap saw (`af_otel.wire.botocore_tap`) under the current span,
    while some engine wants the tap. Guarded as `note` is."""
    try:
        if not _users or _current is None or not body:
            return
        owner = _current()
        if owner is not None:
            _file(owner, endpoint, host, body, path)
    except Exception:  # the tap never raises into the client
        return


def _wrap(module: Any) -> tuple[Any, Any]:
    client, async_client = module.Client, module.AsyncClient
    send, async_send = client.send, async_client.send

    def tapped_send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if _users and request.method == "POST":
            note(request)
        return send(self, request, *args, **kwargs)

    async def tapped_async_send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if _users and request.method == "POST":
            note(request)
        return await async_send(self, request, *args, **kwargs)

    tapped_send.__wrapped__ = send  # type: ignore[attr-defined]
    tapped_async_send.__wrapped__ = async_send  # type: ignore[attr-defined]
    client.send = tapped_send
    async_client.send = tapped_async_send
    return send, async_send


def install(current: Callable[[], Key | Owner | None]) -> None:
    """Patch ``send`` of every HTTP library present (once) and count one more user of the tap."""
    global _current, _users
    with _install_lock:
        _current = current
        _users += 1
        for name in MODULES:
            if name in _patched:
                continue
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            try:
                _patched[name] = _wrap(module)
            except Exception:  # an HTTP library of a shape we do not know is left as it is
                continue
        botocore_tap.patch(keep)


def release() -> None:
    """One user less; with none left the patched ``send`` only checks a counter."""
    global _users
    with _install_lock:
        _users = max(0, _users - 1)


def uninstall() -> None:
    """Put every patched ``send`` back (tests; a process that wants the libraries untouched)."""
    global _users
    with _install_lock:
        for name, (send, async_send) in _patched.items():
            module = importlib.import_module(name)
            module.Client.send = send
            module.AsyncClient.send = async_send
        _patched.clear()
        botocore_tap.unpatch()
        _users = 0
        SENT.reset()
        LOOSE.reset()


def installed() -> tuple[str, ...]:
    """The HTTP libraries whose ``send`` is patched now (``botocore``: its clients' events)."""
    return (*_patched, *botocore_tap.patched())
