"""Arms that ran different numbers of episodes per task (issue 38 item 5): the verdict rests on
the episodes both ran, a gain is not decided, and a harm significant under the fewer episodes
is reported as "worse", with the difference as its caveat."""

from __future__ import annotations

import numpy as np
import pytest

from heldout.report import build_report
from heldout.statistics.decision import EPISODES_DIFFER, NOT_DECIDABLE, WORSE
from tests.report.test_report import rollouts


def outcomes(rates: np.ndarray, episodes: int, rng: np.random.Generator) -> dict:
    return {f"t{i:03d}": list(rng.random(episodes) < rate) for i, rate in enumerate(rates)}


@pytest.fixture(scope="module")
def rates() -> np.ndarray:
    return np.random.default_rng(38).uniform(0.3, 0.9, 200)


def test_a_harm_at_unequal_episodes_is_reported_as_worse(rates: np.ndarray):
    rng = np.random.default_rng(1)
    report = build_report(rollouts("base", outcomes(rates, 10, rng)),
                          rollouts("worse", outcomes(rates - 0.25, 5, rng)))
    decision = report.headline.decision
    assert report.verdict == WORSE
    assert [gate.name for gate in decision.gates if gate.voids] == [EPISODES_DIFFER]
    assert any("different numbers of episodes per task (10 and 5 at the fewest)" in caveat
               and "first 5 episodes in both" in caveat for caveat in decision.caveats)
    # The estimate is over the episodes both ran: the base's first 5 of each task.
    assert decision.support.episodes == 5


def test_a_gain_at_unequal_episodes_is_not_decided(rates: np.ndarray):
    rng = np.random.default_rng(2)
    report = build_report(rollouts("base", outcomes(rates, 10, rng)),
                          rollouts("better", outcomes(np.clip(rates + 0.25, 0, 1), 5, rng)))
    decision = report.headline.decision
    assert decision.claim == "better"
    assert report.verdict.startswith(f"{NOT_DECIDABLE}: the arms ran different numbers of "
                                     "episodes per task (10 and 5 at the fewest)")


def test_the_first_episodes_are_taken_in_sample_order_per_task():
    base = {"t0": [True, True, False, False], "t1": [False, True, True]}
    candidate = {"t0": [False, True], "t1": [True, True]}
    report = build_report(rollouts("base", base), rollouts("candidate", candidate))
    difference = report.headline.decision.difference.estimate
    # t0: base's first 2 pass (1.0), candidate 0.5; t1: base's first 2 give 0.5, candidate 1.0.
    assert difference == pytest.approx(((0.5 - 1.0) + (1.0 - 0.5)) / 2)
