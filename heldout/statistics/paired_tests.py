"""Two versions on the same tasks: the sign-flip permutation test of their per-task
differences, Newcombe's score interval for a difference of paired proportions, the paired
bootstrap of their mean difference and the exact McNemar test of the tasks on which they
disagree.

Sources: Fisher 1935, "The Design of Experiments", §21 (the sign-flip test of paired
differences); Good 2005, "Permutation, Parametric, and Bootstrap Tests of Hypotheses" (paired
samples, Monte Carlo p-values); Phipson & Smyth 2010, Stat Appl Genet Mol Biol 9:39
((1 + b)/(1 + B) p-values); Newcombe 1998, "Improved confidence intervals for the difference
between binomial proportions based on paired data", Stat Med 17:2635-2650 (method 10);
Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 13; Miller 2024,
arXiv:2411.00640 (paired differences, clustered errors); McNemar 1947, Psychometrika
12:153-157; Fagerland, Lydersen & Laake 2013, BMC Medical Research Methodology 13:91 (mid-p).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from heldout.statistics._arrays import (
    CHUNK_ELEMENTS,
    check_confidence,
    chunk_sizes,
    finite_values,
    group_codes,
    scalar_or_array,
    whole_numbers,
)
from heldout.statistics.intervals import (
    Interval,
    bootstrap_means,
    check_resampling,
    constant_bounds,
    wilson_interval,
)
from heldout.statistics.pvalues import p_value_text

# Up to this many non-zero units every sign pattern is counted; beyond it, Monte Carlo.
EXACT_MAX_UNITS = 20
# Sums of sign-flipped differences that equal the observed one up to rounding are ties: the
# same pass-rate fractions added in another order can differ in the last bits.
_TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class PermutationTest:
    """A two-sided sign-flip permutation test of paired differences.

    statistic: Σ (candidate − base) over tasks. p_value: the share of sign patterns whose
    |sum| is at least the observed |sum| (exact), or (1 + that count)/(1 + draws) (Monte Carlo).
    units: the tasks, or the groups, whose signs are flipped; nonzero_units: those whose
    difference (or group sum) is not 0, the only ones a flip changes. exact: every pattern was
    counted; draws: the Monte Carlo draws, None when exact. rejects: p_value <= alpha.
    floor: the smallest p-value the draws can give, 1/(1 + draws) (None when exact): the
    p-value's resolution. The verdict's intersection-union test (heldout.statistics.decision)
    is this record too, its exact, draws and floor those of the test whose p it reports.
    """

    statistic: float
    p_value: float
    units: int
    nonzero_units: int
    exact: bool
    draws: int | None
    method: str
    rejects: bool
    floor: float | None = None  # absent from report.json files written before it was kept

    @property
    def printed_p_value(self) -> str:
        """The p-value as heldout writes it, with its resolution when it is Monte Carlo."""
        return p_value_text(self.p_value, draws=self.draws, floor=self.floor)


def paired_permutation_test(
    candidate: ArrayLike,
    base: ArrayLike,
    *,
    groups: ArrayLike | None = None,
    alpha: float = 0.05,
    draws: int = 20_000,
    seed: int | None = 0,
) -> PermutationTest:
    """Sign-flip permutation test of H0: the per-task differences d = candidate − base are
    symmetric about 0 (Fisher 1935, §21; Good 2005). Two-sided, statistic Σd.

    candidate, base: per-task pass rates over all episodes, shape (N,), in the same task order;
    every episode counts, not one sample index. Under H0 each task's difference is as likely
    to be −d as d, so the null distribution is that of Σ ±d over the 2^m sign patterns of the
    m non-zero differences (zeros flip to themselves). With `groups` (one label per task) the
    signs flip per group, on the group sums: tasks of a group share a source and are not
    independent, so the group is the exchangeable unit (a cluster sign-flip test).

    Exact when every non-zero unit has the same size (one episode per task without groups):
    the sum is then a binomial count, whatever m. Otherwise exact when m <= EXACT_MAX_UNITS:
    all 2^m patterns are counted, vectorized over the bits of
    range(2^(m/2)) for each half of the units and paired by binary search. Otherwise
    `draws` patterns are drawn (seeded) and p = (1 + #{|sum| >= |observed|})/(1 + draws), which
    counts the observed pattern among the draws and so never gives 0 (Phipson & Smyth 2010).
    With one episode per task (d in {−1, 0, 1}) the exact test is the exact McNemar test: m
    is the b + c discordant tasks and the sum is c − b. With m <= 5 no outcome reaches
    p < 0.0625: too few units, whatever the effect.

    Raises ValueError for arrays that are empty, non-finite or of different lengths, groups
    that do not pair up with the tasks, alpha outside (0, 1) and draws < 1.
    """
    candidate, base = finite_values("candidate", candidate), finite_values("base", base)
    if candidate.shape != base.shape:
        raise ValueError(f"candidate and base must pair up task by task; got {candidate.size} "
                         f"and {base.size} values")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha}")
    if isinstance(draws, bool) or not isinstance(draws, int | np.integer) or draws < 1:
        raise ValueError(f"draws must be a positive integer, got {draws!r}")
    differences = candidate - base
    if groups is None:
        sums, over = differences, ""
    else:
        codes, n_groups = group_codes(groups, differences.size)
        sums = np.bincount(codes, weights=differences, minlength=n_groups)
        over = f" over {n_groups} group{'s' * (n_groups > 1)}"
    tolerance = _TIE_TOLERANCE * float(np.abs(differences).sum())
    nonzero = sums[np.abs(sums) > tolerance]
    threshold = abs(float(nonzero.sum())) - tolerance
    # Units of one size (one episode per task, no groups: each discordant task is ±1): the sum
    # is a binomial count, exact at any number of units.
    binomial = nonzero.size > EXACT_MAX_UNITS and bool(np.ptp(np.abs(nonzero)) <= tolerance)
    # An observed sum of 0 is reached by every pattern: p = 1 exactly, however many units.
    exact = nonzero.size <= EXACT_MAX_UNITS or threshold <= 0 or binomial
    if threshold <= 0:
        p_value = 1.0
    elif binomial:
        p_value = _binomial_share(nonzero)
    elif exact:
        p_value = _exact_share(nonzero, threshold)
    else:
        p_value = (1 + _drawn_count(nonzero, threshold, draws, seed)) / (1 + draws)
    method = (f"sign-flip permutation{over}, "
              + ("exact" if exact else f"Monte Carlo with {draws:,} draws"))
    return PermutationTest(float(differences.sum()), float(p_value), int(sums.size),
                           int(nonzero.size), exact, None if exact else int(draws), method,
                           bool(p_value <= alpha), None if exact else 1 / (1 + draws))


def _binomial_share(values: np.ndarray) -> float:
    """Share of the 2^m sign patterns of m values of one size a whose |sum| >= the observed
    |sum|: a pattern with K positive signs sums to a(2K − m), K ~ Binomial(m, 1/2), so it is
    the two-sided tail P(|2K − m| >= |2k − m|) of the observed count k (the exact sign test)."""
    positive = int(np.count_nonzero(values > 0))
    return float(min(1.0, 2 * sps.binom.cdf(min(positive, values.size - positive),
                                            values.size, 0.5)))


def _exact_share(values: np.ndarray, threshold: float) -> float:
    """Share of the 2^m sign patterns of values whose |sum| >= threshold > 0, counted without
    listing them: the sums of each half of the values over its own sign patterns (the bits of
    range(2^h)) are paired by binary search, 2 · 2^(m/2) sums instead of 2^m."""
    left, right = (_signed_sums(half) for half in np.array_split(values, 2))
    right.sort()
    at_least = right.size - np.searchsorted(right, threshold - left, side="left")
    at_most = np.searchsorted(right, -threshold - left, side="right")
    return float((at_least.sum() + at_most.sum()) / (left.size * right.size))


def _signed_sums(values: np.ndarray) -> np.ndarray:
    """Σ ±v over all 2^h sign patterns of the h values, pattern i taking − where bit j is set."""
    patterns = np.arange(1 << values.size)[:, None] & (1 << np.arange(values.size))
    return np.where(patterns, -1.0, 1.0) @ values


def _drawn_count(values: np.ndarray, threshold: float, draws: int, seed: int | None) -> int:
    """How many of `draws` random sign patterns give |sum| >= threshold. A pattern is m random
    bits b (unpacked from random bytes, the cheapest fair bits numpy offers) and its sum is
    Σ(1 − 2b)·v = Σv − 2·(b @ v)."""
    rng = np.random.default_rng(seed)
    total, n_values = values.sum(), values.size
    rows = max(1, CHUNK_ELEMENTS // n_values)
    extreme = 0
    for size in chunk_sizes(draws, rows):
        random_bytes = rng.integers(0, 256, size=(size, (n_values + 7) // 8), dtype=np.uint8)
        bits = np.unpackbits(random_bytes, axis=1, count=n_values)
        extreme += np.count_nonzero(np.abs(total - 2 * (bits @ values)) >= threshold)
    return extreme


def paired_score_interval(
    b: ArrayLike,
    c: ArrayLike,
    n_tasks: ArrayLike,
    confidence: float = 0.95,
    *,
    both: ArrayLike,
) -> Interval:
    """Newcombe's hybrid score interval for a difference of paired proportions (Newcombe 1998,
    method 10): candidate − base = (c − b)/N with one outcome per task and arm.

    b: tasks only the base passed; c: tasks only the candidate passed; both: tasks both passed;
    n_tasks: N, so N − b − c − both tasks both failed. The 2×2 table is needed, not only b and
    c: the correction for the correlation of the two arms rests on it. With p1 = (both + c)/N
    (candidate) and p2 = (both + b)/N (base), their Wilson intervals [l1, u1] and [l2, u2],
    and θ = p1 − p2:

        low  = θ − √((p1 − l1)² − 2φ(p1 − l1)(u2 − p2) + (u2 − p2)²)
        high = θ + √((p2 − l2)² − 2φ(p2 − l2)(u1 − p1) + (u1 − p1)²)

    φ is the phi coefficient of the table with Newcombe's correction: for
    D = both·neither − b·c, the numerator is D − N/2 when D > N/2, 0 when 0 <= D <= N/2 and D
    when D < 0, divided by √ of the product of the four margins; φ = 0 when a margin is 0.
    Unlike the bootstrap it does not collapse when few tasks flip one way (b = 0, c = 4 of
    100: the interval includes 0, as McNemar's exact p = 0.125 says it should), and it never
    leaves [−1, 1]. Inputs broadcast; fields are arrays for array input. Checked against the
    method-10 column of Newcombe's worked examples (tests/statistics/test_paired_stats.py).

    Raises ValueError for negative or non-integer counts, N < 1 and b + c + both > N.
    """
    counts = [whole_numbers(name, value)
              for name, value in (("b", b), ("c", c), ("both", both), ("n_tasks", n_tasks))]
    b, c, both, n = np.broadcast_arrays(*counts)
    if np.any(n < 1):
        raise ValueError(f"n_tasks must be at least 1, got {n.min()}")
    if np.any(np.minimum(np.minimum(b, c), both) < 0) or np.any(b + c + both > n):
        raise ValueError("b, c and both must be non-negative and add up to at most n_tasks")
    neither = n - b - c - both
    candidate = wilson_interval(both + c, n, check_confidence(confidence))
    base = wilson_interval(both + b, n, confidence)
    p1, p2 = (both + c) / n, (both + b) / n
    # Floats: the product of four margins overflows int64 from N ≈ 110,000.
    margins = np.prod([(both + c), (b + neither), (both + b), (c + neither)], axis=0, dtype=float)
    excess = both.astype(float) * neither - b.astype(float) * c
    numerator = np.where(excess > n / 2, excess - n / 2, np.minimum(excess, 0.0))
    phi = np.divide(numerator, np.sqrt(margins), out=np.zeros_like(margins), where=margins > 0)
    below1, above1 = p1 - candidate.low, candidate.high - p1
    below2, above2 = p2 - base.low, base.high - p2
    # (1 − φ)(x² + y²) <= x² − 2φxy + y²: never negative but for rounding.
    low = p1 - p2 - np.sqrt(np.maximum(below1**2 - 2 * phi * below1 * above2 + above2**2, 0))
    high = p1 - p2 + np.sqrt(np.maximum(below2**2 - 2 * phi * below2 * above1 + above1**2, 0))
    return Interval(*(scalar_or_array(x) for x in ((c - b) / n, low, high)),
                    method="newcombe paired score")


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
