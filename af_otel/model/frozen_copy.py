"""`replaced`: `dataclasses.replace` for the emit path's frozen, slotted values, at a third of its
cost. Each LLM span made ten such copies (a receipt of 31 fields four times), and
`dataclasses.replace` walks the fields in Python, then calls the generated ``__init__``, which
only stores its arguments again; here a value's fields are read in one call and stored through the
class's slot descriptors.

Only a class whose copy that would equal `dataclasses.replace`'s takes the short way: a
dataclass with slots of exactly its fields, every field set by the ``__init__`` that `dataclass`
generated, and no ``__post_init__``; any other value, or a change naming no field, goes to
`dataclasses.replace` itself. One plan is kept per class met: a bound set, the classes in code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from typing import Any, Final, TypeVar

__all__ = ["replaced"]

T = TypeVar("T")

# A class's field reader, its slot setters in field order, and its field names; None: the long way.
_Plan = tuple[
    Callable[[Any], tuple[Any, ...]], tuple[Callable[[Any, Any], None], ...], frozenset[str]
]
_PLANS: Final[dict[type, _Plan | None]] = {}


def replaced(value: T, /, **changes: Any) -> T:
    """A copy of the frozen dataclass ``value`` with ``changes``, as `dataclasses.replace`."""
    kind = type(value)
    try:
        plan = _PLANS[kind]
    except KeyError:
        plan = _PLANS[kind] = _plan(kind)
    if plan is None or not changes.keys() <= plan[2]:
        return dataclasses.replace(value, **changes)  # type: ignore[type-var]
    read, setters, _ = plan
    copy = object.__new__(kind)
    for store, item in zip(setters, read(value), strict=True):
        store(copy, item)
    for name, item in changes.items():
        object.__setattr__(copy, name, item)
    return copy


def _plan(kind: type) -> _Plan | None:
    if not dataclasses.is_dataclass(kind) or hasattr(kind, "__post_init__"):
        return None
    fields = dataclasses.fields(kind)
    names = tuple(field.name for field in fields)
    init = kind.__dict__.get("__init__")
    generated = getattr(getattr(init, "__code__", None), "co_filename", None) == "<string>"
    if not names or not generated or kind.__dict__.get("__slots__") != names:
        return None
    if not all(field.init for field in fields):
        return None
    read = attrgetter(*names)
    reader: Callable[[Any], tuple[Any, ...]] = (
        read if len(names) > 1 else (lambda value: (read(value),))
    )
    setters = tuple(kind.__dict__[name].__set__ for name in names)
    return reader, setters, frozenset(names)
