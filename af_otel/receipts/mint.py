"""`mint_receipt`: the pure function the processor calls at every LLM call.

It never raises: a request that is not GenAI-shaped or cannot be canonicalized gives an absent
receipt with ``content-unreadable``; an empty run id gives ``no-run-id`` (salting with nothing would
ship hashes a dictionary attack can read); a bug of af_otel's own gives state ``error``.
`docs/receipt-spec.md` states how every field is computed.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from af_otel import names
from af_otel.canonical import canonical_json, salted_hash
from af_otel.canonical.digest import digits_of, key_bytes, key_id
from af_otel.errors import CanonicalJSONError, RequestShapeError
from af_otel.model import Request
from af_otel.model.frozen_copy import replaced
from af_otel.receipts.memo import Piece, ReceiptDigests, _Hasher
from af_otel.receipts.receipt import Receipt

_SIZE: Callable[[Piece], int] = operator.attrgetter("size")
# The scheme new receipts are minted in (keyed: its -hmac form).
DEFAULT_FAMILY: Final = names.SCHEME_2
_FAMILY: Final = {
    names.SCHEME_PLAIN: names.SCHEME_PLAIN,
    names.SCHEME_HMAC: names.SCHEME_PLAIN,
    names.SCHEME_2: names.SCHEME_2,
    names.SCHEME_2_HMAC: names.SCHEME_2,
}
_KEYED: Final = {names.SCHEME_PLAIN: names.SCHEME_HMAC, names.SCHEME_2: names.SCHEME_2_HMAC}


@dataclass(frozen=True, slots=True)
class ReceiptContext:
    """What an af-2 digest binds besides the request and the call's place (docs/receipt-spec.md
    §12): the gap kinds the writer sets on the span (``af.gaps``), the request fields its
    instrumentation does not record, where the request was read (``wire`` or
    ``instrumentation``), the instrumentation scope of the span, the run's base address and the
    held-history note. af-1 receipts ignore it."""

    gaps: tuple[str, ...] = ()
    unrecorded: tuple[str, ...] = ()
    source: str = names.SOURCE_INSTRUMENTATION
    scope_name: str | None = None
    scope_version: str | None = None
    base: str | None = None
    held: str | None = None


_NO_CONTEXT: Final = ReceiptContext()


def mint_receipt(
    request: Request | Mapping[str, Any],
    *,
    run_id: str,
    epoch: int,
    parent: int | Receipt = 0,
    digests: ReceiptDigests | None = None,
    key: bytes | str | None = None,
    lane: str | None = None,
    scheme: str | None = None,
    context: ReceiptContext | None = None,
    parent_digest: str | None = None,
    seal: bool = True,
    prefix: tuple[Any, ...] | None = None,
) -> Receipt:
    """Mint the receipt of ``request`` for call ``epoch`` of run ``run_id``.

    ``parent`` is the parent epoch number, or the parent's `Receipt` (then ``messages.kept`` counts
    the leading entries identical to the parent's, and an af-2 receipt binds the parent's digest;
    epoch 0 is the run's base, whose digest is the empty one). ``digests`` is the run-scoped memo;
    results are identical with or without it. ``key`` switches to keyed hashing (``af-2-hmac``);
    an empty key is no key (``af-2``, and the scheme says so). ``lane`` is the writer's
    ``af.epoch.lane``, bound by the digest with the epoch and its parent. ``scheme`` is ``af-2``
    (the default) or ``af-1`` (its ``-hmac`` form is chosen by ``key``); ``context`` and
    ``parent_digest`` (else the parent receipt's) are what af-2 binds besides. ``seal=False``
    leaves the digest to `seal_receipt` (the processor knows the span's gaps only after the mint).
    ``prefix``: a tuple the request's messages were built to start with, its very objects in
    front (the emit path's incremental reads), so the memo need not compare them one by one.

    Never raises: an unreadable request gives ``absent``/``content-unreadable``, an empty run id
    ``absent``/``no-run-id``, and a failure of af_otel itself ``error``/``internal-error``.
    """
    parent_epoch = parent.epoch if isinstance(parent, Receipt) else parent
    if not isinstance(parent_epoch, int) or isinstance(parent_epoch, bool):
        parent_epoch = 0
    if not isinstance(run_id, str) or not run_id:
        return Receipt(names.STATE_ABSENT, "", epoch, parent_epoch, names.REASON_NO_RUN_ID)
    try:
        normalized = request if isinstance(request, Request) else Request.from_dict(request)
        secret = key_bytes(key) or None
        family = _FAMILY[scheme if scheme is not None else DEFAULT_FAMILY]
        memo = digests if digests is not None else ReceiptDigests()
        if family == names.SCHEME_PLAIN:
            bound: dict[str, Any] = {"scheme": _KEYED[family] if secret else family}
        else:
            if parent_digest is None:
                parent_digest = _digest_of(parent)
            bound = _bound(
                context or _NO_CONTEXT, parent_digest, key_id(secret) if secret else None
            )
        with memo.lock:
            hasher = memo.begin(run_id, secret, digits_of(family))
            receipt = _mint(
                normalized, run_id, epoch, parent, parent_epoch, memo, hasher, lane, bound, prefix
            )
            memo.commit()
        if not seal and family != names.SCHEME_PLAIN:
            return receipt
        return replaced(receipt, digest=hasher.hash_bytes(digest_preimage(receipt)))
    except (RequestShapeError, CanonicalJSONError):
        return Receipt(names.STATE_ABSENT, run_id, epoch, parent_epoch, names.REASON_UNREADABLE)
    # The emit path never raises: a failure is state "error" (docs/receipt-spec.md §6).
    except Exception:
        return Receipt(names.STATE_ERROR, run_id, epoch, parent_epoch, names.REASON_INTERNAL_ERROR)


def seal_receipt(
    receipt: Receipt,
    *,
    key: bytes | str | None = None,
    gaps: Sequence[str] | None = None,
    unrecorded: Sequence[str] | None = None,
) -> Receipt:
    """``receipt`` with its digest computed, and (af-2) the span's final ``gaps`` and
    ``unrecorded`` fields bound when given. A receipt that is not minted is returned as it is.
    Never raises: a failure gives state ``error`` (the emit path calls it)."""
    if not receipt.minted:
        return receipt
    try:
        if receipt.binds_context:
            receipt = replaced(
                receipt,
                gaps=tuple(gaps) if gaps is not None else receipt.gaps,
                unrecorded=tuple(unrecorded) if unrecorded is not None else receipt.unrecorded,
            )
        return replaced(receipt, digest=receipt_digest(receipt, key=key))
    except Exception:
        return Receipt(
            names.STATE_ERROR,
            receipt.run_id,
            receipt.epoch,
            receipt.parent,
            names.REASON_INTERNAL_ERROR,
        )


def receipt_digest(receipt: Receipt, *, key: bytes | str | None = None) -> str | None:
    """Recompute ``af.receipt.digest`` from the receipt's own fields (and its run id as salt):
    what a reader compares with the digest a span carries, to tell a receipt cut or edited on
    the way. None when the receipt is not minted, or is keyed and no key is given."""
    if not receipt.minted or not receipt.run_id or receipt.scheme not in names.SCHEMES:
        return None
    secret = key_bytes(key) if receipt.keyed else None
    if receipt.keyed and not secret:
        return None
    digits = digits_of(receipt.scheme)
    return salted_hash(receipt.run_id, key=secret, digits=digits)(digest_preimage(receipt))


def _digest_of(parent: int | Receipt) -> str:
    """The parent digest an af-2 receipt binds: the parent receipt's, or the empty one (the
    base, epoch 0, or a parent known by its number only)."""
    if isinstance(parent, Receipt) and parent.epoch > 0 and parent.digest:
        return parent.digest
    return ""


def _bound(context: ReceiptContext, parent_digest: str, key_ident: str | None) -> dict[str, Any]:
    """The `Receipt` fields of an af-2 receipt besides its fingerprints."""
    return {
        "scheme": names.SCHEME_2_HMAC if key_ident is not None else names.SCHEME_2,
        "gaps": tuple(context.gaps),
        "unrecorded": tuple(context.unrecorded),
        "source": context.source,
        "scope_name": context.scope_name,
        "scope_version": context.scope_version,
        "base": context.base,
        "held": context.held,
        "parent_digest": parent_digest or None,
        "key_id": key_ident,
    }


def _mint(
    request: Request,
    run_id: str,
    epoch: int,
    parent: int | Receipt,
    parent_epoch: int,
    memo: ReceiptDigests,
    hasher: _Hasher,
    lane: str | None,
    bound: dict[str, Any],
    prefix: tuple[Any, ...] | None = None,
) -> Receipt:
    system = memo.pieces(hasher, "system", request.system, keep_body=True)
    entries, messages_size = memo.message_entries(hasher, request.messages, prefix)
    tools = memo.pieces(hasher, "tools", request.tools, keep_body=False)
    chain = memo.chain(hasher, entries)
    system_hash = memo.hash_memo(hasher, _assemble(hasher, system))
    params = hasher.canonical(request.params)
    parent_entries = parent.entries if isinstance(parent, Receipt) else None
    kept = memo.kept(parent_entries, entries)
    return Receipt(
        state=names.STATE_MINTED,
        run_id=run_id,
        epoch=epoch,
        parent=parent_epoch,
        model=request.model,
        provider=request.provider,
        system_hash=system_hash,
        system_pieces=tuple(piece.digest for piece in system),
        messages_count=len(entries),
        messages_chain=chain,
        messages_kept=kept,
        messages_added=entries.texts(kept),
        tools_names=request.tool_names,
        tools_hashes=tuple(piece.digest for piece in tools),
        tools_forced=request.forced_tool(),
        params=params.decode("utf-8"),
        bytes=request_size(
            request, system, list_bytes(len(entries), messages_size), tools, len(params)
        ),
        entries=entries,
        lane=lane,
        **bound,  # the scheme, and what af-2 binds besides
    )


def digest_preimage(receipt: Receipt) -> bytes:
    """What ``af.receipt.digest`` is taken over: JCS of the fingerprint attributes plus the call's
    place in the run (``af.epoch``, ``af.epoch.parent``, and ``af.epoch.lane`` when the span has
    one), so a receipt moved to another span fails. In af-2 also everything the verdict depends
    on (§12): every key of `_BOUND` is present, an absent value as ``""``."""
    body = receipt.fingerprint_attributes()
    body[names.EPOCH] = receipt.epoch
    body[names.EPOCH_PARENT] = receipt.parent
    if receipt.binds_context:
        body[names.EPOCH_LANE] = receipt.lane or ""
        body[names.GAPS] = list(receipt.gaps)
        body[names.RUN_BASE] = receipt.base or ""
        body[names.HELD_HISTORY] = receipt.held or ""
        for name in _BOUND:
            body.setdefault(name, "")
    elif receipt.lane is not None:
        body[names.EPOCH_LANE] = receipt.lane
    return canonical_json(body)


# The af.receipt.* attributes of af-2 that are left off a span when empty, and bound as "".
_BOUND: Final = (
    names.RECEIPT_SCOPE_NAME,
    names.RECEIPT_SCOPE_VERSION,
    names.RECEIPT_PARENT_DIGEST,
    names.RECEIPT_KEY_ID,
)


def _assemble(hasher: _Hasher, pieces: tuple[Piece, ...]) -> bytes:
    """JCS of a list from its items' canonical bytes (a big item is canonicalized again)."""
    bodies = [p.body if p.body is not None else hasher.canonical(p.value) for p in pieces]
    return b"[" + b",".join(bodies) + b"]"


def _list_size(pieces: tuple[Piece, ...]) -> int:
    return list_bytes(len(pieces), sum(map(_SIZE, pieces)))


def list_bytes(count: int, total: int) -> int:
    """The canonical size of a list of ``count`` items whose canonical sizes add up to ``total``:
    brackets and the commas between items."""
    return 2 + total + max(0, count - 1)


def request_size(
    request: Request,
    system: tuple[Piece, ...],
    messages: int,
    tools: tuple[Piece, ...],
    params_size: int,
) -> int:
    """``len(canonical_json(request.to_dict()))`` from the pieces' sizes (``messages``: the
    canonical size of the messages list), without re-serializing."""
    return request_bytes(
        messages,
        model=request.model,
        provider=request.provider,
        params=params_size if request.params else None,
        system=_list_size(system) if request.system else None,
        tools=_list_size(tools) if request.tools else None,
    )


def request_bytes(
    messages: int,
    *,
    model: str | None,
    provider: str | None,
    params: int | None,
    system: int | None,
    tools: int | None,
) -> int:
    """``af.receipt.bytes``: the canonical size of the request from its members' canonical sizes
    (``messages``, ``params``, ``system``, ``tools``; None for a member the request leaves out)
    and its ``model`` and ``provider`` values (None when absent)."""
    members = {
        "messages": messages,
        "model": len(canonical_json(model)) if model is not None else None,
        "params": params,
        "provider": len(canonical_json(provider)) if provider is not None else None,
        "system": system,
        "tools": tools,
    }
    sizes = [(k, size) for k, size in members.items() if size is not None]
    # {"key":value,...}: braces, quoted keys, colons, commas
    return 2 + sum(len(k) + 3 + size for k, size in sizes) + len(sizes) - 1
