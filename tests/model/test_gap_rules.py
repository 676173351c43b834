"""The gap rules decided from a request alone, as the writer and the reader both apply them."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from af_otel import names
from af_otel.model.fields import DIALS
from af_otel.model.gap_kinds import GAP_ORDER, GAP_RANK
from af_otel.model.gap_rules import request_gaps

ANSWER = {"type": "function", "name": "answer"}
CHOICES = st.sampled_from(
    [None, "auto", "none", "required", "any", "answer", "other", {"name": "other"}]
)
TOOL_SETS = st.sampled_from([None, (), (ANSWER,)])
PARAMS = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(DIALS), st.just(1), max_size=4),
)


def _kinds(found: list[tuple[str, str]]) -> list[str]:
    return [kind for kind, _ in found]


def test_every_gap_kind_has_one_place_in_the_order() -> None:
    """The order names every gap kind once, most suspicious (the missing base) first."""
    kinds = {value for key, value in vars(names).items() if key.startswith("GAP_") and "-" in value}
    assert len(GAP_ORDER) == len(set(GAP_ORDER)) == len(kinds)
    assert set(GAP_ORDER) == kinds
    assert GAP_ORDER[0] == names.GAP_NO_FOLD_BASE


@given(
    params=PARAMS,
    choice=CHOICES,
    tools=TOOL_SETS,
    sealed=st.booleans(),
    minted=st.booleans(),
    provider=st.sampled_from([None, "openai", "anthropic"]),
)
def test_request_gaps_follow_their_rules(
    params: dict[str, Any] | None,
    choice: object,
    tools: tuple[dict[str, Any], ...] | None,
    sealed: bool,
    minted: bool,
    provider: str | None,
) -> None:
    """thinking-replay iff sealed; forced-tool-schema iff a named tool is forced that the
    recorded tools lack; provider-defaults only with a receipt; in the one gap order."""
    if params is not None and choice is not None:
        params = {**params, "tool_choice": choice}
    found = request_gaps(params, tools, provider=provider, model=None, sealed=sealed, minted=minted)
    kinds = _kinds(found)
    assert kinds == sorted(kinds, key=GAP_RANK.__getitem__)
    assert (names.GAP_THINKING_REPLAY in kinds) == sealed
    named = params is not None and choice in ("answer", "other", {"name": "other"})
    listed = choice == "answer" and tools is not None and ANSWER in tools
    missing = named and tools is not None and not listed
    assert (names.GAP_FORCED_TOOL_SCHEMA in kinds) == missing
    if not minted:
        assert names.GAP_PROVIDER_DEFAULTS not in kinds


def test_provider_defaults_names_the_unset_dials() -> None:
    """With a receipt, the dials the provider has and the request leaves unset are listed; a
    dial off the record is not."""
    found = dict(
        request_gaps(
            {"temperature": 0.2},
            (),
            provider="anthropic",
            model=None,
            sealed=False,
            minted=True,
            unrecorded=("top_k",),
        )
    )
    detail = found[names.GAP_PROVIDER_DEFAULTS]
    assert detail == "not set: thinking, max_tokens, top_p, stop_sequences"
