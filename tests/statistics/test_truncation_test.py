"""The truncation gate as a test over the tasks (issue 38 item 6): an arm that truncates like
the other is voided by chance in at most α of runs, one far above twice the other's share is
found, and the verdict's gate says which test fired."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from heldout.statistics.decision import TRUNCATION_IMBALANCE, decide
from heldout.statistics.truncation import truncates_more


def shares(rng: np.random.Generator, rates: np.ndarray, episodes: int) -> np.ndarray:
    return rng.binomial(episodes, rates) / episodes


def test_the_p_value_is_scipys_one_sample_t_on_the_units():
    mine = np.array([0.3, 0.1, 0.2, 0.0, 0.4])
    theirs = np.array([0.1, 0.0, 0.1, 0.0, 0.1])
    expected = sps.ttest_1samp(mine - 2 * theirs, 0.0, alternative="greater").pvalue
    assert truncates_more(mine, theirs, ratio=2.0) == pytest.approx(expected, rel=1e-12)
    # In groups the unit is the group's mean of w.
    groups = ["a", "a", "b", "b", "c"]
    w = mine - 2 * theirs
    units = [w[:2].mean(), w[2:4].mean(), w[4]]
    assert truncates_more(mine, theirs, ratio=2.0, groups=groups) == pytest.approx(
        sps.ttest_1samp(units, 0.0, alternative="greater").pvalue, rel=1e-12)
    # No spread: above 0 everywhere is certain, at or below it is nothing.
    assert truncates_more([0.5] * 4, [0.1] * 4, ratio=2.0) == 0.0
    assert truncates_more([0.0] * 4, [0.0] * 4, ratio=2.0) == 1.0


def test_like_truncation_is_voided_rarely_and_far_more_is_found():
    rng = np.random.default_rng(38)
    voided_alike = voided_at_twice = found_at_four = 0
    reps = 400
    for _ in range(reps):
        base_rates = rng.beta(0.5, 4, 164)  # ~11% of episodes truncated on average
        base = shares(rng, base_rates, 10)
        alike = shares(rng, base_rates, 10)
        twice = shares(rng, np.clip(2 * base_rates, 0, 1), 10)
        four = shares(rng, np.clip(4 * base_rates, 0, 1), 10)
        voided_alike += truncates_more(alike, base, ratio=2.0) <= 0.05
        voided_at_twice += truncates_more(twice, base, ratio=2.0) <= 0.05
        found_at_four += truncates_more(four, base, ratio=2.0) <= 0.05
    assert voided_alike / reps <= 0.01
    # Exactly twice (less the clipping) is the boundary of H0: voided in about α of runs.
    assert voided_at_twice / reps <= 0.05 + 2.6 * np.sqrt(0.05 * 0.95 / reps)
    assert found_at_four / reps >= 0.9


def test_the_verdict_voids_on_the_test_not_on_the_point_ratio():
    rng = np.random.default_rng(5)
    n = 200
    base = rng.random(n)
    candidate = np.clip(base + 0.1, 0, 1)
    passed = dict(base_passed=base > 0.5, candidate_passed=candidate > 0.5)
    # 2.2x the base's share by the point estimates voids the comparison on the point ratio;
    # over 200 tasks of 10 episodes the test cannot tell 2.2x from 2x, and does not void it.
    trunc_base = rng.binomial(10, 0.05, n) / 10
    trunc_candidate = rng.binomial(10, 0.11, n) / 10
    ratio_only = decide(base, candidate, n_episodes=10, **passed,
                        truncation=(0.05, 0.11))
    tested = decide(base, candidate, n_episodes=10, **passed, truncation=(0.05, 0.11),
                    task_truncation=(trunc_base, trunc_candidate))
    assert TRUNCATION_IMBALANCE in [gate.name for gate in ratio_only.gates]
    assert TRUNCATION_IMBALANCE not in [gate.name for gate in tested.gates]
    assert tested.support.truncation_p[1] > 0.05
    # Far more truncation in the candidate is found, and the message gives the test's p.
    heavy = rng.binomial(10, 0.4, n) / 10
    voided = decide(base, candidate, n_episodes=10, **passed, truncation=(0.05, 0.4),
                    task_truncation=(trunc_base, heavy))
    gate = next(gate for gate in voided.gates if gate.name == TRUNCATION_IMBALANCE)
    assert "one-sided p = " in gate.message and voided.verdict.startswith("not decidable")
