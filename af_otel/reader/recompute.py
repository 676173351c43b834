"""`recompute`: every receipt field recomputed from a served view, by the writer's own formulas.

The fingerprints are recomputed from the rebuilt request by the formulas of docs/receipt-spec.md §4
(the same canonical JSON, salted hash, chain link, size rule and digest preimage the writer uses,
imported from `canonical` and `receipts`); nothing the view shows is taken from the receipt it is
checked against. The work is incremental along the run: an epoch's message entries, chain links and
sizes extend its parent's (a C-speed prefix test finds what is shared), so recomputing every epoch
of a run costs about what changed, not the square of the conversation. Tests hold the result equal
to `mint_receipt`. `af_otel.reader.verify` compares the result with the span's receipt.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from af_otel import names
from af_otel.canonical import canonical_json, digits_of, salted_hash
from af_otel.errors import ReaderError
from af_otel.keys import KeyRing
from af_otel.model import FrozenDict, forced_tool
from af_otel.reader.fold import ChainedTuple
from af_otel.reader.view import RunContext, ServedView
from af_otel.receipts import (
    Receipt,
    chain_start,
    chain_step,
    digest_preimage,
    list_bytes,
    receipt_digest,
    request_bytes,
)

__all__ = [
    "STATES_KEPT",
    "KeyArg",
    "basis_entries",
    "key_for",
    "rebuilt_receipt",
    "recompute",
    "recomputer",
    "unsigned_receipt",
]

# Recomputed epochs kept per run and key: enough for a reader walking forward (each epoch needs
# its parent) or fanning out, while a 1,000-epoch run does not hold every epoch's entries at once.
STATES_KEPT: Final = 64
# The schemes whose digest binds the span's context, and the `Receipt` fields that context is.
_BINDS_CONTEXT: Final = frozenset({names.SCHEME_2, names.SCHEME_2_HMAC})
_CONTEXT_FIELDS: Final = (
    "gaps",
    "unrecorded",
    "source",
    "scope_name",
    "scope_version",
    "parent_digest",
    "key_id",
    "base",
    "held",
)
# The params of a view whose params are not on record, as the writer's empty dict.
_NO_PARAMS: Final = FrozenDict()
# One key, or a ring of them (rotation), for keyed receipts.
KeyArg: TypeAlias = bytes | str | KeyRing | None


@dataclass(frozen=True, slots=True)
class _State:
    """What one epoch's recomputation leaves for its children to extend."""

    messages: Sequence[Any]
    entries: Sequence[str]
    links: Sequence[str]  # c_0 .. c_n
    sizes: Sequence[int]  # running canonical size of the first i messages, i = 0..n
    system: Sequence[Any] | None
    system_sums: tuple[tuple[str, ...], str, int]  # pieces, hash, list size
    tools: Sequence[Any] | None
    tool_sums: tuple[tuple[str, ...], int]  # hashes, list size
    before: Sequence[str] | None = None  # the entries this state extended
    shared: int = 0  # how many of them it kept

    def most_kept(self, basis: Sequence[str]) -> int:
        """The leading entries this epoch has in common with ``basis``."""
        if basis is not self.before:
            return ChainedTuple.common_prefix(self.entries, basis)
        most, end = self.shared, min(len(self.entries), len(basis))
        while most < end and self.entries[most] == basis[most]:
            most += 1
        return most


class _Recomputer:
    """Recomputed states of one run under one key, bounded (`STATES_KEPT`)."""

    def __init__(self, context: RunContext, key: bytes | None, digits: int) -> None:
        self.context = context
        self.digits = digits
        self.hash = salted_hash(context.run_id or "", key=key, digits=digits)
        self.states: OrderedDict[int, _State] = OrderedDict()
        self.recorded: OrderedDict[int, tuple[str | None, ...] | None] = OrderedDict()
        self.base: _State | None = None
        # id -> (params, canonical JSON): the object is held, so its id names it while it is here
        self.params: dict[int, tuple[FrozenDict, bytes]] = {}

    def params_json(self, params: FrozenDict) -> bytes:
        """`canonical_json` of a view's params, once per params object of the run (the views of
        a run share one object for params that did not change)."""
        found = self.params.get(id(params))
        if found is None or found[0] is not params:
            found = (params, canonical_json(params))
            self.params[id(params)] = found
        return found[1]

    def _remember(self, cache: OrderedDict[int, Any], epoch: int, value: Any) -> None:
        cache[epoch] = value
        cache.move_to_end(epoch)
        while len(cache) > STATES_KEPT:
            cache.popitem(last=False)

    def _own(self, view: ServedView) -> bool:
        return self.context.views.get(view.epoch) is view

    def state(self, view: ServedView) -> _State:
        chain: list[ServedView] = []
        walked: set[int] = set()
        at: ServedView | None = view
        previous: _State | None = None
        while at is not None:
            found = self.states.get(at.epoch) if self._own(at) else None
            if found is not None:
                previous = found
                break
            chain.append(at)
            at = _nextbasis_entries(at, walked)
        for step in reversed(chain):
            previous = self._step(step.messages or (), step.system, step.tools, previous)
            if self._own(step):
                self._remember(self.states, step.epoch, previous)
        assert previous is not None
        return previous

    def base_state(self, messages: Sequence[Any]) -> _State:
        if self.base is None:
            self.base = self._step(messages, None, None, None)
        return self.base

    def _step(
        self,
        messages: Sequence[Any],
        system: Sequence[Any] | None,
        tools: Sequence[Any] | None,
        before: _State | None,
    ) -> _State:
        new_entries: list[str] = []
        new_links: list[str] = []
        new_sizes: list[int] = []
        hash_text = self.hash
        encode = self.context.canonical
        if before is not None:
            shared = self.context.shared_prefix(messages, before.messages)
            link, size = before.links[shared], before.sizes[shared]
        else:
            shared, link, size = 0, chain_start(hash_text), 0
            new_links.append(link)
            new_sizes.append(0)
        for message in messages[shared:]:
            data = encode(message, keep=False)
            entry = hash_text(data)
            link = chain_step(link, entry, hash_text)
            size += len(data)
            new_entries.append(entry)
            new_links.append(link)
            new_sizes.append(size)
        entries: Sequence[str]
        links: Sequence[str]
        sizes: Sequence[int]
        if before is None:
            entries, links, sizes = tuple(new_entries), tuple(new_links), tuple(new_sizes)
        elif shared == len(before.entries):  # appended only: share the parent's lists
            entries = ChainedTuple.extend(before.entries, tuple(new_entries))
            links = ChainedTuple.extend(before.links, tuple(new_links))
            sizes = ChainedTuple.extend(before.sizes, tuple(new_sizes))
        else:
            entries = tuple(before.entries[:shared]) + tuple(new_entries)
            links = tuple(before.links[: shared + 1]) + tuple(new_links)
            sizes = tuple(before.sizes[: shared + 1]) + tuple(new_sizes)
        if before is not None and system is before.system:
            system_sums = before.system_sums
        else:
            parts = [canonical_json(part) for part in system or ()]
            whole = b"[" + b",".join(parts) + b"]"
            system_sums = (tuple(self.hash(p) for p in parts), self.hash(whole), len(whole))
        if before is not None and tools is before.tools:
            tool_sums = before.tool_sums
        else:
            bodies = [canonical_json(tool) for tool in tools or ()]
            size = list_bytes(len(bodies), sum(len(b) for b in bodies))
            tool_sums = (tuple(hash_text(b) for b in bodies), size)
        return _State(
            messages,
            entries,
            links,
            sizes,
            system,
            system_sums,
            tools,
            tool_sums,
            before.entries if before is not None else None,
            shared,
        )

    def recorded_entries(self, view: ServedView) -> tuple[str | None, ...] | None:
        """The full entry list the record states, from the receipts along the path: each receipt
        gives its ``added`` entries and says its first ``kept`` are its parent's. Positions no
        receipt on record covers are None; None overall when the view has no usable receipt."""
        chain: list[ServedView] = []
        walked: set[int] = set()
        at: ServedView | None = view
        known: tuple[str | None, ...] | None = None
        while at is not None:
            if at.epoch in self.recorded and self._own(at):
                known = self.recorded[at.epoch]
                break
            chain.append(at)
            receipt = at.receipt
            if not (isinstance(receipt, Receipt) and receipt.minted) or receipt.messages_kept == 0:
                at = None
                break
            at = _nextbasis_entries(at, walked)
        for step in reversed(chain):
            receipt = step.receipt
            if not (isinstance(receipt, Receipt) and receipt.minted):
                known = None
            else:
                kept = receipt.messages_kept
                head = (known or ())[:kept]
                head = head + (None,) * (kept - len(head))
                known = head + receipt.messages_added
            if self._own(step):
                self._remember(self.recorded, step.epoch, known)
        return known


def _nextbasis_entries(view: ServedView, walked: set[int]) -> ServedView | None:
    """The view ``view`` grew from, unless the walk (the ids of the views it passed) already
    passed it: a record whose parents loop (an epoch re-numbered onto its own parent) is rebuilt
    from nothing there, so its fields and digest differ instead of the walk never ending."""
    walked.add(id(view))
    basis = view.basis_view
    return None if basis is not None and id(basis) in walked else basis


def recomputer(view: ServedView, key: bytes | None, digits: int) -> _Recomputer:
    context = view.context
    with context.lock:
        found = context.memo.get(("verify", key, digits))
        if not isinstance(found, _Recomputer):
            found = _Recomputer(context, key, digits)
            context.memo[("verify", key, digits)] = found
        return found


def basis_entries(view: ServedView, worker: _Recomputer) -> Sequence[str] | None:
    """The entries the writer compared this epoch's with to count ``kept``: the parent's (or the
    base's, at epoch 0's children); () when the writer held none; None when not on record."""
    if view.basis == 0:
        context = view.context
        if view.base is None:
            return ()
        if context.base_messages is None:
            return None
        return worker.base_state(context.base_messages).entries
    parent = view.basis_view
    if parent is None:
        return None
    receipt = parent.receipt
    if isinstance(receipt, Receipt) and not receipt.minted:
        return ()
    if receipt is None:
        return ()
    return worker.state(parent).entries


def recompute(view: ServedView, *, key: KeyArg = None, kept: int | None = None) -> Receipt:
    """The receipt the view's request gets, recomputed from the view alone.

    ``kept`` is the claim to split ``messages.added`` at (checked by `verify`); without it the
    maximal count against the parent's rebuilt entries is used, as the writer computes it."""
    if not view.run_id:
        raise ReaderError(f"span {view.span_id} names no run: there is no salt to recompute with")
    recorded = view.receipt if isinstance(view.receipt, Receipt) else None
    if isinstance(key, KeyRing):
        keyed = recorded is not None and recorded.minted and recorded.keyed
        secret = key_for(view, recorded, key) if keyed and recorded else None
    else:
        secret = key.encode("utf-8") if isinstance(key, str) else key
    scheme = recorded.scheme if recorded is not None and recorded.scheme else names.SCHEME_2
    worker = recomputer(view, secret, digits_of(scheme))
    with view.context.lock:
        state = worker.state(view)
        basis = basis_entries(view, worker)
    return rebuilt_receipt(view, state, basis, kept, secret, worker, with_entries=True)


def rebuilt_receipt(
    view: ServedView,
    state: _State,
    basis: Sequence[str] | None,
    kept: int | None,
    secret: bytes | None,
    worker: _Recomputer,
    *,
    with_entries: bool = False,
) -> Receipt:
    fields = _rebuilt_fields(view, state, basis, kept, secret, worker, with_entries=with_entries)
    # Built once to take the digest over, then once with it (`replace` costs several builds).
    fields["digest"] = worker.hash(digest_preimage(Receipt(**fields)))
    return Receipt(**fields)


def unsigned_receipt(
    view: ServedView,
    state: _State,
    basis: Sequence[str] | None,
    kept: int | None,
    secret: bytes | None,
    worker: _Recomputer,
) -> tuple[Receipt, str]:
    """`rebuilt_receipt` without its digest, and the digest apart: what `verify` compares field
    by field, one receipt built instead of two (the preimage does not read the digest)."""
    unsigned = Receipt(**_rebuilt_fields(view, state, basis, kept, secret, worker))
    return unsigned, worker.hash(digest_preimage(unsigned))


def _rebuilt_fields(
    view: ServedView,
    state: _State,
    basis: Sequence[str] | None,
    kept: int | None,
    secret: bytes | None,
    worker: _Recomputer,
    *,
    with_entries: bool = False,
) -> dict[str, Any]:
    recorded = view.receipt if isinstance(view.receipt, Receipt) else None
    # The request's parts straight from the view (building a `Request` would copy the messages).
    params_value = view.params if view.params is not None else _NO_PARAMS
    model, provider = view.model, view.provider
    entries = state.entries
    split = (state.most_kept(basis) if basis else 0) if kept is None else min(kept, len(entries))
    params = worker.params_json(params_value)
    size = request_bytes(
        list_bytes(len(entries), state.sizes[-1]),
        model=model,
        provider=provider,
        params=len(params) if params_value else None,
        system=state.system_sums[2] if view.system else None,
        tools=state.tool_sums[1] if view.tools else None,
    )
    scheme = _scheme(recorded, secret)
    fields: dict[str, Any] = {
        "state": "minted",
        "run_id": view.run_id or "",
        # The place the writer bound (its own numbers and lane), which the reader's placement
        # in the run's tree was derived from.
        "epoch": recorded.epoch if recorded is not None else view.epoch,
        "parent": recorded.parent if recorded is not None else view.parent,
        "lane": recorded.lane if recorded is not None else None,
        "scheme": scheme,
        "model": model,
        "provider": provider,
        "system_hash": state.system_sums[1],
        "system_pieces": state.system_sums[0],
        "messages_count": len(entries),
        "messages_chain": state.links[-1],
        "messages_kept": split,
        "messages_added": tuple(entries[split:]),
        "tools_names": tuple(str(tool["name"]) for tool in view.tools or ()),
        "tools_hashes": state.tool_sums[0],
        "tools_forced": forced_tool(params_value.get("tool_choice")),
        "params": params.decode("utf-8"),
        "bytes": size,
        "entries": tuple(entries) if with_entries else None,
    }
    if scheme in _BINDS_CONTEXT and recorded is not None:
        # What af-2 binds besides the request is a claim of the span (checked by the digest of
        # the span's own attributes in `verify`), not something a rebuild recomputes.
        for name in _CONTEXT_FIELDS:
            fields[name] = getattr(recorded, name)
    return fields


def _scheme(recorded: Receipt | None, secret: bytes | None) -> str:
    """The scheme to recompute in: the recorded receipt's, else af-2 (keyed when a key is given)."""
    if recorded is not None and recorded.scheme in names.SCHEMES:
        return recorded.scheme
    return names.SCHEME_2_HMAC if secret is not None else names.SCHEME_2


def key_for(view: ServedView, receipt: Receipt, key: KeyArg) -> bytes | None:
    """The key a keyed receipt is checked with: the one of ``key`` (a key or a ring) whose id is
    the receipt's ``af.receipt.key_id`` (af-2); for af-1, which names no key, the ring's key under
    which the recorded digest recomputes (else its first). Raises `ReaderError` when no key is
    given, or none given has the receipt's key id."""
    if not receipt.keyed:
        return None
    where = f"epoch {view.epoch} of run {view.run_id} ({view.origin or view.span_id})"
    ring = key if isinstance(key, KeyRing) else KeyRing.of(() if key is None else (key,))
    if not ring.keys:
        raise ReaderError(
            f"{where} has a keyed receipt ({receipt.scheme}); pass its key (or set "
            f"{names.ENV_KEY} / {names.ENV_KEY_FILE} / {names.ENV_KEY_RING})"
        )
    if receipt.scheme == names.SCHEME_HMAC:
        matching = (k for k in ring.keys if receipt_digest(receipt, key=k) == receipt.digest)
        return next(matching, ring.keys[0])
    found = ring.find(receipt.key_id or "")
    if found is None:
        raise ReaderError(
            f"{where} was keyed with key id {receipt.key_id}, and no key given has that id "
            f"(given: {', '.join(ring.ids)}); pass that key, unless the id on the span was edited"
        )
    return found
