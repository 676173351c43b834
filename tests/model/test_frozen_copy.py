"""`replaced` copies a frozen, slotted value as `dataclasses.replace` does, and leaves every
other value to `dataclasses.replace` itself."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from af_otel.model import Request
from af_otel.model.frozen_copy import replaced
from af_otel.receipts import Receipt


@dataclasses.dataclass(frozen=True, slots=True)
class Plain:
    a: int
    b: str = "b"
    c: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class One:
    only: int


@dataclasses.dataclass(frozen=True, slots=True)
class Checked:
    a: int

    def __post_init__(self) -> None:
        if self.a < 0:
            raise ValueError("a must not be negative")


@dataclasses.dataclass(frozen=True)
class Unslotted:
    a: int


@dataclasses.dataclass(frozen=True, slots=True)
class Derived:
    a: int
    b: int = dataclasses.field(init=False, default=0)


RECEIPT = Receipt("minted", "run", 3, 2, None, digest="d" * 64)
REQUEST = Request.from_dict({"messages": [{"role": "user", "content": "hi"}], "model": "m"})


@given(a=st.integers(), b=st.text(), c=st.lists(st.integers()).map(tuple))
def test_a_copy_equals_dataclasses_replace(a: int, b: str, c: tuple[int, ...]) -> None:
    """Any subset of changes gives the value `dataclasses.replace` gives, the original untouched."""
    value = Plain(1, "x", (1,))
    for changes in ({"a": a}, {"b": b, "c": c}, {"a": a, "b": b, "c": c}, {}):
        copy = replaced(value, **changes)
        assert copy == dataclasses.replace(value, **changes)
        assert type(copy) is Plain
        assert copy is not value
    assert value == Plain(1, "x", (1,))


@pytest.mark.parametrize(
    ("value", "changes"),
    [
        (RECEIPT, {"digest": "e" * 64}),
        (RECEIPT, {"gaps": ("content-cut",), "unrecorded": ("tools",)}),
        (RECEIPT, {"entries": None}),
        (REQUEST, {"messages": ()}),
        (One(1), {"only": 2}),
    ],
)
def test_the_emit_paths_values_copy_as_dataclasses_replace_does(
    value: Any, changes: dict[str, Any]
) -> None:
    """The receipt and the request, as the engine copies them."""
    copy = replaced(value, **changes)
    assert copy == dataclasses.replace(value, **changes)
    assert all(getattr(copy, name) is item for name, item in changes.items())


def test_a_copy_stays_frozen() -> None:
    """The copy refuses assignment as its class does."""
    copy = replaced(Plain(1), a=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.a = 3  # type: ignore[misc]


def test_a_name_that_is_no_field_raises_as_replace_does() -> None:
    with pytest.raises(TypeError):
        replaced(Plain(1), d=4)


def test_a_class_that_checks_its_fields_still_checks_them() -> None:
    """A `__post_init__` runs: such a class is copied by `dataclasses.replace`."""
    assert replaced(Checked(1), a=2) == Checked(2)
    with pytest.raises(ValueError, match="negative"):
        replaced(Checked(1), a=-1)


def test_other_dataclasses_are_copied_by_dataclasses_replace() -> None:
    """Without slots, or with a field ``__init__`` does not set, the copy is `replace`'s."""
    assert replaced(Unslotted(1), a=2) == Unslotted(2)
    derived = replaced(Derived(1), a=5)
    assert derived == dataclasses.replace(Derived(1), a=5)
    with pytest.raises(ValueError):
        replaced(Derived(1), b=5)  # init=False: replace refuses it
