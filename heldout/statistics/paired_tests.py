"""Two versions on the same tasks: the paired bootstrap of their mean difference and the exact
McNemar test of the tasks on which they disagree.

Sources: Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 13; Miller 2024,
arXiv:2411.00640 (paired differences); McNemar 1947, Psychometrika 12:153-157; Fagerland,
Lydersen & Laake 2013, BMC Medical Research Methodology 13:91 (mid-p).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from heldout.statistics._arrays import finite_values, whole_numbers
from heldout.statistics.intervals import (
    Interval,
    bootstrap_means,
    check_resampling,
    constant_bounds,
)


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar test: b = pairs where only A passed, c = pairs where only B passed."""

    b: int
    c: int
    n_discordant: int
    pvalue: float
    midp: float


def paired_bootstrap(
    a: ArrayLike,
    b: ArrayLike,
    confidence: float = 0.95,
    n_boot: int = 10_000,
    seed: int | None = 0,
) -> Interval:
    """Mean paired difference a − b over tasks (the `estimate`) with its percentile bootstrap
    interval.

    a[i] and b[i] are the scores of versions A and B on the same task i (pass/fail or pass
    rate). Tasks are resampled as pairs, so the correlation between A and B on a task cancels
    in the difference (Miller 2024, paired differences; Efron & Tibshirani 1993, ch. 13).
    When the differences take few distinct values (binary outcomes beyond a few dozen tasks,
    pass rates over a few episodes) resampling is the exact multinomial over the outcome cells
    (see heldout.statistics.intervals.bootstrap_means), orders of magnitude faster than
    drawing indices.

    When all differences are equal (e.g. A and B agree on every task) and a, b lie in [0, 1],
    the interval is [d − (d + 1)·u, d + (1 − d)·u] with u the Clopper-Pearson upper bound for
    0 of N tasks differing from the rest: [−u, u] when every task agrees.
    """
    a, b = finite_values("a", a), finite_values("b", b)
    if a.shape != b.shape:
        raise ValueError(f"a and b must pair up task by task; got {a.size} and {b.size} values")
    alpha = check_resampling(n_boot, confidence)
    differences = a - b
    estimate = float(differences.mean())
    if np.all(differences == differences[0]):
        in_unit_range = min(a.min(), b.min()) >= 0 and max(a.max(), b.max()) <= 1
        support = (-1.0, 1.0) if in_unit_range else None
        low, high, method = constant_bounds(
            float(differences[0]), differences.size, support, confidence
        )
        return Interval(estimate, low, high, method)
    means, method = bootstrap_means(differences, n_boot, seed)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return Interval(estimate, float(low), float(high), method)


def mcnemar_exact(b: int, c: int) -> McNemarResult:
    """Exact McNemar test on the discordant pairs, with its mid-p value.

    Under H0 (A and B equally good) each of the b + c discordant pairs favours either version
    with probability 1/2, so the p-value is the two-sided exact binomial test of b successes
    in b + c trials at p = 0.5 (McNemar 1947; scipy.stats.binomtest). The mid-p value
    2·P(X < m) + P(X = m), m = min(b, c), capped at 1, subtracts half the probability of the
    observed table and keeps close to nominal size while the exact test is conservative
    (Fagerland, Lydersen & Laake 2013). With no discordant pairs both are 1.
    """
    b_count, c_count = (int(x) for x in whole_numbers("b, c", [b, c]))
    if min(b_count, c_count) < 0:
        raise ValueError(f"discordant counts must be non-negative, got b = {b}, c = {c}")
    n_discordant = b_count + c_count
    if n_discordant == 0:
        return McNemarResult(0, 0, 0, 1.0, 1.0)
    pvalue = sps.binomtest(b_count, n_discordant, 0.5).pvalue
    smaller = min(b_count, c_count)
    midp = min(
        1.0,
        2 * sps.binom.cdf(smaller, n_discordant, 0.5) - sps.binom.pmf(smaller, n_discordant, 0.5),
    )
    return McNemarResult(b_count, c_count, n_discordant, float(pvalue), float(midp))
