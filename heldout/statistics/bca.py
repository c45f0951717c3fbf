"""BCa bootstrap intervals for a mean over tasks or over groups of tasks, the interval of one
arm's pass rate (or pass@k, pass^k) built on them, and the cluster standard error of a mean.

Sources: Efron 1987, "Better Bootstrap Confidence Intervals", JASA 82:171-185; Efron &
Tibshirani 1993, "An Introduction to the Bootstrap", ch. 14 (BCa: bias correction z0 and the
jackknife estimate of the acceleration a, eqs. 14.14-14.15); Davison & Hinkley 1997, "Bootstrap
Methods and their Application", §3.8 (resample the clusters, not the units, when units of a
cluster are correlated); Field & Welsh 2007, JRSS B 69:369-390 (the cluster bootstrap);
Miller 2024, arXiv:2411.00640 (clustered standard errors: the cluster is the unit); Cameron &
Miller 2015, J. Human Resources 50:317-372 (the cluster-robust standard error); Wilson 1927;
Brown, Cai & DasGupta 2001, Statistical Science 16:101-133.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import special
from scipy import stats as sps

from heldout.statistics._arrays import (
    CHUNK_ELEMENTS,
    chunk_sizes,
    finite_values,
    group_codes,
    unit_sums,
    whole_numbers,
)
from heldout.statistics.intervals import (
    Interval,
    check_resampling,
    clopper_pearson_interval,
    constant_bounds,
    wilson_bounds,
    wilson_interval,
)

# Below this many units that ever passed (or ever failed) arm_interval pulls the BCa interval
# toward the Wilson bound; simulation (benchmarks/coverage_single_arm.py) chose it.
EDGE_UNITS = 15
# Bootstrap means within this (relative) distance of the estimate count as ties: a resample of
# pass rates sums the same fractions in another order, so exact ties can differ in the last ulp.
_TIE_TOLERANCE = 1e-12


def bca_interval(
    values: ArrayLike,
    *,
    groups: ArrayLike | None = None,
    confidence: float = 0.95,
    n_boot: int = 4000,
    seed: int | None = 0,
    support: tuple[float, float] | None = None,
) -> Interval:
    """BCa bootstrap interval for the mean of `values` over tasks (Efron 1987).

    values: one number per task (a pass rate, or a paired difference of pass rates), shape (N,).
    Without `groups` the tasks are the resampled units: scipy.stats.bootstrap(method="BCa")'s
    interval with n_boot resamples (under one seed the two agree to rounding where no
    resampled mean ties the estimate: tests/statistics/test_paired_stats.py), its jackknife
    taken in closed form, since scipy's generic one costs O(N²) (12 of the 16 s of a report
    on 10,000 tasks). With `groups` (one hashable label per task, e.g. the split key) the
    groups are: each resample draws G groups with replacement and takes the mean of all the
    tasks in them, Σ sums / Σ sizes over the drawn groups; the bias correction z0 is
    Φ⁻¹(share of resampled means below the estimate, ties counted half) and the acceleration
    a = Σu³ / (6 (Σu²)^{3/2}) comes from the jackknife over groups, u_g = mean_g' θ(−g') −
    θ(−g), θ(−g) the mean of every task outside group g (Efron & Tibshirani 1993, eq. 14.15;
    Davison & Hinkley 1997, §3.8). Tasks of one group are not independent, so resampling them
    one by one would understate the variance; the interval rests on G units, not N.

    When every task (or every group mean) is equal the bootstrap has zero width: with `support`
    = (lo, hi), the range the values are known to lie in ((0, 1) for a pass rate, (−1, 1) for a
    difference), the bound of intervals.constant_bounds on that many units is returned, else a
    zero-width interval. The method says how many tasks or groups the interval rests on.
    Raises ValueError for non-finite or empty values, groups that do not pair up with the
    tasks, n_boot < 1, a confidence outside (0, 1), and a single group without a support.
    """
    values = finite_values("values", values)
    alpha = check_resampling(n_boot, confidence)
    estimate = float(values.mean())
    codes, n_units, units = _units(values.size, groups)
    sums = np.bincount(codes, weights=values, minlength=n_units)
    sizes = np.bincount(codes, minlength=n_units).astype(float)
    means = sums / sizes
    if np.ptp(means) <= _TIE_TOLERANCE * max(1.0, abs(estimate)):
        if sums.size == 1 and support is None:
            raise ValueError("one group carries no information on how groups vary; give the "
                             "support of the values or more groups")
        low, high, method = constant_bounds(estimate, sums.size, support, confidence)
        return Interval(estimate, low, high, f"{method}: all {units} equal")
    low, high = _cluster_bca(sums, sizes, alpha, n_boot, seed)
    return Interval(estimate, low, high,
                    f"{'' if groups is None else 'cluster '}BCa bootstrap over {units}")


def _units(n_tasks: int, groups: ArrayLike | None) -> tuple[np.ndarray, int, str]:
    """Per task the index of its resampling unit, the number of units, and how to name them."""
    if groups is None:
        return np.arange(n_tasks), n_tasks, f"{n_tasks} tasks"
    codes, n_groups = group_codes(groups, n_tasks)
    return codes, n_groups, f"{n_groups} group{'s' * (n_groups > 1)} of {n_tasks} tasks"


def _cluster_bca(
    sums: np.ndarray, sizes: np.ndarray, alpha: float, n_boot: int, seed: int | None
) -> tuple[float, float]:
    """BCa bounds for Σ sums / Σ sizes, resampling the G (sum, size) pairs; G >= 2 and the
    ratios sums/sizes not all equal."""
    n_units = sums.size
    rng = np.random.default_rng(seed)
    rows = max(1, CHUNK_ELEMENTS // n_units)
    resampled = np.concatenate([
        sums[drawn].sum(axis=1) / sizes[drawn].sum(axis=1)
        for drawn in (rng.integers(0, n_units, size=(size, n_units))
                      for size in chunk_sizes(n_boot, rows))
    ])
    total, count = sums.sum(), sizes.sum()
    estimate = total / count
    tolerance = _TIE_TOLERANCE * max(1.0, abs(estimate))
    below = np.count_nonzero(resampled < estimate - tolerance)
    ties = np.count_nonzero(np.abs(resampled - estimate) <= tolerance)
    # All resamples on one side would make z0 infinite; B resamples cannot resolve a share
    # finer than 1/(2B), so the share is kept that far from 0 and 1.
    share = np.clip((below + ties / 2) / n_boot, 0.5 / n_boot, 1 - 0.5 / n_boot)
    z0 = special.ndtri(share)
    jackknife = (total - sums) / (count - sizes)
    u = jackknife.mean() - jackknife
    acceleration = np.sum(u**3) / (6 * np.sum(u**2) ** 1.5)
    z = special.ndtri(np.array([alpha / 2, 1 - alpha / 2]))
    levels = special.ndtr(z0 + (z0 + z) / (1 - acceleration * (z0 + z)))
    low, high = np.quantile(resampled, levels)
    return float(low), float(high)


def arm_interval(
    rates: ArrayLike,
    *,
    n_episodes: ArrayLike,
    groups: ArrayLike | None = None,
    confidence: float = 0.95,
    seed: int | None = 0,
    n_boot: int = 4000,
) -> Interval:
    """Interval for one arm's pass@1, the mean over tasks of per-task pass rates c/n.

    rates: per-task pass rates, shape (N,); n_episodes: the n behind them, a scalar or one per
    task (checked: every rate must be a whole number of passes out of n, so that a pass@k
    estimate is not mistaken for a rate); groups: one label per task, or None. The interval is
    arm_estimate_interval's; raises ValueError for rates outside [0, 1] or not c/n, and as
    bca_interval does.
    """
    rates = finite_values("rates", rates)
    _check_pass_rates(rates, n_episodes)
    return arm_estimate_interval(rates, groups=groups, confidence=confidence, seed=seed,
                                 n_boot=n_boot)


def arm_estimate_interval(
    values: ArrayLike,
    *,
    groups: ArrayLike | None = None,
    confidence: float = 0.95,
    seed: int | None = 0,
    n_boot: int = 4000,
) -> Interval:
    """Interval for the mean over tasks of one arm's per-task estimates in [0, 1]: pass rates
    c/n (through arm_interval, which checks them), the unbiased pass@k and pass^k, a share of
    episodes. groups: one label per task, or None.

    - Every value 0 or 1, no groups (one episode per task, or tasks that pass or fail all
      their episodes): the tasks are Bernoulli draws of the population mean, and the
      interval is the binomial one on (k tasks at 1, N): Wilson for 0 < k < N, and the exact
      Clopper-Pearson bound at k = 0 and k = N, where Wilson is narrower than the exact bound.
      Both are monotone in k, and CP's upper bound at 0 (1 − (α/2)^(1/N)) stays below
      Wilson's at 1, so the interval never shrinks as a task is added to the passing ones
      (the task bootstrap gave [0, 0.116] at 0 of 30 and [0, 0.100] at 1 of 30).
    - Otherwise: BCa over tasks, or the cluster BCa over groups (bca_interval), pulled toward
      the hull of itself and the Wilson interval on (p̂·U, U), U the tasks or groups. Wilson
      there treats each unit as one Bernoulli trial, the largest variance a value in [0, 1]
      with that mean can have (p(1 − p)), so it holds whatever the tasks are like; the BCa
      interval estimates the variance from the units, and when few of them are ever above 0
      (or ever below 1) the tail that carries the mean is barely sampled and it falls short
      (0.913-0.938 at N = 30 on skewed Beta task sets with 5-10 episodes). The pull is the share
      (15 − k)/14 clipped to [0, 1], k the units with a value above 0 or below 1 (for a pass
      rate: that passed at least once, failed at least once), whichever are fewer: the whole
      way when one unit carries every pass (or every failure), none from 15 such units on,
      without a jump in between. With 15, simulation (benchmarks/coverage_single_arm.py, N =
      30, 2,000 replications) puts the coverage at 0.944-0.984 on skewed sets and 0.941-0.966
      in the middle of the range, where the interval is BCa's; 10 left one skewed cell at 0.928.

    The method says which, and over how many tasks or groups. Raises ValueError for values
    outside [0, 1], and as bca_interval does.
    """
    values = finite_values("values", values)
    outside = np.flatnonzero((values < 0) | (values > 1))
    if outside.size:
        raise ValueError(f"values must lie in [0, 1]; task {outside[0]} has {values[outside[0]]}")
    n_tasks = values.size
    if groups is None and np.all((values == 0) | (values == 1)):
        passed = int(values.sum())
        if 0 < passed < n_tasks:
            interval = wilson_interval(passed, n_tasks, confidence)
            return Interval(interval.estimate, interval.low, interval.high,
                            f"wilson over {n_tasks} tasks")
        interval = clopper_pearson_interval(passed, n_tasks, confidence)
        return Interval(interval.estimate, interval.low, interval.high,
                        f"clopper-pearson: all {n_tasks} tasks {'pass' if passed else 'fail'}")
    bca = bca_interval(values, groups=groups, confidence=confidence, n_boot=n_boot, seed=seed,
                       support=(0.0, 1.0))
    codes, n_units, _ = _units(n_tasks, groups)
    ever_passed = np.count_nonzero(np.bincount(codes, weights=values > 0, minlength=n_units))
    ever_failed = np.count_nonzero(np.bincount(codes, weights=values < 1, minlength=n_units))
    informative = min(ever_passed, ever_failed)
    pull = min(1.0, max(0.0, (EDGE_UNITS - informative) / (EDGE_UNITS - 1)))
    wilson_low, wilson_high = wilson_bounds(bca.estimate * n_units, n_units, confidence)
    low = bca.low - pull * max(0.0, bca.low - float(wilson_low))
    high = bca.high + pull * max(0.0, float(wilson_high) - bca.high)
    if (low, high) == (bca.low, bca.high):
        return bca
    side = "passed" if ever_passed <= ever_failed else "failed"
    return Interval(bca.estimate, float(low), float(high),
                    f"{bca.method}, widened toward Wilson: {informative} of {n_units} "
                    f"{'groups' if groups is not None else 'tasks'} ever {side}")


def mean_standard_error(values: ArrayLike, *, groups: ArrayLike | None = None) -> float:
    """Standard error of the mean over tasks of `values`: the sample standard deviation over
    √N without groups; with groups the cluster-robust one over the G groups, √(G/(G − 1)·
    Σ_g (s_g − n_g·x̄)²)/N, s_g and n_g a group's sum and tasks (Cameron & Miller 2015; with
    each task its own group it is the first). 0 with a single unit: nothing to vary over."""
    values = finite_values("values", values)
    sums, sizes, _ = unit_sums(values, groups)
    units = sums.size
    if units < 2:
        return 0.0
    residuals = sums - sizes * values.mean()
    return float(np.sqrt(units / (units - 1) * np.sum(residuals**2)) / values.size)


def _check_pass_rates(rates: np.ndarray, n_episodes: ArrayLike) -> None:
    episodes = whole_numbers("n_episodes", n_episodes)
    if episodes.size not in (1, rates.size):
        raise ValueError(f"n_episodes must be a scalar or one per task: got {episodes.size} "
                         f"for {rates.size} tasks")
    episodes = np.broadcast_to(episodes.ravel(), rates.shape)
    if np.any(episodes < 1):
        raise ValueError(f"n_episodes must be at least 1, got {episodes.min()}")
    passes = rates * episodes
    bad = np.flatnonzero((rates < 0) | (rates > 1) | (np.abs(passes - np.round(passes)) > 1e-6))
    if bad.size:
        raise ValueError(f"rates must be pass rates c/n in [0, 1]; task {bad[0]} has "
                         f"{rates[bad[0]]} with n = {episodes[bad[0]]}")


def difference_interval(
    differences: ArrayLike,
    *,
    groups: ArrayLike | None = None,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> Interval:
    """Interval for a paired difference of pass rates with n > 1 episodes per task: the hull
    of the BCa interval (over tasks, or groups) and the paired t-interval (Student; with
    groups, the cluster-robust standard error over G groups and t(G − 1)).

    Why the hull: at 30 tasks the per-task differences are few, discrete and mostly 0, and BCa's
    bias and acceleration, estimated from them, shorten it: in 2,000-replication simulations
    (tests/statistics/test_verdict_simulation.py) BCa alone covered 0.902-0.929 at N = 30 with 5
    or 10 episodes, the t-interval 0.935 at worst, the hull 0.9415 at worst, for 5-8% more width.
    Where the BCa is wider (skewed differences at larger N) it is kept.
    """
    values = np.asarray(differences, dtype=float)
    boot = bca_interval(values, groups=groups, confidence=confidence, seed=seed,
                        support=(-1.0, 1.0))
    mean = float(values.mean())
    units = values.size if groups is None else group_codes(groups, values.size)[1]
    standard_error = mean_standard_error(values, groups=groups)
    half = float(sps.t.ppf(0.5 + confidence / 2, units - 1)) * standard_error if units > 1 \
        else 0.0
    low, high = max(-1.0, min(boot.low, mean - half)), min(1.0, max(boot.high, mean + half))
    if (low, high) == (boot.low, boot.high):
        return boot
    return Interval(boot.estimate, low, high,
                    f"{boot.method}, widened to the paired t-interval where it is wider")
