"""The verdict as data: each branch of the rule, the gates that fired, and what it was decided
from, on per-task outcomes whose numbers can be worked out on paper."""

from __future__ import annotations

import math

import numpy as np
import pytest

from heldout.statistics import Interval, McNemarResult, NoiseFloor
from heldout.statistics.decision import (
    BETTER,
    INTERVAL_INCLUDES_ZERO,
    NO_DIFFERENCE,
    WITHIN_NOISE_FLOOR,
    WORSE,
    Decision,
    decide,
)

# Reruns 0.40, 0.45, 0.50: sd 0.05, t(2) = 4.303, floor 4.303·0.05·√2 = 0.304.
WIDE_RERUNS = [0.40, 0.45, 0.50]
# Reruns 0.50, 0.51, 0.52: sd 0.01, floor 4.303·0.01·√2 = 0.061.
NARROW_RERUNS = [0.50, 0.51, 0.52]


def passes(n_tasks: int, passing: range) -> np.ndarray:
    return np.isin(np.arange(n_tasks), passing)


def decide_on(base: np.ndarray, candidate: np.ndarray, **options) -> Decision:
    """One episode per task: the pass rates are the outcomes the exact test pairs."""
    return decide(base.astype(float), candidate.astype(float), base_passed=base,
                  candidate_passed=candidate, **options)


def test_fixing_ten_tasks_of_200_is_better_and_no_gate_fires():
    decision = decide_on(passes(200, range(80)), passes(200, range(90)))
    assert decision.difference.estimate == pytest.approx(0.05)
    assert decision.difference.low > 0
    assert (decision.test.b, decision.test.c, decision.test.n_discordant) == (0, 10, 10)
    assert decision.test.pvalue == pytest.approx(2 * 0.5**10, rel=1e-12)
    assert decision.floor is None
    assert decision.gates == ()
    assert decision.verdict == BETTER


def test_breaking_ten_tasks_is_worse():
    decision = decide_on(passes(200, range(90)), passes(200, range(80)))
    assert decision.difference.high < 0
    assert (decision.test.b, decision.test.c) == (10, 0)
    assert decision.gates == ()
    assert decision.verdict == WORSE


def test_disagreeing_both_ways_leaves_the_interval_around_0():
    # Tasks 0-4 pass only in the base, 5-9 only in the candidate: mean difference 0.
    decision = decide_on(passes(40, range(5)), passes(40, range(5, 10)))
    assert decision.difference.estimate == 0.0
    assert decision.difference.low < 0 < decision.difference.high
    assert (decision.test.b, decision.test.c, decision.test.pvalue) == (5, 5, 1.0)
    assert decision.gates == (INTERVAL_INCLUDES_ZERO,)
    assert decision.verdict == NO_DIFFERENCE


def test_a_difference_inside_the_noise_floor_is_held_back_though_its_interval_excludes_0():
    decision = decide_on(passes(200, range(80)), passes(200, range(90)),
                         rerun_scores=WIDE_RERUNS)
    assert decision.floor.floor == pytest.approx(4.3027 * 0.05 * math.sqrt(2), rel=1e-4)
    assert decision.floor.n_runs == 3
    assert decision.difference.low > 0
    assert decision.gates == (WITHIN_NOISE_FLOOR,)
    assert decision.verdict == NO_DIFFERENCE


def test_every_gate_that_fires_is_listed_in_the_order_the_rule_checks_them():
    decision = decide_on(passes(40, range(5)), passes(40, range(5, 10)),
                         rerun_scores=WIDE_RERUNS)
    assert decision.gates == (INTERVAL_INCLUDES_ZERO, WITHIN_NOISE_FLOOR)
    assert decision.verdict == NO_DIFFERENCE


def test_a_difference_that_clears_the_floor_is_better():
    # Every task fails in the base and passes in the candidate: the interval is the exact
    # bound [1 − 2u, 1], u = 1 − 0.025^(1/100), far above 0 and above a floor of 0.061.
    decision = decide_on(np.zeros(100, bool), np.ones(100, bool), rerun_scores=NARROW_RERUNS)
    u = 1 - 0.025 ** (1 / 100)
    assert decision.difference.method == "clopper-pearson"
    assert decision.difference.low == pytest.approx(1 - 2 * u)
    assert decision.floor.floor == pytest.approx(4.3027 * 0.01 * math.sqrt(2), rel=1e-4)
    assert decision.gates == ()
    assert decision.verdict == BETTER


@pytest.mark.parametrize(
    ("low", "high", "verdict"),
    [(0.0, 0.09, NO_DIFFERENCE), (1e-9, 0.09, BETTER), (-0.09, 0.0, NO_DIFFERENCE),
     (-0.09, -1e-9, WORSE)],
)
def test_an_interval_touching_0_does_not_exclude_it(low: float, high: float, verdict: str):
    estimate = (low + high) / 2
    decision = Decision(Interval(estimate, low, high, "bootstrap-indices"),
                        McNemarResult(0, 0, 0, 1.0, 1.0), None)
    assert decision.verdict == verdict


def test_the_floor_gate_is_strict_at_the_floor_itself():
    interval = Interval(0.2, 0.1, 0.3, "bootstrap-indices")
    test = McNemarResult(0, 9, 9, 0.0039, 0.002)
    assert Decision(interval, test, NoiseFloor(0.2, 0.03, 3, 4.3)).verdict == BETTER
    assert Decision(interval, test, NoiseFloor(0.2000001, 0.03, 3, 4.3)).gates == (
        WITHIN_NOISE_FLOOR,)


def test_outcomes_that_do_not_pair_up_with_the_tasks_are_refused():
    with pytest.raises(ValueError, match="one outcome per task"):
        decide(np.zeros(3), np.ones(3), base_passed=[False] * 3, candidate_passed=[True] * 2)
    with pytest.raises(ValueError, match="one outcome per task"):
        decide(np.zeros(3), np.ones(3), base_passed=[False] * 4, candidate_passed=[True] * 4)
