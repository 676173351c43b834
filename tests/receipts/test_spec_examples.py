"""docs/receipt-spec.md and the code cannot drift: every worked example on the page (af-1's §9,
af-2's §12.7) is parsed here and recomputed, by af_otel and (for the hashes) by hashlib/hmac
directly or by the independent reference minter."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from pathlib import Path
from typing import Any

import pytest

from af_otel import Request, canonical_json, mint_receipt, names, receipt_hash
from af_otel.canonical import key_id
from af_otel.canonical.jcs import _exact
from af_otel.receipts import ReceiptContext, digest_preimage

from .reference import expected_attributes, plain

SPEC = (Path(__file__).parents[2] / "docs" / "receipt-spec.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = SPEC.index(title)
    following = re.compile(r"^#{2,3} ", re.MULTILINE).search(SPEC, start + len(title))
    return SPEC[start : following.start() if following else len(SPEC)]


def _tables(text: str) -> list[list[list[str]]]:
    """Each Markdown table of ``text`` as rows of cells (header and rule rows dropped)."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if current is None:
            current = []
            tables.append(current)
            continue  # header
        if set(line) <= set("|- "):
            continue
        current.append(cells)
    return tables


def _code(cell: str) -> str:
    assert re.fullmatch(r"`[^`]+`", cell), cell
    return cell[1:-1]


def _literal(cell: str) -> Any:
    return json.loads(_code(cell))


JCS_ROWS = _tables(_section("### 9.1"))[0]
HASH_ROWS = _tables(_section("### 9.2"))[0]
RECEIPT = _section("### 9.3")
INTERMEDIATE, PLAIN_ATTRIBUTES, KEYED_ATTRIBUTES = _tables(RECEIPT)
REQUEST = json.loads(re.search(r"```json\n(.*?)\n```", RECEIPT, re.DOTALL).group(1))  # type: ignore[union-attr]
RUN = "run-spec"
AF2 = _section("### 12.7")
AF2_HASHES, AF2_INTERMEDIATE, AF2_PLAIN, AF2_KEYED = _tables(AF2)
AF2_LANE = "5f0c8e2a9b3d4f61"
AF2_CONTEXT = ReceiptContext(
    gaps=("cache-transform",),
    scope_name="opentelemetry.instrumentation.openai_v2",
    scope_version="2.1b0",
)


def test_the_tables_were_found() -> None:
    """The page has the example tables this test reads (a reworded page must still be checked)."""
    assert len(JCS_ROWS) >= 5
    assert len(HASH_ROWS) >= 3
    assert len(INTERMEDIATE) >= 10
    assert len(PLAIN_ATTRIBUTES) >= 15
    assert len(AF2_HASHES) >= 3
    assert len(AF2_INTERMEDIATE) >= 3
    assert len(AF2_PLAIN) >= 20
    assert len(AF2_KEYED) >= 8


@pytest.mark.parametrize("row", JCS_ROWS, ids=lambda row: row[0])
def test_canonical_json_examples(row: list[str]) -> None:
    """Each canonical JSON example on the page is what both paths write."""
    source, expected = _code(row[0]), _code(row[1]).encode("utf-8")
    assert canonical_json(json.loads(source)) == expected
    assert _exact(json.loads(source)) == expected


@pytest.mark.parametrize("row", HASH_ROWS, ids=lambda row: row[0] + row[2])
def test_hash_examples(row: list[str]) -> None:
    """Each H example on the page is receipt_hash's value and the SHA-256/HMAC definition's."""
    salt, text, key, expected = (_literal(cell) for cell in row)
    assert receipt_hash(salt, text, key=key) == expected
    data = (salt + "\x1f" + text).encode()
    digest = hashlib.sha256(data) if key is None else hmac.new(key.encode(), data, hashlib.sha256)
    assert digest.hexdigest()[:16] == expected


def _minted(key: str | None = None) -> tuple[Any, Any]:
    first = {**REQUEST, "messages": REQUEST["messages"][:1]}
    parent = mint_receipt(first, run_id=RUN, epoch=1, scheme="af-1")
    receipt = mint_receipt(
        REQUEST, run_id=RUN, epoch=2, parent=parent if key is None else 1, key=key, scheme="af-1"
    )
    return parent, receipt


def _intermediates() -> dict[str, Any]:
    request = Request.from_dict(REQUEST)
    _, receipt = _minted()
    values: dict[str, Any] = {
        "JCS(plain form)": canonical_json(request.to_dict()).decode(),
        "JCS(system)": canonical_json(list(request.system)).decode(),
        "JCS(D)": digest_preimage(receipt).decode(),
    }
    link = receipt_hash(RUN, "af.messages.v1", scheme="af-1")
    values["c_0"] = link
    for index, message in enumerate(request.messages, start=1):
        values[f"JCS(m_{index})"] = canonical_json(message).decode()
        entry = receipt_hash(RUN, canonical_json(message), scheme="af-1")
        values[f"e_{index}"] = entry
        link = receipt_hash(RUN, link + "\x1f" + entry, scheme="af-1")
        values[f"c_{index}"] = link
    for index, tool in enumerate(request.tools, start=1):
        values[f"JCS(t_{index})"] = canonical_json(tool).decode()
    return values


@pytest.mark.parametrize("row", INTERMEDIATE, ids=lambda row: row[0])
def test_intermediate_values(row: list[str]) -> None:
    """Each intermediate value of the worked receipt is what the code computes."""
    assert _intermediates()[row[0]] == _literal(row[1])


def test_every_attribute_of_the_worked_receipt() -> None:
    """The page lists exactly the worked receipt's span attributes, each with the minted value."""
    _, receipt = _minted()
    minted = {
        **receipt.to_attributes(),
        names.RUN_ID: RUN,
        names.EPOCH: receipt.epoch,
        names.EPOCH_PARENT: receipt.parent,
    }
    on_page = {row[0]: _literal(row[1]) for row in PLAIN_ATTRIBUTES}
    assert on_page == minted


def test_keyed_attributes() -> None:
    """The keyed example's attributes on the page are those minted with the key."""
    _, receipt = _minted(key="spec-key")
    minted = receipt.to_attributes()
    on_page = {row[0]: _literal(row[1]) for row in KEYED_ATTRIBUTES}
    assert on_page == {key: minted[key] for key in on_page}


def _af2_minted(key: str | None = None) -> tuple[Any, Any]:
    first = {**REQUEST, "messages": REQUEST["messages"][:1]}
    place = {"run_id": RUN, "lane": AF2_LANE, "key": key, "context": AF2_CONTEXT}
    parent = mint_receipt(first, epoch=1, **place)  # type: ignore[arg-type]
    return parent, mint_receipt(REQUEST, epoch=2, parent=parent, **place)  # type: ignore[arg-type]


@pytest.mark.parametrize("row", AF2_HASHES, ids=lambda row: row[0] + row[2])
def test_af2_hash_examples(row: list[str]) -> None:
    """Each H2 example is receipt_hash's af-2 value and the whole SHA-256/HMAC hex digest."""
    salt, text, key, expected = (_literal(cell) for cell in row)
    assert receipt_hash(salt, text, key=key, scheme="af-2") == expected
    data = (salt + "\x1f" + text).encode()
    digest = hashlib.sha256(data) if key is None else hmac.new(key.encode(), data, hashlib.sha256)
    assert digest.hexdigest() == expected


def test_af2_intermediate_values() -> None:
    """The parent digest, the key id and JCS(D2) on the page are what the code computes."""
    parent, receipt = _af2_minted()
    values = {
        "parent digest": parent.digest,
        'key_id("spec-key")': key_id("spec-key"),
        "JCS(D2)": digest_preimage(receipt).decode(),
    }
    assert {row[0]: _literal(row[1]) for row in AF2_INTERMEDIATE} == values


def test_af2_attributes_of_the_worked_receipt() -> None:
    """The page lists exactly the af-2 receipt's attributes, as minted and as the independent
    reference minter computes them."""
    parent, receipt = _af2_minted()
    on_page = {row[0]: _literal(row[1]) for row in AF2_PLAIN}
    assert on_page == receipt.to_attributes()
    normalized = plain(Request.from_dict(REQUEST).to_dict())
    span = {
        names.GAPS: list(AF2_CONTEXT.gaps),
        names.RECEIPT_SCOPE_NAME: AF2_CONTEXT.scope_name,
        names.RECEIPT_SCOPE_VERSION: AF2_CONTEXT.scope_version,
        names.RECEIPT_PARENT_DIGEST: parent.digest,
        names.EPOCH_LANE: AF2_LANE,
    }
    reference = expected_attributes(
        normalized,
        run_id=RUN,
        epoch=2,
        parent=1,
        parent_entries=list(parent.entries),
        scheme="af-2",
        span=span,
    )
    assert on_page == reference


def test_af2_keyed_attributes() -> None:
    """The keyed af-2 example's attributes on the page are those minted with the key."""
    _, receipt = _af2_minted(key="spec-key")
    minted = receipt.to_attributes()
    on_page = {row[0]: _literal(row[1]) for row in AF2_KEYED}
    assert on_page == {key: minted[key] for key in on_page}


def test_field_table_names_every_receipt_attribute() -> None:
    """§4's and §12.2's field tables name every af.receipt.* attribute af_otel.names defines but
    the absent reason."""
    table = _section("## 4. The receipt fields") + _section("### 12.2")
    receipt_names = {
        value
        for key, value in vars(names).items()
        if key.startswith("RECEIPT_") and isinstance(value, str)
    }
    for name in receipt_names - {names.RECEIPT_ABSENT_REASON}:
        assert f"`{name}`" in table, name
