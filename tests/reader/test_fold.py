"""The keyed fold equals the plain fold everywhere, costs a replay from the nearest anchor, and
hands out answers nobody can change."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from af_otel.model import FrozenDict
from af_otel.names import COMMIT_VERBS, CommitVerb
from af_otel.reader.fold import (
    ABSENT,
    UNKNOWN,
    ChainedTuple,
    Commit,
    KeyedFold,
    apply_verb,
    freeze,
)


def full_fold(
    base: Mapping[str, Any],
    parents: Mapping[int, int],
    commits: Mapping[int, Sequence[Commit]],
    epoch: int,
) -> dict[str, Any]:
    """The state at ``epoch`` by definition: the base, then every commit on the path base -> ...
    -> epoch, in order, with `apply_verb` (costs the whole path on every call)."""
    path: list[int] = []
    while epoch != 0:
        path.append(epoch)
        epoch = parents[epoch]
    state = dict(base)
    for step in reversed(path):
        for commit in commits.get(step, ()):
            value = apply_verb(commit.verb, state.get(commit.key, ABSENT), commit.value)
            if value is ABSENT:
                state.pop(commit.key, None)
            else:
                state[commit.key] = value
    return state


def state_at(fold: KeyedFold, epoch: int) -> dict[str, Any]:
    """The whole state after ``epoch`` as the keyed fold answers it, key by key; keys whose value
    is `ABSENT` are left out."""
    values = {key: fold.value_at(key, epoch) for key in sorted(fold.keys())}
    return {key: value for key, value in values.items() if value is not ABSENT}


KEYS = ("system", "messages", "tools", "params", "model", "extra")
scalars = st.one_of(st.integers(-5, 5), st.text(max_size=3), st.booleans(), st.none())
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def commit_payloads(draw: st.DrawFn, verb: CommitVerb) -> Any:
    if verb == "delete":
        return ABSENT
    if draw(st.integers(0, 9)) == 0:
        return UNKNOWN
    if verb == "append":
        return freeze(draw(st.lists(json_values, max_size=3)))
    return freeze(draw(json_values))


@st.composite
def runs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[int, int], dict[int, list[Commit]]]:
    """A random run: a tree of epochs (parallel calls share parents), a base or none, and
    commits of every verb on a few keys, numbered across the run."""
    size = draw(st.integers(1, 14))
    parents = {e: draw(st.integers(0, e - 1)) for e in range(1, size + 1)}
    has_base = draw(st.booleans())
    base = (
        {k: freeze(draw(json_values)) for k in draw(st.sets(st.sampled_from(KEYS), max_size=4))}
        if has_base
        else {}
    )
    seq = 0
    commits: dict[int, list[Commit]] = {}
    for epoch in range(1, size + 1):
        for _ in range(draw(st.integers(0, 4))):
            seq += 1
            verb = draw(st.sampled_from(COMMIT_VERBS))
            key = draw(st.sampled_from(KEYS))
            commits.setdefault(epoch, []).append(
                Commit(seq, key, verb, draw(commit_payloads(verb)))
            )
    return base, parents, commits


@given(runs(), st.randoms(use_true_random=False))
@settings(max_examples=150, deadline=None)
def test_keyed_fold_equals_full_fold_at_every_epoch(run: Any, rnd: Any) -> None:
    """Every key at every epoch (the base included), read in any order, equals the full fold."""
    base, parents, commits = run
    fold = KeyedFold(base, parents, commits)
    reads = [(key, epoch) for key in KEYS for epoch in range(len(parents) + 1)]
    rnd.shuffle(reads)
    for key, epoch in reads:
        expected = full_fold(base, parents, commits, epoch).get(key, ABSENT)
        assert fold.value_at(key, epoch) == expected, (key, epoch)
    for epoch in range(len(parents) + 1):
        assert state_at(fold, epoch) == full_fold(base, parents, commits, epoch)


def chain(size: int) -> dict[int, int]:
    return {e: e - 1 for e in range(1, size + 1)}


def test_parallel_calls_fold_along_their_own_path() -> None:
    """Two calls sharing a parent see the parent's state plus their own changes, not each other's."""
    parents = {1: 0, 2: 1, 3: 1, 4: 3}
    commits = {
        1: [Commit(1, "messages", "append", ("u1",))],
        2: [Commit(2, "messages", "append", ("a2",))],
        3: [Commit(3, "messages", "append", ("a3",))],
        4: [Commit(4, "messages", "append", ("u4",))],
    }
    fold = KeyedFold({"messages": ()}, parents, commits)
    assert fold.value_at("messages", 2) == ("u1", "a2")
    assert fold.value_at("messages", 3) == ("u1", "a3")
    assert fold.value_at("messages", 4) == ("u1", "a3", "u4")


def test_set_after_append_and_delete() -> None:
    """A set replaces what appends built; a delete removes the key; an append after it restarts."""
    commits = {
        1: [Commit(1, "messages", "append", ("a", "b"))],
        2: [Commit(2, "messages", "set", ("z",)), Commit(3, "messages", "append", ("y",))],
        3: [Commit(4, "messages", "delete")],
        4: [Commit(5, "messages", "append", ("n",))],
    }
    fold = KeyedFold({"messages": ("base",)}, chain(4), commits)
    assert [fold.value_at("messages", e) for e in range(5)] == [
        ("base",),
        ("base", "a", "b"),
        ("z", "y"),
        ABSENT,
        ("n",),
    ]


def test_a_run_without_a_base_starts_from_nothing() -> None:
    """Without a base, a key nobody wrote is absent and an append starts from its payload."""
    commits = {1: [Commit(1, "params", "set", FrozenDict(t=1)), Commit(2, "extra", "append", (1,))]}
    fold = KeyedFold({}, chain(2), commits)
    assert fold.value_at("system", 2) is ABSENT
    assert fold.value_at("params", 2) == {"t": 1}
    assert fold.value_at("extra", 2) == (1,)
    assert state_at(fold, 0) == {}


def test_an_append_without_an_anchor_lands_on_the_base() -> None:
    """A key the base holds and the log only appends to keeps the base's entries first."""
    commits = {2: [Commit(1, "messages", "append", ("m1",))]}
    fold = KeyedFold({"messages": ("m0",)}, chain(3), commits)
    assert fold.value_at("messages", 3) == ("m0", "m1")


def test_reading_one_key_replays_from_the_nearest_set_only() -> None:
    """At epoch 300 of a run that set messages at 250, one read replays 51 commits, not 300;
    a key written once at epoch 1 costs one."""
    commits: dict[int, list[Commit]] = {}
    seq = 0
    for epoch in range(1, 301):
        seq += 1
        verb: CommitVerb = "set" if epoch == 250 else "append"
        commits[epoch] = [Commit(seq, "messages", verb, (f"m{epoch}",))]
    seq += 1
    commits[1].append(Commit(seq, "model", "set", "gpt"))
    fold = KeyedFold({"messages": ()}, chain(300), commits)
    assert fold.value_at("messages", 300)[0] == "m250"
    assert fold.replayed == 51
    assert fold.value_at("model", 300) == "gpt"
    assert fold.replayed == 52
    # memoized: reading again replays nothing; a nearby later-unread epoch costs only the gap
    fold.value_at("messages", 300)
    assert fold.replayed == 52


def test_reading_every_epoch_costs_each_commit_once() -> None:
    """A forward scrub over a 500-epoch run replays each of its commits exactly once."""
    commits = {e: [Commit(e, "messages", "append", (e,))] for e in range(1, 501)}
    fold = KeyedFold({"messages": ()}, chain(500), commits)
    for epoch in range(1, 501):
        assert len(fold.value_at("messages", epoch)) == epoch
    assert fold.replayed == 500


def test_deep_reads_do_not_recurse() -> None:
    """A cold read at the end of a 5,000-epoch append-only chain works (no recursion limit)."""
    commits = {e: [Commit(e, "messages", "append", (e,))] for e in range(1, 5001)}
    fold = KeyedFold({"messages": ()}, chain(5000), commits)
    assert len(fold.value_at("messages", 5000)) == 5000


def test_answers_are_immutable_all_the_way_down() -> None:
    """No reader can change what a later epoch reports: tuples, frozen dicts, read-only states."""
    message = freeze({"role": "user", "parts": [{"type": "text", "content": "hi"}]})
    commits = {
        1: [Commit(1, "messages", "append", (message,))],
        2: [Commit(2, "params", "set", freeze({"stop_sequences": ["x"]}))],
    }
    fold = KeyedFold({"messages": ()}, chain(2), commits)
    first = fold.value_at("messages", 1)
    assert isinstance(first, tuple)
    with pytest.raises(TypeError):
        first[0]["role"] = "system"  # type: ignore[index]
    with pytest.raises(TypeError):
        first[0]["parts"][0]["content"] = "edited"  # type: ignore[index]
    with pytest.raises(TypeError):
        fold.base["model"] = "x"  # type: ignore[index]
    stops = fold.value_at("params", 2)["stop_sequences"]
    assert isinstance(stops, tuple)
    assert fold.value_at("messages", 2)[0]["parts"][0]["content"] == "hi"


def test_freeze_keeps_the_json_value() -> None:
    """Freezing changes the containers' types, not the value JSON sees."""
    import orjson

    value = {"a": [1, {"b": [True, None, "x"]}], "c": {}}
    assert orjson.loads(orjson.dumps(freeze(value))) == value


def test_verbs_are_total() -> None:
    """Append onto a non-list starts a list, unknown spreads through appends, set and delete
    replace whatever was there."""
    assert apply_verb("append", "text", ("a",)) == ("a",)
    assert apply_verb("append", ABSENT, ("a",)) == ("a",)
    assert apply_verb("append", UNKNOWN, ("a",)) is UNKNOWN
    assert apply_verb("append", ("a",), UNKNOWN) is UNKNOWN
    assert apply_verb("set", UNKNOWN, 1) == 1
    assert apply_verb("delete", UNKNOWN, ABSENT) is ABSENT


@pytest.mark.parametrize(
    ("verb", "value"),
    [("append", "not a list"), ("delete", 1), ("set", ABSENT)],
)
def test_commits_refuse_payloads_their_verb_cannot_apply(verb: CommitVerb, value: Any) -> None:
    """A commit whose payload does not fit its verb is refused when built, not folded wrongly."""
    with pytest.raises(ValueError):
        Commit(1, "messages", verb, value)


def test_a_tree_with_a_parent_after_its_child_is_refused() -> None:
    """Parents must be earlier epochs (or the base): the log is a tree by construction."""
    with pytest.raises(ValueError):
        KeyedFold({}, {1: 2, 2: 0}, {})


# -- ChainedTuple ----------------------------------------------------------------------------


def _chain_of(parts: list[list[int]], start: Any = ()) -> Any:
    chain: Any = start
    for part in parts:
        chain = ChainedTuple.extend(chain, tuple(part))
    return chain


def _depth(chain: Any) -> int:
    depth = 0
    while isinstance(chain, ChainedTuple):
        depth, chain = depth + 1, chain.head
    return depth


@given(
    st.lists(st.lists(st.integers(), max_size=4), max_size=80),
    st.integers(-100, 100),
    st.integers(-100, 100),
    st.integers(-100, 100),
    st.sampled_from([None, 1, 2, 3, -1, -2]),
)
@settings(max_examples=200, deadline=None)
def test_a_chain_reads_exactly_like_the_tuple_it_stands_for(
    parts: list[list[int]], index: int, start: int, stop: int, step: int | None
) -> None:
    """Length, indexing (negative too), slices of every kind, iteration, equality and hash agree
    with the tuple built by concatenation, however the tails were merged."""
    chain = _chain_of(parts)
    flat = tuple(item for part in parts for item in part)
    assert len(chain) == len(flat)
    assert tuple(chain) == flat
    assert list(chain) == list(flat)
    assert chain == flat
    assert flat == chain
    assert hash(chain) == hash(flat)
    assert chain != (*flat, 0)
    if -len(flat) <= index < len(flat):
        assert chain[index] == flat[index]
    else:
        with pytest.raises(IndexError):
            chain[index]
    assert chain[start:stop:step] == flat[start:stop:step]
    assert chain[start:] == flat[start:]
    assert chain[:stop] == flat[:stop]


@given(
    st.lists(st.lists(st.integers(0, 3), max_size=3), max_size=40),
    st.lists(st.lists(st.integers(0, 3), max_size=3), max_size=20),
    st.lists(st.lists(st.integers(0, 3), max_size=3), max_size=20),
)
@settings(max_examples=200, deadline=None)
def test_chains_that_branch_stay_exact_and_share_their_trunk(
    trunk: list[list[int]], left: list[list[int]], right: list[list[int]]
) -> None:
    """Two chains extending one trunk (an epoch's two children) each equal their tuple, compare
    with each other as tuples do, and `ChainedTuple.common_prefix` gives the tuples' common
    prefix: at least the whole trunk, which they hold by reference."""
    base = _chain_of(trunk)
    one, two = _chain_of(left, base), _chain_of(right, base)
    flat_one, flat_two = tuple(one), tuple(two)
    assert flat_one == tuple(item for part in trunk + left for item in part)
    assert flat_two == tuple(item for part in trunk + right for item in part)
    assert (one == two) == (flat_one == flat_two)
    assert (one == base) == (flat_one == tuple(base))
    expected = next(
        (i for i, (a, b) in enumerate(zip(flat_one, flat_two, strict=False)) if a != b),
        min(len(flat_one), len(flat_two)),
    )
    assert ChainedTuple.common_prefix(one, two) == expected
    assert ChainedTuple.common_prefix(two, flat_one) == expected
    assert ChainedTuple.common_prefix(one, base) == len(base)


def test_a_chain_is_immutable_and_shares_its_head() -> None:
    """A chain cannot be changed, holds its parent by reference, and pickles as a tuple."""
    import pickle

    head = (1, 2, 3)
    chain = ChainedTuple.extend(head, (4,))
    assert isinstance(chain, ChainedTuple)
    assert chain.head is head
    with pytest.raises(AttributeError):
        chain._tail = (9,)  # type: ignore[misc]
    with pytest.raises(TypeError):
        chain[0] = 5  # type: ignore[index]
    assert pickle.loads(pickle.dumps(chain)) == (1, 2, 3, 4)
    assert chain + (5,) == (1, 2, 3, 4, 5)  # noqa: RUF005 - the operator is what is tested
    assert (0,) + chain == (0, 1, 2, 3, 4)  # noqa: RUF005


def test_a_long_chain_stays_shallow_and_copies_each_item_a_few_times() -> None:
    """Tails merge as a binary counter carries: after m extensions the chain is as many links
    deep as m has one bits, and no item was copied more than log2(m) times (copying the earlier
    list every few links copies the run's history once per few epochs: the square of it)."""
    copies = [0] * 1024
    chain: Any = (0,)
    for step in range(1, 1024):
        chain = ChainedTuple.extend(chain, (step,))
        assert _depth(chain) == bin(step).count("1")
        for item in chain[len(chain.head) : -1]:  # copied into the new tail by its merges
            copies[item] += 1
    assert max(copies) <= 10
    assert tuple(chain) == tuple(range(1024))
    assert chain[0] == 0
    assert chain[1023] == 1023


def test_the_fold_shares_appended_lists_between_epochs() -> None:
    """An epoch that appended holds its parent's list by reference, not a copy (or, when its
    tail merged with its parent's, the list its parent's tail follows)."""
    commits = {e: [Commit(e, "messages", "append", (e,))] for e in range(1, 4)}
    fold = KeyedFold({"messages": ("base",)}, chain(3), commits)
    second, third = fold.value_at("messages", 2), fold.value_at("messages", 3)
    assert isinstance(third, ChainedTuple)
    assert third.head is second
    assert fold.extends_parent("messages", 3)
