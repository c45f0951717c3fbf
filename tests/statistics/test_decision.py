"""The verdict as data: each branch of the rule, every gate with its message, and what the
verdict rests on, on per-task outcomes whose numbers can be worked out on paper."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from heldout.statistics import Interval, Reruns, run_drift
from heldout.statistics.betting import betting_detectable, betting_interval
from heldout.statistics.decision import (
    BETTER,
    FEW_FAILURE_CAPABLE,
    HARDEN_THE_SET,
    INTERVAL_INCLUDES_ZERO,
    NO_DIFFERENCE,
    NOT_COMPARABLE,
    TEST_DOES_NOT_REJECT,
    TOO_FEW_UNITS,
    TRUNCATION_IMBALANCE,
    WORSE,
    Decision,
    decide,
)
from heldout.statistics.rule import units_for
from heldout.statistics.studentized import RESAMPLES

# Three paired runs: the base at 0.40, 0.45, 0.50 and the candidate at 0.55, 0.45, 0.50, so
# the differences run by run are 0.15, 0, 0: sd √0.0075 = 0.0866, and their mean over the three
# runs carries 0.0075/3 = 0.0025 (sd 0.05) on 2 degrees of freedom.
WIDE_RERUNS = Reruns((0.40, 0.45, 0.50), (0.55, 0.45, 0.50))
# The base spreads as widely, but the candidate moves with it: every run's difference is 0.05.
SHARED_RERUNS = Reruns((0.40, 0.45, 0.50), (0.45, 0.50, 0.55))
Z_SUM = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)  # two-sided α = 0.05, power 0.8


def passes(n_tasks: int, passing: range) -> np.ndarray:
    return np.isin(np.arange(n_tasks), passing)


def decide_on(base: np.ndarray, candidate: np.ndarray, **options) -> Decision:
    """One episode per task: the pass rates are the outcomes the exact test pairs."""
    return decide(base.astype(float), candidate.astype(float), n_episodes=1, base_passed=base,
                  candidate_passed=candidate, **options)


def names(decision: Decision) -> list[str]:
    return [gate.name for gate in decision.gates]


def test_fixing_ten_tasks_of_200_is_better_and_the_test_and_interval_agree():
    decision = decide_on(passes(200, range(80)), passes(200, range(90)))
    # With one episode per task the sign-flip test is McNemar's exact test: 2·0.5^10.
    assert decision.test.p_value == pytest.approx(2 * 0.5**10, rel=1e-12)
    assert decision.mcnemar.pvalue == pytest.approx(decision.test.p_value, rel=1e-12)
    assert (decision.mcnemar.b, decision.mcnemar.c) == (0, 10)
    assert decision.difference.method == "newcombe paired score"
    assert decision.difference.estimate == pytest.approx(0.05)
    assert 0 < decision.difference.low < 0.05 < decision.difference.high
    assert decision.gates == () and decision.verdict == decision.claim == BETTER
    support = decision.support
    assert (support.tasks, support.groups, support.both_pass, support.both_fail) == (
        200, 200, 80, 110)
    assert support.failure_capable == 120
    # sd of ten 1s among 200 differences: sqrt((10·0.95² + 190·0.05²)/199) = 0.21849.
    assert support.mde == pytest.approx(Z_SUM * 0.218492 / math.sqrt(200), rel=1e-4)


def test_breaking_ten_tasks_is_worse():
    decision = decide_on(passes(200, range(90)), passes(200, range(80)))
    assert decision.difference.high < 0 and (decision.mcnemar.b, decision.mcnemar.c) == (10, 0)
    assert decision.gates == () and decision.verdict == WORSE


def test_four_one_way_flips_of_100_tasks_are_no_difference_detected():
    # The case: the old bootstrap said "better" beside McNemar's p = 0.125.
    decision = decide_on(passes(100, range(40)), passes(100, range(44)))
    assert decision.test.p_value == pytest.approx(0.125)
    assert decision.difference.low < 0 < decision.difference.high
    assert names(decision) == [TEST_DOES_NOT_REJECT, INTERVAL_INCLUDES_ZERO]
    assert decision.gates[0].message == "sign-flip permutation, exact: p = 0.125 > α = 0.05"
    assert decision.verdict == NO_DIFFERENCE


def test_disagreeing_both_ways_is_no_difference_detected():
    decision = decide_on(passes(100, range(5)), passes(100, range(5, 10)))
    assert decision.difference.estimate == 0.0 and decision.test.p_value == 1.0
    assert names(decision) == [TEST_DOES_NOT_REJECT, INTERVAL_INCLUDES_ZERO]
    assert decision.verdict == NO_DIFFERENCE


def test_every_episode_counts_where_mcnemars_sample_sees_nothing():
    # 100 tasks, 10 episodes: the candidate passes 7 where the base passes 5, on every task,
    # and both pass at sample 0. McNemar on sample 0 has no discordant pair (p = 1); the
    # deciding test, on all episodes, rejects.
    rng = np.random.default_rng(3)
    base = rng.integers(3, 8, 100) / 10
    candidate = np.clip(base + rng.choice([0.1, 0.2, 0.3], 100), 0, 1)
    same = np.ones(100, bool)
    decision = decide(base, candidate, n_episodes=10, base_passed=same, candidate_passed=same)
    assert decision.mcnemar.pvalue == 1.0
    # p is the larger of the two tests': the bootstrap-t's smallest, 2/(B + 1).
    assert decision.test.rejects and decision.test.p_value == 2 / (RESAMPLES + 1)
    assert decision.difference.method == "bootstrap-t over 100 tasks, 9,999 resamples"
    assert decision.difference.low > 0 and decision.verdict == BETTER


def cochran_cox(task_variance: float, run_variance: float) -> float:
    """The critical value the runs' variance on 2 degrees of freedom gives, by hand."""
    z, t = stats.norm.ppf(0.975), stats.t.ppf(0.975, 2)
    return (task_variance * z + run_variance * t) / (task_variance + run_variance)


def test_run_level_drift_is_carried_in_the_test_and_the_interval_not_a_second_hurdle():
    # +5 points on 200 tasks (se 0.0155 over tasks) whose paired runs moved by 0.15, 0 and 0:
    # the mean difference carries √(0.0155² + 0.0025) = 0.0523, at the Cochran-Cox critical
    # value of 2 degrees of freedom (4.10), and neither the test nor the interval can tell
    # +5 from 0.
    alone = decide_on(passes(200, range(80)), passes(200, range(90)))
    drifting = decide_on(passes(200, range(80)), passes(200, range(90)), reruns=WIDE_RERUNS)
    assert drifting.drift.run_sd == pytest.approx(math.sqrt(0.0075))
    assert drifting.drift.variance == pytest.approx(0.0025) and drifting.drift.df == 2
    assert drifting.drift.n_runs == 3
    assert alone.verdict == BETTER
    assert names(drifting) == [TEST_DOES_NOT_REJECT, INTERVAL_INCLUDES_ZERO]
    assert "carrying the runs' variance (sd 5.0 points on 2 df)" in drifting.test.method
    task_variance = 0.21849**2 / 200
    half = cochran_cox(task_variance, 0.0025) * math.sqrt(task_variance + 0.0025)
    assert drifting.difference.high - drifting.difference.low == pytest.approx(2 * half, rel=0.1)
    # +30 points clears it.
    assert decide_on(passes(200, range(80)), passes(200, range(140)),
                     reruns=WIDE_RERUNS).verdict == BETTER


def test_runs_that_move_together_change_nothing():
    # Run to run both arms moved by 10 points, together: the difference did not move, and
    # reruns of one arm alone would have called that a drift and hidden this +5.
    alone = decide_on(passes(200, range(80)), passes(200, range(90)))
    shared = decide_on(passes(200, range(80)), passes(200, range(90)), reruns=SHARED_RERUNS)
    assert shared.drift.run_sd == pytest.approx(0, abs=1e-15) and shared.verdict == BETTER
    assert (shared.test, shared.difference) == (alone.test, alone.difference)


def test_the_minimum_detectable_effect_is_the_verdicts_own():
    # 120 tasks only the candidate passes, 40 only the base, among 200: the bootstrap-t
    # decides, and with the runs' variance the MDE is (c + z.8)·√(sd²/N + 0.0025), c the
    # critical value the runs widen.
    base, candidate = passes(200, range(80)), passes(200, range(40, 200))
    sd = float(np.std(candidate.astype(float) - base, ddof=1))
    decision = decide_on(base, candidate, reruns=WIDE_RERUNS)
    critical = cochran_cox(sd**2 / 200, 0.0025)
    assert decision.support.mde == pytest.approx(
        (critical + stats.norm.ppf(0.8)) * math.sqrt(sd**2 / 200 + 0.0025), rel=1e-4)
    # 10 differences of 1 among 200 (sd 0.21849): fewer than 75 units differ, so the betting
    # interval would decide; the runs' critical value is wider still, and it is the MDE's.
    few = decide_on(passes(200, range(80)), passes(200, range(90)), reruns=WIDE_RERUNS)
    critical = cochran_cox(0.21849**2 / 200, 0.0025)
    assert critical > math.sqrt(2 * math.log(40))
    assert few.support.mde == pytest.approx((critical + stats.norm.ppf(0.8))
                                            * math.sqrt(0.21849**2 / 200 + 0.0025), rel=1e-4)
    # One episode per task, no groups: the exact sign test decides at any size, and the MDE
    # is the normal formula's.
    exact = decide_on(passes(60, range(20)), passes(60, range(30)))
    differences = np.r_[np.ones(10), np.zeros(50)]
    normal = Z_SUM * float(np.std(differences, ddof=1)) / math.sqrt(60)
    assert exact.support.mde == pytest.approx(normal, rel=1e-9)
    # Below 100 units the betting test decides beside the bootstrap-t (three episodes a task
    # here): the MDE is the effect it finds in 80% of draws of differences spread like these,
    # above the normal formula's.
    small = decide(passes(60, range(20)).astype(float), passes(60, range(30)).astype(float),
                   n_episodes=3, base_passed=passes(60, range(20)),
                   candidate_passed=passes(60, range(30)))
    assert small.support.mde == pytest.approx(betting_detectable(differences, seed=0),
                                              rel=1e-12)
    assert small.support.mde > normal
    assert units_for(0.05, 0.21849, None) == math.ceil((Z_SUM * 0.21849 / 0.05) ** 2)
    # When 5% of the units differ the betting test decides up to 1,500 units: the units
    # needed are the fewest at which it finds 0.05 on units of that spread.
    needed = units_for(0.05, 0.21849, None, differing_share=0.05)

    def betting_finds(units: int) -> bool:
        spread = 0.21849 * stats.norm.ppf((np.arange(units) + 0.5) / units)
        return betting_detectable(spread, power=0.8) <= 0.05

    assert betting_finds(needed) and not betting_finds(needed - 1)
    assert needed > math.ceil((Z_SUM * 0.21849 / 0.05) ** 2)
    # The runs' variance alone (sd 5 points, at a critical value of 4.3) is more than 0.05:
    # no number of tasks is enough; more runs would be.
    assert units_for(0.05, 0.21849, run_drift(WIDE_RERUNS)) is None
    # Runs that move less leave room: the units found give back the effect as their MDE.
    calm = run_drift(Reruns((0.40, 0.45, 0.50), (0.41, 0.46, 0.52)))
    needed = units_for(0.05, 0.21849, calm)
    c = cochran_cox(0.21849**2 / needed, calm.variance)
    assert (c + stats.norm.ppf(0.8)) * math.sqrt(0.21849**2 / needed + calm.variance) <= 0.05


@pytest.mark.parametrize(("low", "high", "verdict"), [
    (0.0, 0.09, NO_DIFFERENCE), (1e-9, 0.09, BETTER), (-0.09, 0.0, NO_DIFFERENCE),
    (-0.09, -1e-9, WORSE)])
def test_an_interval_touching_0_does_not_exclude_it(low: float, high: float, verdict: str):
    decisive = decide_on(passes(200, range(80)), passes(200, range(90)))
    decision = replace(decisive, difference=Interval((low + high) / 2, low, high, "given"))
    assert decision.verdict == verdict


def test_too_few_tasks_void_the_verdict_whatever_the_statistics_say():
    decision = decide_on(np.zeros(20, bool), np.ones(20, bool))
    assert decision.claim == BETTER and decision.test.p_value == pytest.approx(2 * 0.5**20)
    assert names(decision)[0] == TOO_FEW_UNITS
    assert decision.verdict == ("not decidable: 20 tasks in 20 groups, fewer than 30: add "
                                "tasks, not episodes")


def test_too_few_tasks_say_what_size_would_decide():
    # 20 tasks: 6 the candidate fixes, 1 it breaks. The gate names the tasks this difference
    # needs at this spread; the same mix at that many tasks is decided.
    base, candidate = passes(20, range(6, 13)), passes(20, range(0, 12))
    decision = decide_on(base, candidate)
    needed = decision.support.units_needed
    assert needed is not None and needed > 30
    assert decision.verdict == (
        "not decidable: 20 tasks in 20 groups, fewer than 30: add tasks, not episodes (at "
        f"the spread seen, a difference of 25.0 points is found in 80% of runs with about "
        f"{needed} tasks or groups)")
    copies = -(-needed // 20)
    assert decide_on(np.tile(base, copies), np.tile(candidate, copies)).verdict == BETTER


def test_groups_are_the_units_when_tasks_come_in_groups():
    base = passes(10, range(3)).astype(float)
    candidate = passes(10, range(8)).astype(float)
    groups = ["repo-a"] * 5 + ["repo-b"] * 5
    decision = decide(base, candidate, n_episodes=1, base_passed=base > 0,
                      candidate_passed=candidate > 0, groups=groups)
    assert decision.support.groups == 2 and decision.test.units == 2
    assert "2 groups" in decision.difference.method and "2 groups" in decision.test.method
    # Two groups of five: the group sums of d are 2 and 3, mean 0.5. The sign-flip test over
    # two groups reaches |Σ| = 5 in 2 of its 4 patterns: p = 0.5, whatever the bootstrap-t
    # (which at two units means nothing) says. Below 100 units the interval is widened to
    # the betting interval over the two groups, which tells almost nothing: it reaches 1. The
    # p printed is the deciding procedure's, the largest of the three tests': the betting one.
    betting = betting_interval(candidate - base, groups=groups, seed=0)
    assert decision.test.p_value == betting.p_value > 0.5 and not decision.test.rejects
    betting = betting.interval
    assert (decision.difference.low, decision.difference.high) == (betting.low, betting.high)
    assert decision.difference.low < 0 and decision.difference.high == 1.0
    assert decision.verdict == ("not decidable: 10 tasks in 2 groups, fewer than 30: add "
                                "tasks, not episodes (at the spread seen, a difference of 50.0 "
                                "points is found in 80% of runs with about 30 tasks or groups)")


def test_a_set_too_easy_to_fail_says_harden_the_set():
    # 200 tasks, both pass the first 175, the candidate 10 more: 25 tasks either arm fails.
    decision = decide_on(passes(200, range(175)), passes(200, range(185)))
    assert decision.claim == BETTER and names(decision) == [HARDEN_THE_SET]
    assert decision.verdict == ("not decidable: only 25 tasks that either arm ever fails "
                                "(fewer than 30): harden the set")


def test_30_to_49_tasks_either_arm_fails_is_a_caveat_not_a_void():
    # Both pass the first 165, the candidate 10 more: 35 tasks either arm fails.
    decision = decide_on(passes(200, range(165)), passes(200, range(175)))
    assert names(decision) == [FEW_FAILURE_CAPABLE] and decision.verdict == BETTER
    assert decision.caveats == ["only 35 tasks that either arm ever fails (fewer than 50): the "
                                "verdict rests on few tasks that can move"]
    assert decision.gates[0].warns and not decision.gates[0].voids


def test_a_significant_harm_is_reported_through_every_gate_but_arms_not_run_alike():
    # 20 tasks (too few) with 20 losses and no gain: a gain there would be void, a harm is not.
    small = decide_on(passes(20, range(20)), passes(20, range(0)))
    assert small.claim == WORSE and small.verdict == WORSE
    assert small.caveats[0].startswith("20 tasks in 20 groups, fewer than 30")
    gained = decide_on(passes(20, range(0)), passes(20, range(20)))
    assert gained.claim == BETTER and gained.verdict.startswith("not decidable: 20 tasks")
    mismatched = decide_on(passes(20, range(20)), passes(20, range(0)),
                           mismatch="the arms ran under different harnesses")
    assert mismatched.verdict == "not decidable: the arms ran under different harnesses"


def test_a_ceiling_below_twice_the_mde_says_harden_the_set():
    # The base passes 19 of 20 episodes on each of 100 tasks: 5 points left to gain. The
    # candidate alternates 20/20 and 12/20: differences +0.05 and −0.35, sd 0.201, MDE 0.056.
    base = np.full(100, 0.95)
    candidate = np.where(np.arange(100) % 2 == 0, 1.0, 0.6)
    decision = decide(base, candidate, n_episodes=20, base_passed=np.ones(100, bool),
                      candidate_passed=np.ones(100, bool))
    mde = Z_SUM * np.std(candidate - base, ddof=1) / 10
    assert decision.support.mde == pytest.approx(mde)
    gate = ("the base leaves 5.0 points to gain, less than twice the minimum detectable "
            f"effect ({100 * mde:.1f}): harden the set")
    # The candidate is significantly worse (−15 points): a harm is reported through the gate.
    assert decision.verdict == WORSE and decision.caveats == [gate]
    # 90 tasks +0.05, 10 tasks −0.35 (sd 0.127, MDE 3.6 points): no harm found, so void.
    mixed = decide(base, np.where(np.arange(100) < 90, 1.0, 0.6), n_episodes=20,
                   base_passed=np.ones(100, bool), candidate_passed=np.ones(100, bool))
    assert mixed.claim == NO_DIFFERENCE
    assert mixed.verdict.startswith("not decidable: the base leaves 5.0 points to gain")


@pytest.mark.parametrize(("truncation", "fires"), [
    ((0.10, 0.02), "the base was truncated in 10.0% of episodes, more than twice the other "
                   "arm's 2.0%: budgets, not skill, may decide the difference"),
    ((0.03, 0.20), "the candidate was truncated in 20.0% of episodes, more than twice the "
                   "other arm's 3.0%: budgets, not skill, may decide the difference"),
    ((0.04, 0.02), None),  # twice, not more than twice
    ((0.015, 0.0), None),  # below the 2% that could matter
])
def test_one_arm_truncated_far_more_voids_the_verdict(truncation, fires):
    decision = decide_on(passes(200, range(80)), passes(200, range(90)), truncation=truncation)
    if fires is None:
        assert decision.verdict == BETTER
    else:
        assert names(decision) == [TRUNCATION_IMBALANCE]
        assert decision.verdict == f"not decidable: {fires}"


def test_arms_not_run_alike_are_not_compared_and_voiding_gates_come_first():
    decision = decide_on(passes(20, range(5)), passes(20, range(5, 10)),
                         mismatch="the arms ran under different harnesses",
                         reruns=WIDE_RERUNS)
    assert names(decision) == [NOT_COMPARABLE, TOO_FEW_UNITS, HARDEN_THE_SET,
                               TEST_DOES_NOT_REJECT, INTERVAL_INCLUDES_ZERO]
    assert decision.verdict == "not decidable: the arms ran under different harnesses"
    assert all(gate.voids for gate in decision.gates[:3])
    assert not any(gate.voids for gate in decision.gates[3:])


def test_outcomes_that_do_not_pair_up_with_the_tasks_are_refused():
    with pytest.raises(ValueError, match="one rate and one outcome per task"):
        decide(np.zeros(3), np.ones(3), n_episodes=1, base_passed=[False] * 3,
               candidate_passed=[True] * 2)
    with pytest.raises(ValueError, match="one rate and one outcome per task"):
        decide(np.zeros(3), np.ones(3), n_episodes=1, base_passed=[False] * 4,
               candidate_passed=[True] * 4)
