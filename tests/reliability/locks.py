"""Find af_otel's locks by themselves, without a list of them: in the source (every construction of
a threading, queue or process primitive) and at run time (every lock reachable from af_otel's
modules and from the objects a test built).

The fork tests hold what these finders find against `af_otel.forksafe`: a lock made anywhere but
there, or a live lock it does not know, is one a forked child would not get back unlocked.
"""

from __future__ import annotations

import ast
import collections
import concurrent.futures
import importlib
import pkgutil
import queue
import sys
import threading
import types
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import af_otel

PACKAGE = Path(af_otel.__file__).parent
MECHANISM = PACKAGE / "forksafe.py"
MECHANISM_MODULE = "af_otel.forksafe"

# What a module may not make itself (each is a lock, holds one, or starts threads).
PRIMITIVES = frozenset(
    {
        *(
            f"threading.{name}"
            for name in (
                "Lock",
                "RLock",
                "Condition",
                "Semaphore",
                "BoundedSemaphore",
                "Event",
                "Barrier",
                "Thread",
                "Timer",
                "local",
                "_RLock",
                "_CRLock",
                "_PyRLock",
            )
        ),
        *(
            f"_thread.{name}"
            for name in (
                "allocate_lock",
                "allocate",
                "LockType",
                "RLock",
                "start_new_thread",
                "start_new",
                "_local",
            )
        ),
        *(f"queue.{name}" for name in ("Queue", "SimpleQueue", "LifoQueue", "PriorityQueue")),
        *(
            f"{module}.{name}"
            for module in ("concurrent.futures", "concurrent.futures.thread")
            for name in ("ThreadPoolExecutor", "ProcessPoolExecutor")
        ),
        "concurrent.futures.process.ProcessPoolExecutor",
    }
)
# Any name of these modules counts: every one of them makes processes, pipes or locks.
PRIMITIVE_MODULES = ("multiprocessing", "concurrent.futures.process")


@dataclass(frozen=True, slots=True)
class Made:
    """One place in the source that names a primitive."""

    path: Path
    line: int
    name: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name}"


def _is_primitive(dotted: str) -> bool:
    return dotted in PRIMITIVES or any(
        dotted == module or dotted.startswith(module + ".") for module in PRIMITIVE_MODULES
    )


class _Names(ast.NodeVisitor):
    """Resolves each name and attribute chain of one module to the dotted name it imports."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.aliases: dict[str, str] = {}
        self.found: list[Made] = []

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:  # `import a.b` binds `a`
                head = alias.name.split(".")[0]
                self.aliases[head] = head
            self._check(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module is None or node.level:
            return
        for alias in node.names:
            dotted = f"{node.module}.{alias.name}"
            self.aliases[alias.asname or alias.name] = dotted
            self._check(dotted, node)

    def visit_Name(self, node: ast.Name) -> None:
        dotted = self.aliases.get(node.id)
        if dotted is not None:
            self._check(dotted, node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = self._dotted(node)
        if dotted is not None and _is_primitive(dotted):
            self._check(dotted, node)
            return  # the chain below it names its module, not a primitive
        self.generic_visit(node)

    def _dotted(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._dotted(node.value)
            return f"{base}.{node.attr}" if base is not None else None
        return None

    def _check(self, dotted: str, node: ast.AST) -> None:
        if _is_primitive(dotted):
            self.found.append(Made(self.path, getattr(node, "lineno", 0), dotted))


def primitives_in(paths: Iterable[Path]) -> list[Made]:
    """Every place in these Python files that imports or names a threading, queue or process
    primitive (a call, a reference such as ``default_factory=threading.Lock``, an annotation)."""
    found: list[Made] = []
    for path in sorted(paths):
        names = _Names(path)
        names.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        found.extend(names.found)
    return found


def package_sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def mechanism_calls(paths: Iterable[Path]) -> list[Made]:
    """Every call of ``forksafe.lock``, ``forksafe.rlock`` or ``forksafe.thread_pool``."""
    found: list[Made] = []
    for path in sorted(paths):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "forksafe"
                and node.func.attr in ("lock", "rlock", "thread_pool")
            ):
                found.append(Made(path, node.lineno, f"forksafe.{node.func.attr}"))
    return found


# -- at run time -------------------------------------------------------------------------------

LOCK_TYPES: tuple[type, ...] = (
    type(threading.Lock()),
    type(threading.RLock()),
    threading.Condition,
    threading.Semaphore,
    threading.Event,
    threading.Barrier,
    threading.Thread,
    threading.local,
    queue.Queue,
    queue.SimpleQueue,
    concurrent.futures.Executor,
    concurrent.futures.Future,
)
_CONTAINERS: tuple[type, ...] = (
    dict,
    list,
    tuple,
    set,
    frozenset,
    collections.deque,
    types.MappingProxyType,
)
_WEAK: tuple[type, ...] = (weakref.WeakSet, weakref.WeakValueDictionary, weakref.WeakKeyDictionary)


@dataclass(frozen=True, slots=True)
class Found:
    """One live lock: how it was reached, and its kind (its owner's class or module, and name)."""

    path: str
    kind: str
    lock: Any


def import_package() -> list[str]:
    """Import every module of af_otel that imports (an optional extra may be missing)."""
    missing = []
    for module in pkgutil.walk_packages([str(PACKAGE)], prefix="af_otel."):
        try:
            importlib.import_module(module.name)
        except ImportError:
            missing.append(module.name)
    return missing


def _ours(thing: object) -> bool:
    module = getattr(thing, "__module__", None) or ""
    return isinstance(module, str) and (module == "af_otel" or module.startswith("af_otel."))


def _children(thing: object) -> Iterator[tuple[str, object]]:
    """What ``thing`` refers to, each with a label, for the objects the walk goes into."""
    if isinstance(thing, types.ModuleType):
        yield from ((f".{k}", v) for k, v in vars(thing).items())
    elif isinstance(thing, dict | types.MappingProxyType):
        for key, value in list(thing.items()):
            yield "{key}", key
            yield f"[{key!r:.40}]", value
    elif isinstance(thing, list | tuple | collections.deque):
        yield from ((f"[{i}]", v) for i, v in enumerate(list(thing)))
    elif isinstance(thing, set | frozenset):
        yield from (("{item}", v) for v in list(thing))
    elif isinstance(thing, weakref.ref):
        yield "()", thing()
    elif isinstance(thing, _WEAK):
        yield from (("{weak}", v) for v in list(thing))  # type: ignore[call-overload]
        if isinstance(thing, weakref.WeakValueDictionary | weakref.WeakKeyDictionary):
            yield from (("{weak value}", v) for v in list(thing.values()))
    elif isinstance(thing, types.FunctionType):
        for cell in thing.__closure__ or ():
            yield ".<closure>", cell.cell_contents
        yield ".__defaults__", thing.__defaults__
        yield ".__kwdefaults__", thing.__kwdefaults__
        yield ".__dict__", thing.__dict__
    elif isinstance(thing, types.MethodType):
        yield ".__self__", thing.__self__
        yield ".__func__", thing.__func__
    elif isinstance(thing, type):
        yield from ((f".{k}", v) for k, v in vars(thing).items())
    else:  # an instance of one of af_otel's classes: its attributes and slots
        yield from ((f".{k}", v) for k, v in getattr(thing, "__dict__", {}).items())
        for klass in type(thing).__mro__:
            for slot in klass.__dict__.get("__slots__", ()):
                if slot in ("__dict__", "__weakref__"):
                    continue
                try:
                    yield f".{slot}", getattr(thing, slot)
                except AttributeError:
                    continue


def _enter(thing: object) -> bool:
    if isinstance(thing, types.ModuleType):
        name = thing.__name__
        return (name == "af_otel" or name.startswith("af_otel.")) and name != MECHANISM_MODULE
    if isinstance(thing, _CONTAINERS + _WEAK + (weakref.ref,)):
        return True
    if isinstance(thing, types.FunctionType | type):
        return _ours(thing)
    if isinstance(thing, types.MethodType):
        return _ours(thing.__func__)
    return _ours(type(thing))


def live_locks(roots: Iterable[object] = ()) -> list[Found]:
    """Every lock, queue, thread or pool reachable from af_otel's modules (but the mechanism's own)
    and from ``roots``, through containers and af_otel's own objects (not into other libraries')."""
    starts: list[tuple[str, object]] = [
        (name, module)
        for name, module in list(sys.modules.items())
        if name.startswith("af_otel") and name != MECHANISM_MODULE
    ]
    starts += [(f"<root {type(root).__name__}>", root) for root in roots]
    seen: set[int] = set()
    keep: list[object] = []  # what was seen stays alive while the walk runs (ids stay unique)
    found: list[Found] = []
    todo = collections.deque((path, thing, None) for path, thing in starts)
    while todo:
        path, thing, owner = todo.popleft()
        if id(thing) in seen:
            continue
        seen.add(id(thing))
        keep.append(thing)
        if isinstance(thing, LOCK_TYPES):
            found.append(Found(path, _kind(owner, path), thing))
            continue
        if not _enter(thing):
            continue
        named = thing if not isinstance(thing, _CONTAINERS + _WEAK) else owner
        for label, child in _children(thing):
            if child is not None and id(child) not in seen:
                todo.append((path + label, child, named))
    return found


def _kind(owner: object, path: str) -> str:
    attribute = path.rsplit(".", 1)[-1]
    if isinstance(owner, types.ModuleType):
        return f"{owner.__name__}.{attribute}"
    if owner is None:
        return attribute
    return f"{type(owner).__module__}.{type(owner).__qualname__}.{attribute}"
