"""Intervals for a proportion and for a mean over tasks, and the one interval type every number
heldout writes carries.

Sources: Wilson 1927, JASA 22:209-212; Clopper & Pearson 1934, Biometrika 26:404-413;
Brown, Cai & DasGupta 2001, Statistical Science 16:101-133; Efron & Tibshirani 1993, "An
Introduction to the Bootstrap", ch. 6 and 13 (standard error, percentile interval);
Miller 2024, arXiv:2411.00640 (tasks, not episodes, as the unit of resampling).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from heldout.statistics._arrays import (
    CHUNK_ELEMENTS,
    check_confidence,
    check_successes,
    chunk_sizes,
    finite_values,
    scalar_or_array,
)

# A multinomial draw over V distinct values costs about V binomial draws (~50-100 ns each);
# resampling indices costs about N draws and gathers (~7 ns each). Multinomial wins below this.
_MULTINOMIAL_MAX_SHARE = 1 / 16


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided interval.

    `method` is one of "wilson", "clopper-pearson", "bootstrap-multinomial",
    "bootstrap-indices" or "constant" (all values equal with no known bounds: zero width) for
    the intervals of this module; "newcombe paired score" for paired_score_interval; and for
    bca_interval and arm_interval a phrase that also says how many tasks or groups the
    interval rests on ("cluster BCa bootstrap over 2 groups of 10 tasks").
    Fields are floats for scalar input, arrays for array input.

    Like scipy's result objects it says how it was made, and it writes itself out: `to_json`
    is the object every score, selection and report file holds for an interval, and
    `from_json` reads one back.
    """

    estimate: float | np.ndarray
    low: float | np.ndarray
    high: float | np.ndarray
    method: str

    def to_json(self) -> dict[str, Any]:
        """{"estimate", "low", "high", "method"} as JSON values: floats, or lists of floats
        for an interval of arrays."""
        return {
            "estimate": _json_number(self.estimate),
            "low": _json_number(self.low),
            "high": _json_number(self.high),
            "method": self.method,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Interval:
        """The interval `to_json` wrote. Reads those four keys only, so an interval written
        flat into a larger object (a curve point beside its k) reads back from that object."""
        return cls(
            _number_from_json(data["estimate"]),
            _number_from_json(data["low"]),
            _number_from_json(data["high"]),
            str(data["method"]),
        )


def _json_number(value: float | np.ndarray) -> float | list[float]:
    return float(value) if np.ndim(value) == 0 else np.asarray(value, dtype=float).tolist()


def _number_from_json(value: float | list[float]) -> float | np.ndarray:
    return np.asarray(value, dtype=float) if isinstance(value, list) else float(value)


# --------------------------------------------------------------------------------------------
# Binomial intervals


def wilson_interval(c: ArrayLike, n: ArrayLike, confidence: float = 0.95) -> Interval:
    """Wilson score interval for a binomial proportion c/n (Wilson 1927).

    Closed form center ± half-width with center = (c + z²/2)/(n + z²) and
    half-width = z/(n + z²)·√(c(n − c)/n + z²/4), z the two-sided normal quantile; bounds are
    exactly 0 at c = 0 and 1 at c = n. This is scipy.stats.binomtest(...).proportion_ci(
    method="wilson") vectorized (Brown, Cai & DasGupta 2001 recommend it over Wald, which
    collapses to zero width at 0 and n). Inputs broadcast; fields are arrays for array input.
    """
    c, n = check_successes(c, n)
    low, high = wilson_bounds(c, n, check_confidence(confidence))
    return Interval(*(scalar_or_array(x) for x in (c / n, low, high)), method="wilson")


def wilson_bounds(
    c: np.ndarray | float, n: np.ndarray | float, confidence: float
) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson bounds of wilson_interval for c in [0, n], unchecked, and c need not be a
    whole number: a sum of per-task pass rates counts as that many passes of n tasks."""
    z = sps.norm.ppf(0.5 + confidence / 2)
    center = (c + z * z / 2) / (n + z * z)
    half_width = z / (n + z * z) * np.sqrt(c * (n - c) / n + z * z / 4)
    return np.where(c == 0, 0.0, center - half_width), np.where(c == n, 1.0, center + half_width)


def clopper_pearson_interval(c: ArrayLike, n: ArrayLike, confidence: float = 0.95) -> Interval:
    """Clopper-Pearson exact interval for a binomial proportion c/n (Clopper & Pearson 1934).

    Bounds are Beta quantiles: low = B⁻¹(α/2; c, n − c + 1) (0 at c = 0) and
    high = B⁻¹(1 − α/2; c + 1, n − c) (1 at c = n), the same interval as
    scipy.stats.binomtest(...).proportion_ci(method="exact") without its root search per
    task. Coverage is at least the nominal level for every p. Inputs broadcast.
    """
    c, n = check_successes(c, n)
    tail = (1 - check_confidence(confidence)) / 2
    # Beta(0, ·) is undefined; the placeholder shape 1 is discarded by np.where.
    low = np.where(c == 0, 0.0, sps.beta.ppf(tail, np.maximum(c, 1), n - c + 1))
    high = np.where(c == n, 1.0, sps.beta.ppf(1 - tail, c + 1, np.maximum(n - c, 1)))
    return Interval(*(scalar_or_array(x) for x in (c / n, low, high)), method="clopper-pearson")


# --------------------------------------------------------------------------------------------
# Bootstrap over tasks (shared with the paired bootstrap of heldout.statistics.paired_tests)


def bootstrap_means(values: np.ndarray, n_boot: int, seed: int | None) -> tuple[np.ndarray, str]:
    """Means of n_boot resamples (with replacement, size N) of values, and the sampler used.

    A resample's mean depends only on how often each distinct value is drawn, and those counts
    follow Multinomial(N, share of each distinct value). When values take few distinct values
    (pass/fail, per-task rates c/n, paired differences of either) one multinomial draw per
    resample is therefore the exact bootstrap distribution at a fraction of the cost; for paired
    binary outcomes this is the multinomial over the four (A, B) cells, whose two concordant
    cells give the same difference 0. Otherwise indices are drawn. Either way resamples are
    drawn in chunks of at most CHUNK_ELEMENTS numbers.
    """
    rng = np.random.default_rng(seed)
    n_units = values.size
    distinct, counts = np.unique(values, return_counts=True)
    if distinct.size <= n_units * _MULTINOMIAL_MAX_SHARE:
        shares = counts / n_units
        rows = max(1, CHUNK_ELEMENTS // distinct.size)
        chunks = (
            rng.multinomial(n_units, shares, size=size) @ distinct / n_units
            for size in chunk_sizes(n_boot, rows)
        )
        return np.concatenate(list(chunks)), "bootstrap-multinomial"
    rows = max(1, CHUNK_ELEMENTS // n_units)
    chunks = (
        values[rng.integers(0, n_units, size=(size, n_units))].mean(axis=1)
        for size in chunk_sizes(n_boot, rows)
    )
    return np.concatenate(list(chunks)), "bootstrap-indices"


def constant_bounds(
    value: float, n_units: int, support: tuple[float, float] | None, confidence: float
) -> tuple[float, float, str]:
    """Interval for the mean when all n_units values equal `value`, where bootstrap has width 0.

    If values are known to lie in support = [lo, hi], the share q of the population differing
    from `value` is at most u, the exact Clopper-Pearson upper bound for 0 of n_units, and the
    mean then lies in [value − (value − lo)·u, value + (hi − value)·u]. At an edge this is the
    Clopper-Pearson interval itself: all pass gives [(α/2)^(1/N), 1], all fail [0, u].
    """
    if support is None:
        return value, value, "constant"
    lo, hi = support
    u = float(clopper_pearson_interval(0, n_units, confidence).high)
    return value - (value - lo) * u, value + (hi - value) * u, "clopper-pearson"


def check_resampling(n_boot: int, confidence: float) -> float:
    """α = 1 − confidence, once n_boot is known to be a positive integer."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    return 1 - check_confidence(confidence)


def task_bootstrap_ci(
    values: ArrayLike, confidence: float = 0.95, n_boot: int = 10_000, seed: int | None = 0
) -> Interval:
    """Percentile bootstrap interval for the mean over tasks (Efron & Tibshirani 1993, ch. 13).

    `values` holds one number per task (e.g. its pass rate c/n), tasks being the independent
    units (Miller 2024, clustered standard errors); resampling episodes instead ignores their
    correlation within a task and gives intervals too narrow. Tasks are resampled n_boot times
    with replacement (seeded, vectorized: see bootstrap_means) and the α/2 and 1 − α/2
    quantiles of the resampled means are returned.

    When every value is equal the bootstrap has zero width; if the values lie in [0, 1] the
    exact Clopper-Pearson bound is returned instead (method "clopper-pearson": for all-pass
    tasks [(α/2)^(1/N), 1], for all-fail [0, 1 − (α/2)^(1/N)]), otherwise the zero-width
    interval with method "constant".
    """
    values = finite_values("values", values)
    alpha = check_resampling(n_boot, confidence)
    estimate = float(values.mean())
    if np.all(values == values[0]):
        support = (0.0, 1.0) if 0 <= values[0] <= 1 else None
        low, high, method = constant_bounds(float(values[0]), values.size, support, confidence)
        return Interval(estimate, low, high, method)
    means, method = bootstrap_means(values, n_boot, seed)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return Interval(estimate, float(low), float(high), method)


def task_bootstrap_se(
    values: ArrayLike, n_boot: int = 10_000, seed: int | None = 0
) -> float:
    """Bootstrap standard error of the mean over tasks: the standard deviation of the means of
    n_boot resamples of tasks (Efron & Tibshirani 1993, ch. 6), resampled as in
    task_bootstrap_ci. Zero when every task has the same value. Used by the one-standard-error
    selection rule.
    """
    values = finite_values("values", values)
    check_resampling(n_boot, 0.95)
    if np.all(values == values[0]):
        return 0.0
    means, _ = bootstrap_means(values, n_boot, seed)
    return float(means.std(ddof=1))
