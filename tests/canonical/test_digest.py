"""The salted receipt hash H: published vectors, committed golden vectors computed with node:crypto,
HMAC mode against the standard library, and the refusals."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from af_otel import receipt_hash
from af_otel.canonical import address_of, key_bytes

GOLDEN = json.loads((Path(__file__).parent / "golden" / "receipt-hash.json").read_text("utf-8"))


# Plain H of published inputs, docs/receipt-spec.md §9.2 among them (fixed vectors: a change to
# H shows here).
PUBLISHED = [
    ("run-1", "hello", "e4d01446ceea21bc"),
    ("run-1", "", "5b69656befee33b3"),
    ("run-a", "You are a helpful assistant.", "c5950bac09d98c6e"),
    ("run-b", "You are a helpful assistant.", "5c3eff942669665f"),
    ("run-1", "π ≈ 3.14159 — 🐛", "27aaae1339c18324"),
    ("r", "SYSTEM_MARKER you are a bot", "9acfd6f2ed866cc8"),
    ("run-1", "\x1f<unserializable>", "c72202e5ba34d272"),
    ("run-1", "agentfootprint.transform.chain.v1", "ba54db6c4d81ed86"),
    ("run-1", '{"messages":[{"content":"hi","role":"user"}],"model":"m"}', "7c7dfa544419685a"),
    ("run-1", "user\x1ehi\x1e\x1e\x1e\x1e", "ca3123b1f7e24488"),
    (
        "run-1",
        '{"description":"looks things up","inputSchema":{"properties":{"q":{"type":"string"}},'
        '"type":"object"},"name":"lookup"}',
        "988cae9838273cfc",
    ),
]


@pytest.mark.parametrize(("salt", "text", "expected"), PUBLISHED)
def test_published_vectors(salt: str, text: str, expected: str) -> None:
    """H matches every published plain-hash vector, given as str or as UTF-8 bytes."""
    assert receipt_hash(salt, text) == expected
    assert receipt_hash(salt, text.encode("utf-8")) == expected


@pytest.mark.parametrize("case", GOLDEN["hashes"], ids=lambda c: f"{c['salt']}|{c['key_hex']}")
def test_golden_vectors(case: dict[str, str | None]) -> None:
    """H and keyed H match the committed vectors computed by node:crypto."""
    key = bytes.fromhex(case["key_hex"]) if case["key_hex"] is not None else None
    assert receipt_hash(str(case["salt"]), str(case["text"]), key=key) == case["h"]


def _stdlib_hmac(salt: str, text: str, key: bytes) -> str:
    data = salt.encode() + b"\x1f" + text.encode()
    return hmac.new(key, data, hashlib.sha256).hexdigest()[:16]


_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


class TestKeyed:
    @given(salt=_text.filter(bool), text=_text, key=st.binary(min_size=1, max_size=64))
    @settings(max_examples=150)
    def test_hmac_equals_stdlib(self, salt: str, text: str, key: bytes) -> None:
        """Keyed H is HMAC-SHA256 keyed by the secret over salt + 0x1f + text, first 16 digits."""
        assert receipt_hash(salt, text, key=key) == _stdlib_hmac(salt, text, key)

    def test_str_key_is_its_utf8(self) -> None:
        """A key given as text is its UTF-8 bytes."""
        assert receipt_hash("run-1", "hello", key="sécret") == _stdlib_hmac(
            "run-1", "hello", "sécret".encode()
        )
        assert key_bytes("sécret") == "sécret".encode()
        assert key_bytes(None) is None

    def test_keyed_differs_from_plain(self) -> None:
        """The keyed hash of a text is not its plain hash."""
        assert receipt_hash("run-1", "hello", key=b"k") != receipt_hash("run-1", "hello")


class TestPlain:
    @given(salt=_text.filter(bool), text=_text)
    @settings(max_examples=150)
    def test_equals_sha256_definition(self, salt: str, text: str) -> None:
        """H is the first 16 hex digits of SHA-256 over UTF-8 of salt + 0x1f + text."""
        expected = hashlib.sha256((salt + "\x1f" + text).encode()).hexdigest()[:16]
        assert receipt_hash(salt, text) == expected

    def test_lone_surrogates_hash_as_replacement_characters(self) -> None:
        """Lone surrogates in salt or text hash as U+FFFD."""
        assert receipt_hash("r\ud800", "a\udc00") == receipt_hash("r\ufffd", "a\ufffd")


class TestRefusals:
    def test_empty_salt_raises(self) -> None:
        """An empty salt raises ValueError: an unsalted hash of a short text is a guess away."""
        with pytest.raises(ValueError, match="salt"):
            receipt_hash("", "hello")

    @pytest.mark.parametrize("key", [b"", ""])
    def test_empty_key_raises(self, key: bytes | str) -> None:
        """An empty key raises ValueError rather than naming a keyed scheme anyone can compute."""
        with pytest.raises(ValueError, match="key"):
            receipt_hash("run-1", "hello", key=key)


def test_store_address_is_unsalted_full_sha256() -> None:
    """A store address is sha256: and all 64 hex digits of the bytes' SHA-256."""
    assert address_of(b"hello") == "sha256:" + hashlib.sha256(b"hello").hexdigest()
