"""The paired verdict's test and interval as one procedure: the studentized (bootstrap-t)
bootstrap of the mean difference over tasks, or over groups of tasks, on Hall's
skewness-removing transformation of t.

Why not the sign-flip test: it tests that each difference is as likely to be −d as d (a
symmetric null), not that their mean is 0. When many tasks gain a little and a few lose a lot,
the mean can be 0 while most of the sign patterns' sums lie below the observed one, and the
test calls such a candidate "better" far more often than its level (benchmarks/
verdict_simulation.py). Its studentized form is the same test: Σd² does not change under a sign
flip, so t is a monotone function of Σd. The bootstrap-t estimates the skewness of t from the
data (Hall 1988; Efron & Tibshirani 1993, ch. 12.5): when a few large losses are behind a
mean, the resampled t has a long tail on the side those losses are missing from, which is
where a false "better" comes from. Bootstrapping t itself leaves that tail to the resamples,
which see the losses only as often as the sample did; Hall's transformation
T = t + κt²/3 + κ²t³/27 + κ/6, κ the estimated skewness of the estimate, is monotone in t and
removes the first-order skewness term before the bootstrap calibrates what is left (Hall 1992;
Zhou & Gao 2000 found it the most accurate one-sided interval for skewed means). In the
simulation's skewed and near-ceiling nulls at 100-164 tasks it lowered the false "better" in
14 of 16 cells, by up to 0.015, at no cost in power (docs/statistics.md).

Sources: Hall 1992, "On the removal of skewness by transformation", JRSS B 54:221-228; Zhou &
Gao 2000, "One-sided confidence intervals for means of positively skewed distributions", The
American Statistician 54:100-104; Hall 1988, "Theoretical comparison of bootstrap confidence
intervals", Ann. Statist. 16:927-953; Efron & Tibshirani 1993, "An Introduction to the
Bootstrap", ch. 12.5 and 16.4 (testing with the bootstrap-t); Davison & Hinkley 1997, §3.8 and
§5.2 (clusters; studentized intervals); Cameron & Miller 2015, J. Human Resources 50:317-372
(cluster-robust standard error of a ratio mean, with its G/(G − 1) factor); Phipson & Smyth
2010 ((1 + b)/(1 + B) p-values).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from heldout.statistics._arrays import (
    CHUNK_ELEMENTS,
    check_confidence,
    chunk_sizes,
    finite_values,
    unit_sums,
)
from heldout.statistics.intervals import Interval, constant_bounds

# 9,999 resamples make (B + 1)·α/2 a whole number at α = 0.05 and 0.01, so the p-value and
# the interval's ends fall on the same order statistic.
RESAMPLES = 9_999
# Differences of pass rates added in another order can differ in the last bits.
_TIE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class StudentizedTest:
    """The bootstrap-t test of H0: mean difference = 0, and the interval that inverts it.

    interval: candidate − base over tasks with its equal-tailed interval at `confidence`.
    p_better, p_worse: one-sided p-values, (1 + #{t* ≥ t})/(1 + B) and its mirror; p_value:
    two-sided, 2·min of them, capped at 1. rejects: p_value <= 1 − confidence, which holds
    exactly when the interval excludes 0. units: the tasks or groups resampled.
    """

    interval: Interval
    p_better: float
    p_worse: float
    p_value: float
    units: int
    resamples: int
    method: str
    rejects: bool

    @property
    def p_floor(self) -> float:
        """The smallest two-sided p-value B resamples can give, 2/(1 + B): the resolution."""
        return 2 / (1 + self.resamples)


def studentized_test(
    differences: ArrayLike,
    *,
    groups: ArrayLike | None = None,
    confidence: float = 0.95,
    drift_variance: float = 0.0,
    drift_df: float = math.inf,
    noise_variance: float = 0.0,
    resamples: int = RESAMPLES,
    seed: int | None = 0,
) -> StudentizedTest:
    """Bootstrap-t test and interval for the mean of paired differences d in [−1, 1].

    differences: per task, candidate − base of pass rates, shape (N,). With `groups` (one
    label per task) the units are the G groups, each a (sum of its differences, its size)
    pair, and the estimate is the mean over tasks, θ = Σ sums / Σ sizes; without, each task is
    its own unit of size 1. The standard error is the cluster-robust one,
    se² = G/(G − 1) · Σ (sum_g − θ·size_g)² / (Σ size_g)², which is s²/N for single tasks.
    Each of B resamples draws G units with replacement and gives t* = (θ* − θ)/se*, and its
    pivot T* = H(t*, κ*), H Hall's transformation (hall_pivot) at the resample's own
    skewness κ* (skewness); the observed pivot is T = H(θ/se, κ). H is increasing in t, so
    the interval is [θ − se·H⁻¹(T*₍B−r₎, κ), θ − se·H⁻¹(T*₍r+1₎, κ)] with
    r = ⌊(B + 1)·α/2⌋ − 1 and T*₍i₎ the sorted resamples, and its low end is above 0 exactly
    when p_better <= α/2 and its high end below 0 exactly when p_worse <= α/2: the test and
    the interval are one procedure, and the sign of a claim is the side that rejected.
    Every standard error carries one pseudo-unit of the observed spread, so that a resample
    of units that all share one mean has a finite t* (see _resampled_pivots). Ends beyond
    [−1, 1] are cut there.

    drift_variance: the variance whole runs add to the difference (RunDrift.variance, from the
    spread of paired runs: heldout.statistics.power.run_drift), which no resampling of tasks
    can see, estimated on `drift_df` degrees of freedom (R − 1 for R runs; inf: known). It is
    added to every squared standard error, each resample's θ* is moved by a draw from
    N(0, drift_variance), and each resample's own standard error carries drift_variance·χ²/df,
    χ² a draw on df degrees of freedom: the resampled pivots then spread as a t on few degrees
    of freedom does where the runs' variance dominates (a Satterthwaite mixture where it does
    not), rather than as if three runs had measured it exactly.

    noise_variance: the episodes' part of the variance, which drift_variance holds whole
    (RunDrift.noise) and the units' spread over the pooled runs holds too. It is counted once:
    the units' part is shrunk by s = max(0, 1 − noise/se²ᵤ), se²ᵤ the observed units' squared
    standard error, in the observed standard error and in every resample's, and each
    resample's θ* − θ from the units is scaled by √s, so that the resampled pivots spread as
    the estimate does, net.

    Units whose identical (sum, size) pairs repeat are resampled as multinomial counts over
    the distinct pairs, which is the same distribution as drawing indices: single tasks with
    n episodes have at most 2n + 1 distinct differences.

    When every unit's mean is the same value v the data carry no spread to studentize: v = 0
    gives p = 1; otherwise the interval is intervals.constant_bounds on G units and the test
    rejects when that interval excludes 0 (p is then 1/(B + 1) on the side of v, as no
    resample of equal units can reach beyond the estimate).

    Raises ValueError for empty or non-finite differences, groups that do not pair up with
    the tasks, a confidence outside (0, 1), a negative drift variance and fewer than 1/α
    resamples.
    """
    values = finite_values("differences", differences)
    alpha = 1 - check_confidence(confidence)
    if isinstance(resamples, bool) or not isinstance(resamples, int | np.integer) or \
            (resamples + 1) * alpha / 2 < 1:
        raise ValueError(f"resamples must be an integer with (resamples + 1)·α/2 >= 1, got "
                         f"{resamples!r}")
    if not drift_variance >= 0 or not drift_df > 0 or not noise_variance >= 0:
        raise ValueError(f"drift_variance and noise_variance must be >= 0 and drift_df > 0, got "
                         f"{drift_variance}, {noise_variance} and {drift_df}")
    # Without the runs' variance there is nothing the noise was counted twice in.
    noise_variance = noise_variance if drift_variance else 0.0
    sums, sizes, over = unit_sums(values, groups)
    estimate = float(sums.sum() / sizes.sum())
    method = f"bootstrap-t over {over}, {resamples:,} resamples" + (
        f", carrying the runs' variance (sd {100 * np.sqrt(drift_variance):.1f} points"
        + (f" on {drift_df:g} df)" if math.isfinite(drift_df) else ")")
        if drift_variance else "")
    means = sums / sizes
    if (np.ptp(means) <= _TIE_TOLERANCE * max(1.0, abs(estimate)) and not drift_variance) \
            or sums.size == 1:
        return _without_spread(estimate, sums.size, alpha, resamples, method)
    observed_counts = np.ones((1, sums.size))
    prior = _spread(sums, sizes, observed_counts, 0.0)[0] / sums.size
    units_variance = float(_standard_errors(sums, sizes, observed_counts, prior)[0] ** 2)
    parts = (max(0.0, 1 - noise_variance / units_variance) if units_variance else 1.0,
             drift_variance)
    se = float(np.sqrt(_variances(sums, sizes, observed_counts, prior, *parts)[0]))
    kappa = float(skewness(sums, sizes, observed_counts, prior, *parts)[0])
    observed = float(hall_pivot(np.array(estimate / se), kappa))
    resampled = np.sort(_resampled_pivots(sums, sizes, estimate, prior, parts, resamples,
                                          seed))
    resampled = resampled * drift_factor(se**2 - drift_variance, drift_variance, drift_df,
                                         alpha)
    tolerance = _TIE_TOLERANCE * max(1.0, abs(observed))
    p_better = (1 + np.count_nonzero(resampled >= observed - tolerance)) / (resamples + 1)
    p_worse = (1 + np.count_nonzero(resampled <= observed + tolerance)) / (resamples + 1)
    rank = int(np.floor((resamples + 1) * alpha / 2 + 1e-9)) - 1
    low = estimate - se * float(hall_inverse(resampled[resamples - rank - 1], kappa))
    high = estimate - se * float(hall_inverse(resampled[rank], kappa))
    low, high = float(np.clip(low, -1, 1)), float(np.clip(high, -1, 1))
    p_value = min(1.0, 2 * min(p_better, p_worse))
    # The ends and the p-values rest on the same order statistics; at an exact tie of t with
    # one of them the p-value decides, and the interval is made to say the same.
    if p_better <= alpha / 2:
        low = max(low, np.nextafter(0.0, 1.0))
    elif p_worse <= alpha / 2:
        high = min(high, -np.nextafter(0.0, 1.0))
    else:
        low, high = min(low, 0.0), max(high, 0.0)
    return StudentizedTest(Interval(estimate, low, high, method), float(p_better),
                           float(p_worse), float(p_value), int(sums.size), resamples, method,
                           bool(p_value <= alpha))


def _without_spread(estimate: float, units: int, alpha: float, resamples: int,
                    method: str) -> StudentizedTest:
    """Every unit has the same mean: nothing to studentize (see studentized_test)."""
    low, high, bound = constant_bounds(estimate, units, (-1.0, 1.0), 1 - alpha)
    least = 1 / (resamples + 1)
    rejects = bool(low > 0 or high < 0)
    p_better = least if rejects and estimate > 0 else 1.0
    p_worse = least if rejects and estimate < 0 else 1.0
    p_value = min(1.0, 2 * min(p_better, p_worse))
    described = f"{method}; all {units} units equal, {bound} bound"
    return StudentizedTest(Interval(estimate, float(low), float(high), described),
                           p_better, p_worse, p_value, units, resamples, described, rejects)


def _spread(sums: np.ndarray, sizes: np.ndarray, counts: np.ndarray,
            prior: float) -> np.ndarray:
    """Σ counts·(sum − θ·size)² + prior, θ = Σ counts·sums / Σ counts·sizes, one per row of
    `counts` (how often each unit was drawn)."""
    theta = (counts @ sums) / (counts @ sizes)
    squares = counts @ (sums**2) - 2 * theta * (counts @ (sums * sizes)) \
        + theta**2 * (counts @ (sizes**2))
    return np.maximum(squares, 0.0) + prior


def _standard_errors(sums: np.ndarray, sizes: np.ndarray, counts: np.ndarray,
                     prior: float) -> np.ndarray:
    """The cluster-robust standard error per row of `counts`, its squared residuals given one
    more unit's worth of the observed spread, `prior` (see _resampled_pivots)."""
    units = counts.sum(axis=1)
    return np.sqrt(_spread(sums, sizes, counts, prior) * units / (units - 1)) \
        / (counts @ sizes)


def _variances(sums: np.ndarray, sizes: np.ndarray, counts: np.ndarray, prior: float,
               shrink: float, drift_variance: float) -> np.ndarray:
    """The estimate's variance per row of `counts`: the units' part shrunk net of the
    episodes' noise (studentized_test), plus the runs' part whole."""
    return shrink * _standard_errors(sums, sizes, counts, prior) ** 2 + drift_variance


def skewness(sums: np.ndarray, sizes: np.ndarray, counts: np.ndarray, prior: float,
             shrink: float, drift_variance: float) -> np.ndarray:
    """κ, the skewness of the estimate θ per row of `counts`: Σ r³ / (Σ r² + prior)^(3/2),
    r = sum − θ·size the units' residuals (γ̂/√G for single tasks, γ̂ the sample skewness),
    shrunk by the share of the variance the units carry, (v/(v + drift))^(3/2), v the units'
    part net of the episodes' noise, since the run-level drift is normal and adds none."""
    theta = (counts @ sums) / (counts @ sizes)
    cubes = counts @ sums**3 - 3 * theta * (counts @ (sums**2 * sizes)) \
        + 3 * theta**2 * (counts @ (sums * sizes**2)) - theta**3 * (counts @ sizes**3)
    kappa = cubes / _spread(sums, sizes, counts, prior) ** 1.5
    if not drift_variance:
        return kappa
    units = _variances(sums, sizes, counts, prior, shrink, 0.0)
    return kappa * (units / (units + drift_variance)) ** 1.5


def drift_factor(task_variance: float, drift_variance: float, drift_df: float,
                 alpha: float) -> float:
    """How much wider a critical value must be when part of the variance, `drift_variance`,
    is estimated on `drift_df` degrees of freedom and the rest, `task_variance`, on many:
    Cochran & Cox's critical value, the two parts' critical values z₁₋α/₂ and t₁₋α/₂(df)
    weighted by their shares of the variance, over z₁₋α/₂. Satterthwaite's degrees of
    freedom, estimated from the same few runs, let a drift through where the runs' part is
    small by chance (0.038 at three runs in simulation); Cochran-Cox is the conservative
    one of the two (Cochran & Cox 1957; Lee & Gurland 1975). 1 when nothing is estimated."""
    if not drift_variance or not math.isfinite(drift_df):
        return 1.0
    z = float(sps.norm.ppf(1 - alpha / 2))
    t = float(sps.t.ppf(1 - alpha / 2, drift_df))
    return (task_variance * z + drift_variance * t) / ((task_variance + drift_variance) * z)


def hall_pivot(t: np.ndarray, kappa: float | np.ndarray) -> np.ndarray:
    """Hall's transformation H(t) = t + κt²/3 + κ²t³/27 + κ/6 = ((1 + at)³ − 1)/(3a) + κ/6,
    a = κ/3: increasing in t, so a test on H(t) and the interval it inverts to agree."""
    return t + kappa * t**2 / 3 + kappa**2 * t**3 / 27 + kappa / 6


def hall_inverse(pivot: float, kappa: float) -> float:
    """The t with hall_pivot(t, κ) = pivot: (∛(1 + 3a(pivot − κ/6)) − 1)/a, a = κ/3."""
    a = kappa / 3
    if abs(a) < 1e-12:
        return pivot - kappa / 6
    return float((np.cbrt(1 + 3 * a * (pivot - kappa / 6)) - 1) / a)


def _resampled_pivots(sums: np.ndarray, sizes: np.ndarray, estimate: float, prior: float,
                      parts: tuple[float, float], resamples: int,
                      seed: int | None) -> np.ndarray:
    """T* = H((θ* − θ)/se*, κ*) for `resamples` draws of the units with replacement, as
    multinomial counts over the distinct (sum, size) pairs.

    Every standard error, the observed one included, adds to its squared residuals the mean
    squared residual of the observed units (`prior`, one pseudo-unit): a resample that drew
    only units of one mean (99 tasks at +0.6 and 1 at −1, resampled without the −1) would
    otherwise have se* = 0 and t* = ±inf, and a third of such resamples at +inf would hide a
    difference the sign-flip test puts at p < 1e-20. It changes se by a factor √(1 + 1/G).
    `parts`: the units' part's shrink net of the episodes' noise, and what whole runs add
    (studentized_test)."""
    shrink, drift_variance = parts
    pairs, multiplicity = np.unique(np.column_stack([sums, sizes]), axis=0, return_counts=True)
    cell_sums, cell_sizes = pairs[:, 0], pairs[:, 1]
    rng = np.random.default_rng(seed)
    shares = multiplicity / multiplicity.sum()
    rows = max(1, CHUNK_ELEMENTS // pairs.shape[0])
    resampled = []
    for size in chunk_sizes(resamples, rows):
        counts = rng.multinomial(sums.size, shares, size=size).astype(float)
        theta = estimate + np.sqrt(shrink) * ((counts @ cell_sums) / (counts @ cell_sizes)
                                              - estimate)
        if drift_variance:
            theta = theta + rng.normal(0.0, np.sqrt(drift_variance), size)
        se = np.sqrt(_variances(cell_sums, cell_sizes, counts, prior, *parts))
        kappa = skewness(cell_sums, cell_sizes, counts, prior, *parts)
        resampled.append(hall_pivot((theta - estimate) / se, kappa))
    return np.concatenate(resampled)
