"""The primitives of issue 15 against hand-computed cases, published values and independent code:
the sign-flip permutation test, Newcombe's paired score interval, the (cluster) BCa interval,
one arm's interval, and pass@k's limit on n."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest
import scipy.stats as sps
from statsmodels.stats.proportion import confint_proportions_2indep

from heldout.files import json_bytes
from heldout.statistics import (
    arm_interval,
    bca_interval,
    clopper_pearson_interval,
    mcnemar_exact,
    paired_permutation_test,
    paired_score_interval,
    pass_at_k,
    pass_hat_k,
    wilson_interval,
)
from heldout.statistics.estimators import MAX_EPISODES
from heldout.statistics.paired_tests import EXACT_MAX_UNITS


def outcomes(n_tasks: int, passing: int) -> np.ndarray:
    return (np.arange(n_tasks) < passing).astype(float)


def scipy_sign_flip(candidate, base, **options) -> float:
    """scipy's paired permutation test of Σ(candidate − base): permutation_type="samples"
    swaps the two values of a pair, which flips the sign of its difference."""
    return sps.permutation_test(
        (candidate, base), lambda x, y, axis: np.sum(x - y, axis=axis),
        permutation_type="samples", vectorized=True, **options,
    ).pvalue


# --------------------------------------------------------------------------------------------
# The sign-flip permutation test


def test_four_one_way_flips_of_100_tasks_are_mcnemars_p_of_0_125():
    # Base passes tasks 0-39, the candidate 0-43: b = 0, c = 4. The four non-zero differences
    # have 16 sign patterns; only all + and all − reach |sum| = 4: p = 2/16.
    result = paired_permutation_test(outcomes(100, 44), outcomes(100, 40))
    assert (result.statistic, result.p_value) == (4.0, 0.125)
    assert result.p_value == mcnemar_exact(0, 4).pvalue
    assert (result.units, result.nonzero_units, result.exact, result.draws) == (100, 4, True, None)
    assert result.method == "sign-flip permutation, exact"
    assert not result.rejects
    assert not paired_permutation_test(outcomes(100, 44), outcomes(100, 40), alpha=0.1).rejects
    assert paired_permutation_test(outcomes(100, 44), outcomes(100, 40), alpha=0.125).rejects


@pytest.mark.parametrize("concordant", [0, 7])
def test_with_one_episode_per_task_it_is_the_exact_mcnemar_test(concordant):
    # Tasks where both arms agree are zeros and change nothing: every (b, c) with b + c up to
    # the exact limit, padded with `concordant` tasks both pass and as many both fail.
    for b in range(EXACT_MAX_UNITS + 1):
        for c in range(EXACT_MAX_UNITS + 1 - b):
            base = np.r_[np.ones(b), np.zeros(c), np.ones(concordant), np.zeros(concordant)]
            candidate = np.r_[np.zeros(b), np.ones(c), np.ones(concordant), np.zeros(concordant)]
            if base.size == 0:
                continue
            result = paired_permutation_test(candidate, base)
            assert result.exact and result.nonzero_units == b + c
            assert result.p_value == pytest.approx(mcnemar_exact(b, c).pvalue, abs=1e-12)


@pytest.mark.parametrize(("b", "c"), [(3, 25), (14, 16), (30, 45), (0, 21), (70, 110),
                                    (400, 460)])
def test_one_episode_per_task_is_the_exact_mcnemar_test_at_any_number_of_discordant_tasks(b, c):
    base = np.r_[np.ones(b), np.zeros(c), np.zeros(10)]
    candidate = np.r_[np.zeros(b), np.ones(c), np.zeros(10)]
    result = paired_permutation_test(candidate, base, draws=20_000, seed=3)
    assert result.exact is True and result.draws is None and result.method.endswith("exact")
    assert json_bytes(asdict(result))  # as the report writes it (make repro failed on np.bool_)
    assert result.p_value == pytest.approx(mcnemar_exact(b, c).pvalue, rel=1e-9)
    assert result.p_value == pytest.approx(sps.binomtest(c, b + c, 0.5).pvalue, rel=1e-9)


def test_units_of_one_size_over_groups_are_binomial_too():
    # 30 groups of 2 tasks: each group's sum is +2 or -2 (both tasks flip the same way).
    signs = np.r_[np.ones(20), -np.ones(10)]
    candidate = np.repeat((signs + 1) / 2, 2)
    result = paired_permutation_test(candidate, 1 - candidate, groups=np.repeat(range(30), 2))
    assert result.exact and result.nonzero_units == 30
    assert result.p_value == pytest.approx(sps.binomtest(20, 30, 0.5).pvalue, rel=1e-9)


def test_exact_agreement_with_scipy_permutation_test():
    rng = np.random.default_rng(7)
    continuous = (rng.beta(2, 2, 13), rng.beta(2, 2, 13))
    rates = (rng.binomial(5, 0.6, 15) / 5, rng.binomial(5, 0.5, 15) / 5)
    for candidate, base in (continuous, rates):
        ours = paired_permutation_test(candidate, base)
        assert ours.exact
        assert ours.p_value == pytest.approx(
            scipy_sign_flip(candidate, base, n_resamples=np.inf), abs=1e-12)


def test_group_flips_agree_with_scipy_on_the_group_sums():
    rng = np.random.default_rng(8)
    groups = rng.integers(0, 12, 60)
    candidate, base = rng.binomial(4, 0.55, 60) / 4, rng.binomial(4, 0.45, 60) / 4
    ours = paired_permutation_test(candidate, base, groups=groups)
    sums = [np.bincount(groups, weights=arm, minlength=12) for arm in (candidate, base)]
    assert ours.units == 12 and ours.method == "sign-flip permutation over 12 groups, exact"
    assert ours.p_value == pytest.approx(scipy_sign_flip(*sums, n_resamples=np.inf), abs=1e-12)


def test_monte_carlo_agrees_with_scipy_within_monte_carlo_error():
    rng = np.random.default_rng(9)
    base = rng.beta(2, 3, 80)
    candidate = np.clip(base + rng.normal(0.03, 0.15, 80), 0, 1)
    ours = paired_permutation_test(candidate, base, draws=20_000, seed=1)
    theirs = scipy_sign_flip(candidate, base, n_resamples=20_000, rng=2)
    assert ours.method == "sign-flip permutation, Monte Carlo with 20,000 draws"
    # Two independent estimates of the same p: their difference has twice the variance.
    assert abs(ours.p_value - theirs) <= 4 * np.sqrt(2 * theirs * (1 - theirs) / 20_000) + 1e-4


def test_exact_up_to_20_non_zero_units_then_monte_carlo():
    rng = np.random.default_rng(10)
    for nonzero, exact in ((EXACT_MAX_UNITS, True), (EXACT_MAX_UNITS + 1, False)):
        differences = np.r_[rng.choice([-1, 1], nonzero) * rng.random(nonzero), np.zeros(50)]
        result = paired_permutation_test(differences, np.zeros(differences.size), draws=999)
        assert (result.nonzero_units, result.units, result.exact) == (nonzero, nonzero + 50, exact)
        assert result.draws == (None if exact else 999)
        assert result.method.endswith("exact" if exact else "Monte Carlo with 999 draws")
    # A Monte Carlo p-value counts the observed pattern: never below 1/(1 + draws).
    gains = np.linspace(0.5, 1.0, 40)
    far = paired_permutation_test(gains, np.zeros(40), draws=999)
    assert far.p_value == 1 / 1000 and far.rejects and not far.exact
    assert far == paired_permutation_test(gains, np.zeros(40), draws=999)
    assert paired_permutation_test(np.ones(20), np.zeros(20)).p_value == 2 / 2**20


def test_ten_tasks_in_two_groups_rest_on_two_units():
    # Every task improves: over tasks p = 2/2^10, but two groups give only 4 sign patterns,
    # two of which reach the observed sum: p = 1/2, whatever the effect.
    candidate, base = np.full(10, 0.8), np.full(10, 0.3)
    over_tasks = paired_permutation_test(candidate, base)
    over_groups = paired_permutation_test(candidate, base, groups=["a"] * 5 + ["b"] * 5)
    assert over_tasks.p_value == 2 / 2**10 and over_tasks.rejects
    assert (over_groups.p_value, over_groups.units, over_groups.rejects) == (0.5, 2, False)
    assert over_groups.method == "sign-flip permutation over 2 groups, exact"


def test_no_difference_anywhere_gives_p_of_1():
    result = paired_permutation_test([0.5, 0.1, 1.0], [0.5, 0.1, 1.0])
    assert (result.p_value, result.nonzero_units, result.exact) == (1.0, 0, True)
    # Flips that cancel: every sign pattern reaches |sum| >= 0, so p = 1 exactly however many.
    balanced = paired_permutation_test(outcomes(30, 15), outcomes(30, 15)[::-1])
    assert (balanced.p_value, balanced.nonzero_units, balanced.exact) == (1.0, 30, True)
    # Group sums that cancel (0.1 + 0.2 − 0.3, in floats) are zeros, not tiny differences.
    cancelling = paired_permutation_test([0.1, 0.2, 0.0], [0.0, 0.0, 0.3], groups=[1, 1, 1])
    assert (cancelling.nonzero_units, cancelling.p_value) == (0, 1.0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: paired_permutation_test([1, 0], [1, 0, 1]), "pair up task by task"),
        (lambda: paired_permutation_test([1, np.nan], [1, 0]), "finite"),
        (lambda: paired_permutation_test([1, 0], [1, 0], alpha=0), "alpha"),
        (lambda: paired_permutation_test([1, 0], [1, 0], draws=0), "draws"),
        (lambda: paired_permutation_test([1, 0], [1, 0], groups=[1]), "one label per task"),
        (lambda: paired_permutation_test([1, 0], [1, 0], groups=[[1], [2]]), "hashable"),
    ],
)
def test_permutation_test_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --------------------------------------------------------------------------------------------
# Newcombe's paired score interval (method 10)

# Newcombe 1998, Stat Med 17:2635-2650: the method-10 interval of each worked example, keyed
# by the table (both pass, first only, second only, neither), as printed to 4 decimals in the
# paper's table of examples (transcribed in a third-party test suite; the (20, 12, 2, 16) row
# is also in ratesci's tests, "against Newcombe's method 10 result"). First = candidate.
NEWCOMBE_1998_METHOD_10 = {
    (36, 12, 2, 0): (0.0569, 0.3404),
    (20, 12, 2, 16): (0.0562, 0.3292),
    (18, 12, 2, 18): (0.0562, 0.3290),
    (36, 14, 0, 0): (0.1528, 0.4167),
    (35, 14, 0, 1): (0.1461, 0.4175),
    (18, 14, 0, 18): (0.1441, 0.3963),
    (2, 97, 1, 0): (0.8721, 0.9854),
    (1, 97, 1, 1): (0.8736, 0.9850),
    (0, 29, 1, 0): (0.6666, 0.9882),
    (2, 98, 0, 0): (0.9178, 0.9945),
    (1, 98, 0, 1): (0.9171, 0.9916),
    (0, 30, 0, 0): (0.8395, 1.0),
    (54, 0, 0, 0): (-0.0664, 0.0664),
    (53, 0, 0, 1): (-0.0729, 0.0729),
    (30, 0, 0, 24): (-0.0358, 0.0358),
    (29, 0, 0, 25): (-0.0354, 0.0354),
    (28, 0, 0, 26): (-0.0352, 0.0352),
    (27, 0, 0, 27): (-0.0351, 0.0351),
}
# Method 10 in later papers, as ratesci's tests quote them (pairbinci, "MOVER_newc", Wilson):
# Fagerland, Lydersen & Laake 2014 (Bentur et al. 2009), Tang et al. 2010, Chang et al. 2024.
LATER_METHOD_10 = {
    (1, 1, 7, 12): (-0.507, -0.026),
    (8, 3, 1, 2): (-0.1574, 0.4136),
    (7, 25, 2, 68): (0.133, 0.318),
}


@pytest.mark.parametrize("published", [NEWCOMBE_1998_METHOD_10, LATER_METHOD_10])
def test_newcombes_published_method_10_intervals(published):
    tables = np.array(list(published))
    ours = paired_score_interval(tables[:, 2], tables[:, 1], tables.sum(axis=1),
                                 both=tables[:, 0])
    expected = np.array(list(published.values()))
    # Printed to 3 or 4 decimals; one row of the paper ((1, 97, 1, 1): 0.87367) is printed
    # 0.8736, so allow one unit of the last printed decimal.
    tolerance = 1.01e-4 if published is NEWCOMBE_1998_METHOD_10 else 1.01e-3
    np.testing.assert_allclose(ours.low, expected[:, 0], rtol=0, atol=tolerance)
    np.testing.assert_allclose(ours.high, expected[:, 1], rtol=0, atol=tolerance)
    np.testing.assert_allclose(ours.estimate, (tables[:, 1] - tables[:, 2]) / tables.sum(axis=1))


def test_with_a_zero_margin_or_a_small_agreement_it_is_the_independent_newcombe_interval():
    # φ = 0 when a margin is 0, and when 0 <= ad − bc <= N/2 (Newcombe's correction): the
    # interval is then statsmodels' independent-samples Newcombe (hybrid score) interval.
    for table in ((0, 30, 0, 0), (54, 0, 0, 0), (0, 3, 0, 5), (1, 0, 0, 1), (2, 3, 1, 4)):
        both, first_only, second_only, _ = table
        n = sum(table)
        low, high = confint_proportions_2indep(both + first_only, n, both + second_only, n,
                                               method="newcomb", compare="diff")
        ours = paired_score_interval(second_only, first_only, n, both=both)
        assert (ours.low, ours.high) == pytest.approx((low, high), abs=1e-12), table


def test_four_one_way_flips_of_100_tasks_leave_0_inside_the_interval():
    interval = paired_score_interval(0, 4, 100, both=40)
    assert interval.estimate == 0.04
    assert interval.low < 0 < interval.high
    assert interval.method == "newcombe paired score"
    # Ten flips of 200 are decisive, as McNemar's p = 0.002 is.
    assert paired_score_interval(0, 10, 200, both=80).low > 0


def test_the_interval_stays_in_bounds_and_swapping_arms_mirrors_it():
    both, b, c, neither = np.meshgrid(*[np.arange(7)] * 4, indexing="ij")
    keep = both + b + c + neither > 0
    both, b, c, n = both[keep], b[keep], c[keep], (both + b + c + neither)[keep]
    forward = paired_score_interval(b, c, n, both=both)
    mirrored = paired_score_interval(c, b, n, both=both)
    assert np.all((forward.low >= -1) & (forward.high <= 1))
    assert np.all((forward.low <= forward.estimate) & (forward.estimate <= forward.high))
    np.testing.assert_allclose(forward.low, -mirrored.high, atol=1e-15)
    assert isinstance(paired_score_interval(1, 2, 10, both=3).low, float)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: paired_score_interval(-1, 2, 10, both=3), "non-negative"),
        (lambda: paired_score_interval(4, 4, 10, both=3), "add up to at most"),
        (lambda: paired_score_interval(0, 0, 0, both=0), "at least 1"),
        (lambda: paired_score_interval(1.5, 2, 10, both=3), "whole numbers"),
        (lambda: paired_score_interval(1, 2, 10, 1.0, both=3), "confidence"),
    ],
)
def test_paired_score_interval_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --------------------------------------------------------------------------------------------
# BCa over tasks and over groups


def test_each_task_its_own_group_is_scipys_bca():
    # The cluster code with singleton groups is the textbook BCa; scipy draws its resamples as
    # rng.integers(0, N, (B, N)) too, so with one seed the two agree to rounding, and with
    # another seed within the Monte Carlo error of a bound.
    values = np.random.default_rng(12).beta(0.5, 3, 40)
    scipy_bca = sps.bootstrap((values,), np.mean, n_resamples=4000, method="BCa",
                              rng=np.random.default_rng(0)).confidence_interval
    tasks = bca_interval(values)
    singletons = bca_interval(values, groups=range(40))
    assert (tasks.low, tasks.high) == pytest.approx(tuple(scipy_bca), abs=1e-12)
    assert (singletons.low, singletons.high) == pytest.approx(tuple(scipy_bca), abs=1e-12)
    assert tasks.method == "BCa bootstrap over 40 tasks"
    assert singletons.method == "cluster BCa bootstrap over 40 groups of 40 tasks"
    other_seed = bca_interval(values, groups=range(40), seed=5)
    half_width = (scipy_bca.high - scipy_bca.low) / 2
    assert other_seed.low == pytest.approx(scipy_bca.low, abs=0.1 * half_width)
    assert other_seed.high == pytest.approx(scipy_bca.high, abs=0.1 * half_width)


def test_ten_tasks_in_two_groups():
    # Group a's tasks pass about 80% of episodes, group b's about 20%. A resample draws groups
    # (a, a), (a, b) or (b, b) with chances 1/4, 1/2, 1/4: means 0.8, 0.5, 0.2. z0 is
    # Φ⁻¹(1/4 + 1/2·1/2) = 0 up to Monte Carlo error and the jackknife values (0.2, 0.8) are
    # symmetric, a = 0: the 2.5% and 97.5% quantiles fall in the outer masses, [0.2, 0.8].
    # The task bootstrap sees 10 independent tasks and a much narrower interval.
    rates = np.array([0.8, 0.9, 0.7, 0.8, 0.8, 0.2, 0.1, 0.3, 0.2, 0.2])
    groups = ["a"] * 5 + ["b"] * 5
    over_groups = bca_interval(rates, groups=groups)
    over_tasks = bca_interval(rates)
    assert (over_groups.estimate, over_groups.low, over_groups.high) == pytest.approx(
        (0.5, 0.2, 0.8), abs=1e-12)
    assert over_groups.method == "cluster BCa bootstrap over 2 groups of 10 tasks"
    assert over_groups.high - over_groups.low > 1.5 * (over_tasks.high - over_tasks.low)
    assert bca_interval(rates, groups=groups) == over_groups


def test_unequal_groups_resample_the_mean_of_all_drawn_tasks():
    # One group of 1 task (rate 1) and one of 3 (rate 0): resampled means 1, 1/4, 0 with
    # chances 1/4, 1/2, 1/4, so the interval spans [0, 1] while the estimate is 1/4.
    interval = bca_interval([1.0, 0.0, 0.0, 0.0], groups=[0, 1, 1, 1])
    assert interval.estimate == 0.25
    assert (interval.low, interval.high) == (0.0, 1.0)


def test_equal_units_give_the_exact_bound_or_zero_width():
    u = clopper_pearson_interval(0, 2).high
    same_groups = bca_interval([0.0, 1.0, 0.5, 0.5], groups=[1, 1, 2, 2], support=(0.0, 1.0))
    assert (same_groups.low, same_groups.high) == pytest.approx((0.5 - 0.5 * u, 0.5 + 0.5 * u))
    assert same_groups.method == "clopper-pearson: all 2 groups of 4 tasks equal"
    assert bca_interval(np.zeros(30), support=(-1.0, 1.0)).high == pytest.approx(
        clopper_pearson_interval(0, 30).high)
    unbounded = bca_interval(np.full(5, 3.0))
    assert (unbounded.low, unbounded.high) == (3.0, 3.0)
    one_group = bca_interval([0.0, 1.0], groups=["x", "x"], support=(0.0, 1.0))
    assert (one_group.low, one_group.high) == pytest.approx((0.5 - 0.5 * 0.975, 0.5 + 0.5 * 0.975))
    with pytest.raises(ValueError, match="one group"):
        bca_interval([0.0, 1.0], groups=["x", "x"])


# --------------------------------------------------------------------------------------------
# One arm's interval


def test_one_episode_per_task_is_monotone_in_the_passing_tasks():
    intervals = [arm_interval(outcomes(30, k), n_episodes=1) for k in range(31)]
    lows, highs = np.array([i.low for i in intervals]), np.array([i.high for i in intervals])
    assert np.all(np.diff(lows) > 0) and np.all(np.diff(highs) > 0)
    # The case: 0 of 30 gave [0, 0.116] and 1 of 30 [0, 0.100].
    exact_zero = clopper_pearson_interval(0, 30)
    assert (intervals[0].low, intervals[0].high) == (0.0, exact_zero.high)
    assert intervals[0].method == "clopper-pearson: all 30 tasks fail"
    assert intervals[30].low == clopper_pearson_interval(30, 30).low
    assert intervals[1].high > exact_zero.high
    for k in range(1, 30):
        wilson = wilson_interval(k, 30)
        assert (intervals[k].low, intervals[k].high) == (wilson.low, wilson.high)
    assert intervals[1].method == "wilson over 30 tasks"


def test_one_task_carrying_every_pass_gets_the_whole_wilson_bound():
    rates = np.r_[0.1, np.zeros(29)]
    interval = arm_interval(rates, n_episodes=10)
    # Wilson's upper bound for 0.1 passes of 30: (c + z²/2 + z·√(c(N − c)/N + z²/4))/(N + z²).
    z2 = 1.96**2
    wilson_high = (0.1 + z2 / 2 + np.sqrt(z2 * (0.1 * 29.9 / 30 + z2 / 4))) / (30 + z2)
    assert interval.high == pytest.approx(wilson_high, rel=1e-4)
    assert interval.low == 0.0
    assert interval.method.endswith("widened toward Wilson: 1 of 30 tasks ever passed")
    assert interval.high > 3 * bca_interval(rates).high


def test_away_from_the_edges_it_is_the_bca_interval():
    rates = np.random.default_rng(13).binomial(10, np.random.default_rng(14).beta(2, 2, 30)) / 10
    assert arm_interval(rates, n_episodes=10) == bca_interval(rates, support=(0.0, 1.0))
    grouped = arm_interval(rates, n_episodes=10, groups=np.arange(30) % 3)
    assert grouped.method.startswith("cluster BCa bootstrap over 3 groups of 30 tasks")
    assert grouped.high - grouped.low > 2 * (bca_interval(rates).high - bca_interval(rates).low)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: arm_interval([0.5, 0.25], n_episodes=2), "pass rates c/n"),
        (lambda: arm_interval([1.5, 0.0], n_episodes=2), "pass rates c/n"),
        (lambda: arm_interval([0.5, 0.0], n_episodes=0), "at least 1"),
        (lambda: arm_interval([0.5, 0.25], n_episodes=[2, 4, 4]), "one per task"),
    ],
)
def test_arm_interval_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --------------------------------------------------------------------------------------------
# pass@k and pass^k refuse an n their arithmetic cannot handle exactly


def test_pass_at_k_raises_where_it_used_to_wrap():
    assert MAX_EPISODES == 3_037_000_498
    # At the limit the largest key, (n + 1)² − 1, still fits an int64: c = n and c = 0 work.
    assert pass_at_k([MAX_EPISODES, 10], [MAX_EPISODES, 3], 1) == pytest.approx([1.0, 0.3])
    assert pass_hat_k([MAX_EPISODES, 10], [0, 3], 1) == pytest.approx([0.0, 0.3])
    # One more and a task with c = n would have been keyed as another task (pass@1 of 1/n
    # came out as 1.0 at n = 4·10⁹ before).
    for estimator in (pass_at_k, pass_hat_k):
        with pytest.raises(ValueError, match="exceeds 3,037,000,498"):
            estimator([MAX_EPISODES + 1, 10], [1, 3], 1)
        with pytest.raises(ValueError, match="64-bit integer"):
            estimator(1e19, 1, 1)
