"""The chaos suite at a reduced size (3-4 pushes per scenario) against one whole local stack:
each scenario's invariants over the whole database must hold. A scenario whose fault needs a
feature the stack lacks is skipped with its reason (see local/chaos/scenarios.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local.chaos import REDUCED_SIZES, SCENARIOS, Chaos, ChaosStack

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chaos() -> Iterator[Chaos]:
    with ChaosStack.started() as stack:
        yield Chaos(stack)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_keeps_every_invariant(chaos: Chaos, name: str) -> None:
    SCENARIOS[name](chaos, REDUCED_SIZES[name])
    row = chaos.rows[-1]
    assert row.scenario == name
    if row.passed is None:
        pytest.skip(row.skipped)
    assert row.violations == [], f"{name}: {row.observed}"
    assert row.passed
    assert row.observed.startswith(
        f"{row.size if name != 'cloudtasks-outage' else 2 * row.size} ops, "
    ), row.observed
