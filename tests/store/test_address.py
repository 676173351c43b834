"""The address rule: `sha256:` + 64 lowercase hex of the bytes, and nothing else gets through."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from af_otel.errors import InvalidAddressError, StoreError
from af_otel.store import address_of, validate_address
from af_otel.store.address import blob_parts

HEX = "0123456789abcdef"
GOOD = "sha256:" + "ab" * 32


def is_valid(candidate: object) -> bool:
    """An oracle written independently of the implementation."""
    if not isinstance(candidate, str) or not candidate.startswith("sha256:"):
        return False
    digits = candidate.removeprefix("sha256:")
    return len(digits) == 64 and all(c in HEX for c in digits)


class TestAddressOf:
    def test_known_vectors(self) -> None:
        """The address of the empty string and of b"hello" are the published SHA-256 digests."""
        assert address_of(b"") == (
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        )
        assert address_of(b"hello") == (
            "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        )

    @given(st.binary(max_size=4096))
    @settings(max_examples=100)
    def test_every_address_of_bytes_is_valid(self, data: bytes) -> None:
        """Whatever the bytes, their address passes validation and is unsalted SHA-256."""
        address = address_of(data)
        assert validate_address(address) == address
        assert address == "sha256:" + hashlib.sha256(data).hexdigest()


class TestValidateAddress:
    @pytest.mark.parametrize(
        "candidate",
        [
            "",
            "sha256:",
            "../" * 30,
            "sha256:" + "../" * 21 + "a",
            "sha256:../../../../../../../../../../../../../../../../etc/passwd",
            "sha256:" + "AB" * 32,
            "SHA256:" + "ab" * 32,
            "sha512:" + "ab" * 32,
            "sha256:" + "a" * 63,
            "sha256:" + "a" * 65,
            GOOD + "\n",
            "\n" + GOOD,
            GOOD + "\x00",
            "sha256:" + "a" * 63 + "\x00",
            " " + GOOD,
            "sha256:" + "a" * 62 + "/a",
            "sha256:" + "a" * 62 + "\\a",
            "sha256: " + "a" * 63,
            "/etc/passwd",
            "/" + "a" * 70,
            "C:\\Windows\\" + "a" * 60,
            "sha256:" + "٣" * 64,  # Arabic-Indic digit: \d would take it
            "sha256:" + "ａ" * 64,  # fullwidth a
            "sha256:" + "g" * 64,
            "sha256:" + "ab" * 32 + "ab",
        ],
    )
    def test_rejects_near_misses(self, candidate: str) -> None:
        """Traversal, case, length, NUL, newline, other algorithms and other digits are refused."""
        with pytest.raises(InvalidAddressError, match="invalid store address"):
            validate_address(candidate)

    @pytest.mark.parametrize("candidate", [None, 7, b"sha256:" + b"ab" * 32, ["sha256:"]])
    def test_rejects_non_strings(self, candidate: object) -> None:
        """A value that is not a string is an invalid address, not a TypeError."""
        with pytest.raises(InvalidAddressError):
            validate_address(candidate)  # type: ignore[arg-type]

    @given(st.text(max_size=120))
    @settings(max_examples=200)
    def test_random_text(self, candidate: str) -> None:
        """Random text is accepted exactly when the independent oracle says it is an address."""
        if is_valid(candidate):
            assert validate_address(candidate) == candidate
        else:
            with pytest.raises(InvalidAddressError):
                validate_address(candidate)

    @given(
        st.text(alphabet=HEX + "ABCDEF./\\\x00\n :", min_size=60, max_size=68),
        st.sampled_from(["sha256:", "SHA256:", "sha256", "sha256::", ""]),
    )
    @settings(max_examples=200)
    def test_address_shaped_text(self, digits: str, prefix: str) -> None:
        """Text built to look like an address is accepted only when it is exactly one."""
        candidate = prefix + digits
        if is_valid(candidate):
            assert validate_address(candidate) == candidate
        else:
            with pytest.raises(InvalidAddressError):
                validate_address(candidate)

    def test_valid_address_is_returned_unchanged(self) -> None:
        """A valid address comes back as the same string."""
        assert validate_address(GOOD) is GOOD

    def test_error_is_a_store_error_and_a_value_error(self) -> None:
        """Callers may catch the store's root error or the builtin ValueError."""
        with pytest.raises(StoreError):
            validate_address("nope")
        with pytest.raises(ValueError):
            validate_address("nope")

    def test_long_input_is_cut_in_the_message(self) -> None:
        """An address read off a span can be huge; the message shows only its start."""
        with pytest.raises(InvalidAddressError) as caught:
            validate_address("x" * 100_000)
        assert len(str(caught.value)) < 200


class TestBlobParts:
    def test_splits_into_layout_parts(self) -> None:
        """A valid address splits into the algorithm, a 2-digit shard and a 62-digit name."""
        assert blob_parts(GOOD) == ("sha256", "ab", "ab" * 31)

    def test_refuses_invalid_address(self) -> None:
        """The layout is never computed from an address that failed validation."""
        with pytest.raises(InvalidAddressError):
            blob_parts("sha256:" + "../" * 21 + "a")
