"""What af_otel knows of one instrumentation family, as one value (`Convention`), and the registry
that holds them in the order spans are claimed.

Every table that used to be keyed by a convention's name (content keys, ledger rows, Responses
rows and tell-tales, SDK scopes, model keys, the incremental path) is a field of the family's `Convention`; the
readers of those tables (`adapted.content_keys`, `ledger`, `responses`, `incremental`) ask the
registry at call time. The families themselves are declared in `af_otel.semconv.conventions`,
which registers them in order when `af_otel.semconv` is imported; this module imports none of
them, so any module of semconv may ask it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - types only
    from af_otel.model.request import FrozenDict, Request

Tell = Callable[[Mapping[str, object], str], bool]
"""A test over a span's attributes (exact ``str`` keys) and its name."""

Projection = Callable[["FrozenDict"], "FrozenDict | None"]
"""One normalized message as a family's record keeps it, None where it keeps none of it
(`Convention.projections`)."""


@dataclass(frozen=True, slots=True)
class Keys:
    """Span keys, named exactly or by prefix."""

    exact: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key in self.exact or key.startswith(self.prefixes))

    def __or__(self, other: Keys) -> Keys:
        prefixes = (*self.prefixes, *(p for p in other.prefixes if p not in self.prefixes))
        return Keys(self.exact | other.exact, prefixes)


@dataclass(frozen=True, slots=True)
class Entry:
    """One instrumentation (a row of the field ledger): the scopes and conventions it writes, and
    the request fields it records (`af_otel.semconv.ledger`)."""

    label: str
    scopes: tuple[str, ...]  # instrumentation scope names; a name also matches its dotted children
    conventions: tuple[str, ...]
    recorded: frozenset[str]
    versions: str = ""  # the releases this entry was checked against (docs only)
    # Fields recorded only when the request left them out: (field, the adapter note that says the
    # request set it). Without the note the span shows the field absent; with it, unrecorded.
    marked: tuple[tuple[str, str], ...] = ()
    # Fields beyond `fields.FIELDS` this instrumentation never records: (field, the part type
    # that makes it matter). google-genai invents tool-call ids and drops a function response's
    # name, so on a call with such parts those are unrecorded.
    lacks: tuple[tuple[str, str], ...] = ()

    def recorded_by(self, notes: Iterable[str]) -> frozenset[str]:
        """The fields this entry records on a span whose adapter wrote ``notes``."""
        noted = frozenset(notes)
        return self.recorded | {name for name, note in self.marked if note not in noted}

    def claims(self, scope: str | None, convention: str) -> bool:
        if convention not in self.conventions or not scope:
            return False
        return any(scope == s or scope.startswith(s + ".") for s in self.scopes)


@dataclass(frozen=True, slots=True)
class Adapted:
    """One span's request as its convention recorded it, or why none can be had.

    ``request`` is a plain GenAI-shaped dict (docs/receipt-spec.md §3) for ``Request.from_dict``; it is
    ``None`` exactly when ``absent_reason`` names one of the ``names.REASON_*`` values.
    """

    convention: str  # the name of the family that read it (`Convention.name`)
    request: Mapping[str, object] | None
    absent_reason: str | None
    content_keys: tuple[str, ...]
    notes: tuple[str, ...] = ()
    # With ``content-cut``: which span limit may have cut the record (`af_otel.semconv.limits`).
    cut: str | None = None


@dataclass(frozen=True, slots=True)
class Convention:
    """One instrumentation family: how to tell its spans, read their request, and what it records.

    ``claims`` picks the family that reads a span (the registry asks in order, first yes wins);
    ``is_llm_call`` says whether its span records one LLM call (any family's yes counts). A family
    without them (the completion hook, the explicit API) is handed its request instead of reading
    one off a span, and holds only its ledger rows and the knowledge of what it writes.
    """

    name: str
    claims: Tell | None = None
    is_llm_call: Tell | None = None
    # A span this family knows is not an LLM call even where another family's ``is_llm_call``
    # says it is (LlamaIndex's span that only prepares a call with tools).
    vetoes: Tell | None = None
    adapt: Callable[[Mapping[str, object]], Adapted] | None = None
    # Keys that carry conversation or tool content (stripped when content must not leave the
    # process), and of them those that hold the response (a cut there does not touch a receipt).
    content: Keys = Keys()
    output: Keys = Keys()
    ledger: tuple[Entry, ...] = ()  # the instrumentations that write it, and what each records
    # Rows of the agent stacks' instrumentations (docs/instrumentations.md, "Agent stacks").
    stacks: tuple[Entry, ...] = ()
    # Scopes of its instrumentations that wrap the provider SDK's own call (no cache-transform
    # when the span also names the provider's host; they also rank closest to the wire).
    sdk_scopes: frozenset[str] = frozenset()
    model_keys: tuple[str, ...] = ()  # attributes naming the model (matching two records)
    response_id_keys: tuple[str, ...] = ()  # attributes naming the response's id
    # The Responses API fields it records (`af_otel.semconv.responses`), and those it leaves off
    # one request beyond them.
    responses: frozenset[str] = frozenset()
    responses_missing: Callable[[Request], tuple[str, ...]] | None = None
    # What its span shows of a Responses API call (a marker, a span name, the request's own
    # arguments): a span records one when any family's tell-tale says so (`responses.is_responses`).
    responses_call: Tell | None = None
    # The JSON-array attribute the incremental path (`af_otel.semconv.incremental`) reads only the
    # new end of; None: every call is read in full.
    incremental: str | None = None
    # Per wire endpoint (its `af_otel.wire` name): what its record of a call sent there is known
    # to keep of each message of the body. A late claim (`af_otel.processor.wire_source.late`)
    # holds the record's messages and the body's equal as each is seen through it: exact on
    # everything it keeps, and one rule names what the family never keeps.
    projections: tuple[tuple[str, Projection], ...] = ()


def projection(convention: str | None, endpoint: str) -> Projection | None:
    """The projection the family called ``convention`` declares for ``endpoint``, or None (its
    record is held to the body as it is)."""
    family = named(convention)
    if family is None:
        return None
    return next((seen for name, seen in family.projections if name == endpoint), None)


@dataclass(frozen=True, slots=True)
class Tables:
    """The registered conventions, and what the emit path asks of all of them at once."""

    conventions: tuple[Convention, ...] = ()
    by_name: Mapping[str, Convention] = field(default_factory=dict)
    claimers: tuple[Convention, ...] = ()
    llm_calls: tuple[Tell, ...] = ()
    vetoes: tuple[Tell, ...] = ()
    content: Keys = Keys()
    output: Keys = Keys()
    rows: tuple[Entry, ...] = ()
    sdk_scopes: frozenset[str] = frozenset()
    model_keys: tuple[str, ...] = ()
    responses_calls: tuple[Tell, ...] = ()


def _tables(conventions: tuple[Convention, ...]) -> Tables:
    content, output, model_keys = Keys(), Keys(), list[str]()
    for convention in conventions:
        content, output = content | convention.content, output | convention.output
    # Model keys from the last family asked to the first: the GenAI request model comes first,
    # as a span of another family that also carries it names the request model there.
    for convention in reversed(conventions):
        model_keys += [key for key in convention.model_keys if key not in model_keys]
    return Tables(
        conventions,
        {c.name: c for c in conventions},
        tuple(c for c in conventions if c.claims is not None),
        tuple(c.is_llm_call for c in conventions if c.is_llm_call is not None),
        tuple(c.vetoes for c in conventions if c.vetoes is not None),
        content,
        output,
        tuple(row for c in conventions for row in (*c.ledger, *c.stacks)),
        frozenset(scope for c in conventions for scope in c.sdk_scopes),
        tuple(model_keys),
        tuple(c.responses_call for c in conventions if c.responses_call is not None),
    )


_current = Tables()


def tables() -> Tables:
    """The registry as it stands (replaced whole on every registration, never changed in place)."""
    return _current


def named(name: str | None) -> Convention | None:
    """The registered convention called ``name``."""
    return _current.by_name.get(name) if name is not None else None


def sdk_scopes() -> frozenset[str]:
    """The registered families' scopes that wrap the provider SDK's own call."""
    return _current.sdk_scopes


def model_named(attributes: Mapping[str, object]) -> str | None:
    """The model a span's attributes name, by any registered family's model keys
    (`Convention.model_keys`), or None."""
    for key in _current.model_keys:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def install(conventions: Iterable[Convention]) -> None:
    """Make ``conventions``, in claim order, the registry (`af_otel.semconv.conventions` does)."""
    global _current
    found = tuple(conventions)
    if len({c.name for c in found}) != len(found):
        raise ValueError("two conventions share a name")
    _current = _tables(found)


def register(convention: Convention, *, before: str = "genai") -> None:
    """Add ``convention`` to the registry, asked ahead of ``before`` (by default ahead of the GenAI
    conventions, which claim every span no other family claims)."""
    found = _current.conventions
    at = next((i for i, c in enumerate(found) if c.name == before), len(found))
    install((*found[:at], convention, *found[at:]))


@contextmanager
def registered(convention: Convention, *, before: str = "genai") -> Iterator[Convention]:
    """`register` for the block's duration; the registry as it was afterwards (for tests)."""
    was = _current.conventions
    register(convention, before=before)
    try:
        yield convention
    finally:
        install(was)
