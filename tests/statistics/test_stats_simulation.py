"""Seeded simulations: heldout.statistics estimators are unbiased and its intervals cover.

Each check runs at a size that keeps the default run fast; the `slow` variants repeat it with
more simulated evaluations or a wider grid (run with `pytest -m slow`).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as sps

from heldout.statistics import (
    clopper_pearson_interval,
    mcnemar_exact,
    paired_bootstrap,
    pass_at_k,
    task_bootstrap_ci,
    wilson_interval,
)

Z_95 = sps.norm.ppf(0.975)


def fresh_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2**32))


# --------------------------------------------------------------------------------------------
# pass@k is unbiased, the plug-in is not


def pass_at_k_bias(
    counts: np.ndarray, n: int, p: float, ks: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """|mean estimate − truth| per k, and the Monte Carlo standard error of the mean."""
    estimates = pass_at_k(n, counts, ks)
    truth = 1 - (1 - p) ** np.array(ks)
    standard_error = estimates.std(axis=0, ddof=1) / np.sqrt(counts.size)
    return np.abs(estimates.mean(axis=0) - truth), standard_error


# At k = n the estimator is the indicator c > 0: unbiased with a standard error that can be 0
# (p small, no pass drawn), hence the ulp-sized slack.
ULP_SLACK = 1e-15


@pytest.mark.parametrize("p", [0.05, 0.2, 0.5])
def test_pass_at_k_mean_matches_truth(p):
    n, ks = 10, [1, 2, 5, 10]
    counts = np.random.default_rng(int(p * 1000)).binomial(n, p, 20_000)
    bias, standard_error = pass_at_k_bias(counts, n, p, ks)
    assert np.all(bias <= 3 * standard_error + ULP_SLACK)
    # The same draws put the plug-in 1 − (1 − c/n)^5 far below the truth.
    plug_in = 1 - (1 - counts / n) ** 5
    assert 1 - (1 - p) ** 5 - plug_in.mean() > 10 * standard_error[2]


@pytest.mark.slow
@pytest.mark.parametrize("p", [0.005, 0.05, 0.2, 0.5, 0.9])
@pytest.mark.parametrize("n", [16, 200])
def test_pass_at_k_mean_matches_truth_large(p, n):
    # For k beyond n/4 the estimate is so skewed (its mean rests on rare, small c) that 200,000
    # draws estimate neither its mean nor its standard error; test_stats checks every k exactly.
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= n / 4]
    counts = np.random.default_rng(int(p * 1000) + n).binomial(n, p, 200_000)
    bias, standard_error = pass_at_k_bias(counts, n, p, ks)
    assert np.all(bias <= 3 * standard_error + ULP_SLACK)


# --------------------------------------------------------------------------------------------
# Wilson covers where Wald fails; Clopper-Pearson never under-covers


def coverage(intervals_low, intervals_high, p):
    return float(np.mean((intervals_low <= p) & (p <= intervals_high)))


@pytest.mark.parametrize("p", [0.03, 0.5, 0.97])
def test_wilson_covers_and_wald_does_not(p):
    n = 40
    counts = np.random.default_rng(int(p * 100)).binomial(n, p, 20_000)
    wilson = wilson_interval(counts, n)
    rate = counts / n
    wald_half_width = Z_95 * np.sqrt(rate * (1 - rate) / n)
    wilson_coverage = coverage(wilson.low, wilson.high, p)
    wald_coverage = coverage(rate - wald_half_width, rate + wald_half_width, p)
    assert wilson_coverage >= 0.92
    if p != 0.5:
        assert wald_coverage < 0.8
    assert wald_coverage < wilson_coverage


def exact_coverage(interval, n: int, p: np.ndarray) -> np.ndarray:
    """Coverage of interval(c, n) at each p, summed over all c with binomial weights."""
    counts = np.arange(n + 1)
    bounds = interval(counts, n)
    covers = (bounds.low[None, :] <= p[:, None]) & (p[:, None] <= bounds.high[None, :])
    return np.sum(sps.binom.pmf(counts[None, :], n, p[:, None]) * covers, axis=1)


@pytest.mark.parametrize("n", [1, 10, 40, 200])
def test_clopper_pearson_never_under_covers(n):
    p = np.linspace(0.001, 0.999, 499)
    assert exact_coverage(clopper_pearson_interval, n, p).min() >= 0.95 - 1e-12
    # Wilson is an approximate interval: near nominal on average, not everywhere.
    assert exact_coverage(wilson_interval, n, p).mean() == pytest.approx(0.95, abs=0.02)


# --------------------------------------------------------------------------------------------
# The task bootstrap covers the population mean; an episode bootstrap does not


def bootstrap_coverage(evaluations: int, n_boot: int, seed: int) -> tuple[float, float]:
    """Coverage of task- and episode-level bootstraps, U-shaped tasks, 30 tasks × 32 episodes."""
    alpha, beta, n_tasks, episodes_per_task = 0.4, 0.3, 30, 32
    truth = alpha / (alpha + beta)
    rng = np.random.default_rng(seed)
    task_hits = episode_hits = 0
    for _ in range(evaluations):
        counts = rng.binomial(episodes_per_task, rng.beta(alpha, beta, n_tasks))
        by_task = task_bootstrap_ci(counts / episodes_per_task, n_boot=n_boot, seed=fresh_seed(rng))
        # The mistake this guards against: every episode treated as an independent unit.
        episodes = (np.arange(episodes_per_task) < counts[:, None]).ravel().astype(float)
        by_episode = task_bootstrap_ci(episodes, n_boot=n_boot, seed=fresh_seed(rng))
        task_hits += by_task.low <= truth <= by_task.high
        episode_hits += by_episode.low <= truth <= by_episode.high
    return task_hits / evaluations, episode_hits / evaluations


def test_task_bootstrap_covers_u_shaped_population():
    by_task, by_episode = bootstrap_coverage(evaluations=1_000, n_boot=2_000, seed=30)
    assert by_task >= 0.90
    assert by_episode < 0.6


@pytest.mark.slow
def test_task_bootstrap_covers_u_shaped_population_large():
    by_task, by_episode = bootstrap_coverage(evaluations=5_000, n_boot=10_000, seed=31)
    print(f"task bootstrap coverage {by_task:.4f}, episode bootstrap coverage {by_episode:.4f}")
    assert by_task >= 0.90
    assert by_episode < 0.6


def paired_bootstrap_coverage(evaluations: int, n_tasks: int, n_boot: int, seed: int) -> float:
    # Cells (both pass, only A, only B, neither): A is 4 points better than B.
    cells = np.array([0.5, 0.12, 0.08, 0.3])
    truth = cells[1] - cells[2]
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(evaluations):
        outcome = rng.choice(4, size=n_tasks, p=cells)
        a, b = np.isin(outcome, [0, 1]), np.isin(outcome, [0, 2])
        result = paired_bootstrap(a, b, n_boot=n_boot, seed=fresh_seed(rng))
        hits += result.low <= truth <= result.high
    return hits / evaluations


def test_paired_bootstrap_covers_true_difference():
    assert paired_bootstrap_coverage(1_000, n_tasks=200, n_boot=2_000, seed=40) >= 0.93


@pytest.mark.slow
@pytest.mark.parametrize("n_tasks", [50, 200, 2_000])
def test_paired_bootstrap_covers_true_difference_large(n_tasks):
    rate = paired_bootstrap_coverage(5_000, n_tasks=n_tasks, n_boot=10_000, seed=41)
    print(f"paired bootstrap coverage at N = {n_tasks}: {rate:.4f}")
    # The percentile bootstrap runs a little short of 95% with few tasks (about 92.7% at 50).
    assert rate >= 0.92


# --------------------------------------------------------------------------------------------
# McNemar's exact test holds its size under the null and has power under an alternative


def mcnemar_rejection_rates(
    n_tasks: int, only_a: float, only_b: float, simulations: int, seed: int
) -> tuple[float, float]:
    """Share of simulated comparisons whose exact p-value and mid-p fall at or below 0.05."""
    cells = [only_a, only_b, 1 - only_a - only_b]
    tables = np.random.default_rng(seed).multinomial(n_tasks, cells, simulations)[:, :2]
    # Few distinct (b, c) tables occur; test each once and weight it by its frequency.
    distinct, frequency = np.unique(tables, axis=0, return_counts=True)
    results = [mcnemar_exact(b, c) for b, c in distinct]
    exact = sum(f for f, r in zip(frequency, results, strict=True) if r.pvalue <= 0.05)
    midp = sum(f for f, r in zip(frequency, results, strict=True) if r.midp <= 0.05)
    return exact / simulations, midp / simulations


def test_mcnemar_size_and_power():
    exact, midp = mcnemar_rejection_rates(100, 0.1, 0.1, 20_000, seed=50)
    assert 0.02 <= exact <= 0.05
    assert exact <= midp
    power, _ = mcnemar_rejection_rates(200, 0.15, 0.05, 20_000, seed=51)
    assert power > 0.8


@pytest.mark.slow
@pytest.mark.parametrize("n_tasks", [20, 50, 200, 1_000])
@pytest.mark.parametrize("discordant", [0.05, 0.3])
def test_mcnemar_size_large(n_tasks, discordant):
    exact, midp = mcnemar_rejection_rates(
        n_tasks, discordant / 2, discordant / 2, 200_000, seed=n_tasks
    )
    print(f"McNemar N = {n_tasks}, discordant {discordant}: exact {exact:.4f}, mid-p {midp:.4f}")
    assert exact <= 0.05
