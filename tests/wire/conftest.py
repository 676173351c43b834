"""Each wire scenario runs once per session: the per-scenario test and the test comparing
instrumentations read the same outcome."""

from __future__ import annotations

import pytest

from tests.wire.harness import Outcome, Scenario, run_scenario


class Outcomes:
    """Scenario outcomes, run on first use, each in its own temporary directory."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._done: dict[str, Outcome | BaseException] = {}

    def __getitem__(self, scenario: Scenario) -> Outcome:
        if scenario.name not in self._done:
            try:
                self._done[scenario.name] = run_scenario(
                    scenario, self._factory.mktemp(scenario.name)
                )
            except Exception as exc:  # re-raised to every test that asks for this scenario
                self._done[scenario.name] = exc
        found = self._done[scenario.name]
        if isinstance(found, BaseException):
            raise found
        return found


@pytest.fixture(scope="session")
def wire_outcomes(tmp_path_factory: pytest.TempPathFactory) -> Outcomes:
    return Outcomes(tmp_path_factory)
