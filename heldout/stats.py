"""Estimators, intervals and paired tests that every number heldout reports rests on.

The unit of uncertainty is the task, never the episode (DESIGN §5): episodes of one task are
correlated, so treating them as independent draws makes intervals too narrow by the square root
of the design effect (Miller 2024, "Adding Error Bars to Evals: A Statistical Approach to
Language Model Evaluations", arXiv:2411.00640). Everything here is a pure function of arrays,
vectorized with numpy over tasks; results are small frozen dataclasses or arrays.

Sources cited in the docstrings:
- Chen et al. 2021, "Evaluating Large Language Models Trained on Code", arXiv:2107.03374, §2.1.
- Yao et al. 2024, "τ-bench: A Benchmark for Tool-Agent-User Interaction", arXiv:2406.12045.
- Wilson 1927, JASA 22:209-212; Clopper & Pearson 1934, Biometrika 26:404-413;
  Brown, Cai & DasGupta 2001, Statistical Science 16:101-133.
- Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 13 (percentile interval).
- McNemar 1947, Psychometrika 12:153-157; Fagerland, Lydersen & Laake 2013, BMC Medical Research
  Methodology 13:91 (mid-p).
- Ridout, Demétrio & Firth 1999, Biometrics 55:137-148 (ANOVA estimate of ρ for binary data);
  Kish 1965, "Survey Sampling" (design effect).
- Madaan et al. 2024, "Quantifying Variance in Evaluation Benchmarks", arXiv:2406.10229.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

# Bound on the elements of any temporary array built per chunk (512 KiB of float64), so memory
# stays flat however many tasks or resamples there are; chunks this small also stay in cache,
# which made index resampling ~1.5x faster than chunks of 2**20 on the reference machine.
_CHUNK_ELEMENTS = 1 << 16

# A multinomial draw over V distinct values costs about V binomial draws (~50-100 ns each);
# resampling indices costs about N draws and gathers (~7 ns each). Multinomial wins below this.
_MULTINOMIAL_MAX_SHARE = 1 / 16


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided interval.

    `method` is one of "wilson", "clopper-pearson", "bootstrap-multinomial",
    "bootstrap-indices" or "constant" (all values equal with no known bounds: zero width).
    Fields are floats for scalar input, arrays for array input.
    """

    estimate: float | np.ndarray
    low: float | np.ndarray
    high: float | np.ndarray
    method: str


@dataclass(frozen=True)
class PairedBootstrap:
    """Mean paired difference a − b over tasks with its interval; `method` as in Interval."""

    diff: float
    low: float
    high: float
    method: str


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar test: b = pairs where only A passed, c = pairs where only B passed."""

    b: int
    c: int
    n_discordant: int
    pvalue: float
    midp: float


@dataclass(frozen=True)
class DesignEffect:
    """Between-task variance of the true pass rate, intra-task correlation ρ, 1 + (n − 1)ρ."""

    task_variance: float
    rho: float
    design_effect: float


@dataclass(frozen=True)
class NoiseFloor:
    """Smallest score change that reruns of one unchanged version cannot produce by chance."""

    floor: float
    run_sd: float
    n_runs: int
    t_critical: float


@dataclass(frozen=True)
class CountsSummary:
    """Per-version summary of per-task success counts (c successes out of n episodes)."""

    n_tasks: int
    pass_at_1: Interval
    pass_at_k: dict[int, float]
    pass_hat_k: dict[int, float]
    failure_capable: int
    all_fail: int
    design_effect: DesignEffect | None


# --------------------------------------------------------------------------------------------
# Input checks


def _whole_numbers(name: str, value: ArrayLike) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype == bool or not np.issubdtype(array.dtype, np.number):
        raise ValueError(f"{name} must hold whole numbers, got dtype {array.dtype}")
    flat = array.ravel()
    bad = np.flatnonzero(~(np.isfinite(flat) & (flat == np.round(flat))))
    if bad.size:
        raise ValueError(f"{name} must hold whole numbers; element {bad[0]} is {flat[bad[0]]}")
    return array.astype(np.int64)


def _finite_values(name: str, value: ArrayLike) -> np.ndarray:
    array = np.asarray(value, dtype=float)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence (one value per task)")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite; task {np.flatnonzero(~np.isfinite(array))[0]}")
    return array


def _check_confidence(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    return confidence


def _check_successes(c: ArrayLike, n: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    c, n = np.broadcast_arrays(_whole_numbers("c", c), _whole_numbers("n", n))
    if np.any(n < 1):
        raise ValueError(f"n must be at least 1 for every task, got n = {n.min()}")
    bad = np.flatnonzero((c < 0) | (c > n))
    if bad.size:
        task = bad[0]
        raise ValueError(
            f"c must lie in [0, n] for every task; task {task} has c = {c.ravel()[task]}, "
            f"n = {n.ravel()[task]}"
        )
    return c, n


def _scalar_or_array(array: np.ndarray) -> float | np.ndarray:
    return float(array) if array.ndim == 0 else array


def _chunk_sizes(total: int, per_chunk: int) -> Iterator[int]:
    for start in range(0, total, per_chunk):
        yield min(per_chunk, total - start)


# --------------------------------------------------------------------------------------------
# pass@k and pass^k


def _comb_ratio(n: np.ndarray, c: np.ndarray, k: np.ndarray) -> np.ndarray:
    """C(n − c, k) / C(n, k) elementwise for flat arrays of valid (n, c, k), without overflow.

    The ratio is symmetric in c and k (both equal (n−c)!(n−k)! / (n!(n−c−k)!)), so it is the
    product of min(c, k) factors (n − t − max(c, k)) / (n − t), t = 0 … min(c, k) − 1: each
    factor is one correctly rounded division of exact integers, and the ragged products over
    all triples are taken at once with np.multiply.reduceat on a flat array, chunked so no
    temporary exceeds _CHUNK_ELEMENTS.
    """
    ratio = np.where(n - c < k, 0.0, 1.0)
    fewer, more = np.minimum(c, k), np.maximum(c, k)
    needs_product = np.flatnonzero((n - c >= k) & (c > 0))
    lengths = fewer[needs_product]
    ends = np.cumsum(lengths)
    start = 0
    while start < needs_product.size:
        before = ends[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, before + _CHUNK_ELEMENTS, "right")))
        rows, seg = needs_product[start:stop], lengths[start:stop]
        offsets = np.cumsum(seg) - seg
        t = np.arange(int(seg.sum())) - np.repeat(offsets, seg)
        denominator = np.repeat(n[rows], seg) - t
        factors = (denominator - np.repeat(more[rows], seg)) / denominator
        ratio[rows] = np.multiply.reduceat(factors, offsets)
        start = stop
    return ratio


def _comb_ratio_table(n: ArrayLike, c: ArrayLike, k: ArrayLike, estimator: str) -> np.ndarray:
    """Validate and return C(n − c, k) / C(n, k) shaped broadcast(n, c).shape + k.shape."""
    c, n = _check_successes(c, n)
    k = _whole_numbers("k", k)
    if k.size and k.min() < 1:
        raise ValueError(f"{estimator}: k must be at least 1, got k = {k.min()}")
    if k.size and n.size and k.max() > n.min():
        raise ValueError(
            f"{estimator}: k must not exceed n, the episodes per task; got k = {k.max()} "
            f"with n = {n.min()} for some task"
        )
    # Tasks share few (n, c) pairs (at most n + 1 per distinct n), so compute each pair once;
    # 0 <= c <= n makes n·(max n + 1) + c a unique integer key of the pair.
    base = int(n.max(initial=0)) + 1
    keys, task_to_pair = np.unique(n.ravel() * base + c.ravel(), return_inverse=True)
    pair_n, pair_c, pair_k = (
        grid.ravel()
        for grid in np.broadcast_arrays(keys[:, None] // base, keys[:, None] % base, k.ravel())
    )
    table = _comb_ratio(pair_n, pair_c, pair_k).reshape(keys.size, k.size)
    return table[task_to_pair].reshape(n.shape + k.shape)


def pass_at_k(n: ArrayLike, c: ArrayLike, k: ArrayLike) -> float | np.ndarray:
    """Unbiased pass@k per task: 1 − C(n − c, k) / C(n, k) (Chen et al. 2021, eq. 1).

    The probability that at least one of k episodes drawn without replacement from the n run
    passes, given c passed. Its expectation is exactly 1 − (1 − p)^k, whereas the plug-in
    1 − (1 − c/n)^k is biased low (n = 10, c = 3, k = 5: 0.9167 against 0.8319).

    Computed as a product of min(c, k) ratios of exact integers, never a binomial coefficient,
    so n = 10,000 neither overflows nor loses precision (relative error below min(c, k) ulps).

    n, c: per-task episode and success counts, scalars or arrays (per-task n may differ).
    k: scalar, or an array giving one column per k. Returns a float for scalar input, else an
    array of shape broadcast(n, c).shape + k.shape (tasks × k).
    Raises ValueError for k < 1, k > n, c outside [0, n] or non-integer input.
    """
    return _scalar_or_array(1.0 - _comb_ratio_table(n, c, k, "pass@k"))


def pass_hat_k(n: ArrayLike, c: ArrayLike, k: ArrayLike) -> float | np.ndarray:
    """Unbiased pass^k per task: C(c, k) / C(n, k) (Yao et al. 2024, τ-bench).

    The probability that all k episodes drawn without replacement from the n run pass; its
    expectation is p^k, a measure of reliability rather than of reach. Same arguments, shapes
    and errors as pass_at_k (C(c, k)/C(n, k) is C(n − c', k)/C(n, k) with c' = n − c).
    """
    c, n = _check_successes(c, n)
    return _scalar_or_array(_comb_ratio_table(n, n - c, k, "pass^k"))


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
    c, n = _check_successes(c, n)
    z = sps.norm.ppf(0.5 + _check_confidence(confidence) / 2)
    center = (c + z * z / 2) / (n + z * z)
    half_width = z / (n + z * z) * np.sqrt(c * (n - c) / n + z * z / 4)
    low = np.where(c == 0, 0.0, center - half_width)
    high = np.where(c == n, 1.0, center + half_width)
    return Interval(*(_scalar_or_array(x) for x in (c / n, low, high)), method="wilson")


def clopper_pearson_interval(c: ArrayLike, n: ArrayLike, confidence: float = 0.95) -> Interval:
    """Clopper-Pearson exact interval for a binomial proportion c/n (Clopper & Pearson 1934).

    Bounds are Beta quantiles: low = B⁻¹(α/2; c, n − c + 1) (0 at c = 0) and
    high = B⁻¹(1 − α/2; c + 1, n − c) (1 at c = n), the same interval as
    scipy.stats.binomtest(...).proportion_ci(method="exact") without its root search per
    task. Coverage is at least the nominal level for every p. Inputs broadcast.
    """
    c, n = _check_successes(c, n)
    tail = (1 - _check_confidence(confidence)) / 2
    # Beta(0, ·) is undefined; the placeholder shape 1 is discarded by np.where.
    low = np.where(c == 0, 0.0, sps.beta.ppf(tail, np.maximum(c, 1), n - c + 1))
    high = np.where(c == n, 1.0, sps.beta.ppf(1 - tail, c + 1, np.maximum(n - c, 1)))
    return Interval(*(_scalar_or_array(x) for x in (c / n, low, high)), method="clopper-pearson")


# --------------------------------------------------------------------------------------------
# Bootstrap over tasks


def _bootstrap_means(values: np.ndarray, n_boot: int, seed: int | None) -> tuple[np.ndarray, str]:
    """Means of n_boot resamples (with replacement, size N) of values, and the sampler used.

    A resample's mean depends only on how often each distinct value is drawn, and those counts
    follow Multinomial(N, share of each distinct value). When values take few distinct values
    (pass/fail, per-task rates c/n, paired differences of either) one multinomial draw per
    resample is therefore the exact bootstrap distribution at a fraction of the cost; for paired
    binary outcomes this is the multinomial over the four (A, B) cells, whose two concordant
    cells give the same difference 0. Otherwise indices are drawn. Either way resamples are
    drawn in chunks of at most _CHUNK_ELEMENTS numbers.
    """
    rng = np.random.default_rng(seed)
    n_units = values.size
    distinct, counts = np.unique(values, return_counts=True)
    if distinct.size <= n_units * _MULTINOMIAL_MAX_SHARE:
        shares = counts / n_units
        rows = max(1, _CHUNK_ELEMENTS // distinct.size)
        chunks = (
            rng.multinomial(n_units, shares, size=size) @ distinct / n_units
            for size in _chunk_sizes(n_boot, rows)
        )
        return np.concatenate(list(chunks)), "bootstrap-multinomial"
    rows = max(1, _CHUNK_ELEMENTS // n_units)
    chunks = (
        values[rng.integers(0, n_units, size=(size, n_units))].mean(axis=1)
        for size in _chunk_sizes(n_boot, rows)
    )
    return np.concatenate(list(chunks)), "bootstrap-indices"


def _constant_bounds(
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


def _check_resampling(n_boot: int, confidence: float) -> float:
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    return 1 - _check_confidence(confidence)


def task_bootstrap_ci(
    values: ArrayLike, confidence: float = 0.95, n_boot: int = 10_000, seed: int | None = 0
) -> Interval:
    """Percentile bootstrap interval for the mean over tasks (Efron & Tibshirani 1993, ch. 13).

    `values` holds one number per task (e.g. its pass rate c/n), tasks being the independent
    units (Miller 2024, clustered standard errors); resampling episodes instead ignores their
    correlation within a task and gives intervals too narrow. Tasks are resampled n_boot times
    with replacement (seeded, vectorized: see _bootstrap_means) and the α/2 and 1 − α/2
    quantiles of the resampled means are returned.

    When every value is equal the bootstrap has zero width; if the values lie in [0, 1] the
    exact Clopper-Pearson bound is returned instead (method "clopper-pearson": for all-pass
    tasks [(α/2)^(1/N), 1], for all-fail [0, 1 − (α/2)^(1/N)]), otherwise the zero-width
    interval with method "constant".
    """
    values = _finite_values("values", values)
    alpha = _check_resampling(n_boot, confidence)
    estimate = float(values.mean())
    if np.all(values == values[0]):
        support = (0.0, 1.0) if 0 <= values[0] <= 1 else None
        low, high, method = _constant_bounds(float(values[0]), values.size, support, confidence)
        return Interval(estimate, low, high, method)
    means, method = _bootstrap_means(values, n_boot, seed)
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
    values = _finite_values("values", values)
    _check_resampling(n_boot, 0.95)
    if np.all(values == values[0]):
        return 0.0
    means, _ = _bootstrap_means(values, n_boot, seed)
    return float(means.std(ddof=1))


def paired_bootstrap(
    a: ArrayLike,
    b: ArrayLike,
    confidence: float = 0.95,
    n_boot: int = 10_000,
    seed: int | None = 0,
) -> PairedBootstrap:
    """Mean paired difference a − b over tasks with its percentile bootstrap interval.

    a[i] and b[i] are the scores of versions A and B on the same task i (pass/fail or pass
    rate). Tasks are resampled as pairs, so the correlation between A and B on a task cancels
    in the difference (Miller 2024, paired differences; Efron & Tibshirani 1993, ch. 13).
    When the differences take few distinct values (binary outcomes beyond a few dozen tasks,
    pass rates over a few episodes) resampling is the exact multinomial over the outcome cells
    (see _bootstrap_means), orders of magnitude faster than drawing indices.

    When all differences are equal (e.g. A and B agree on every task) and a, b lie in [0, 1],
    the interval is [d − (d + 1)·u, d + (1 − d)·u] with u the Clopper-Pearson upper bound for
    0 of N tasks differing from the rest: [−u, u] when every task agrees.
    """
    a, b = _finite_values("a", a), _finite_values("b", b)
    if a.shape != b.shape:
        raise ValueError(f"a and b must pair up task by task; got {a.size} and {b.size} values")
    alpha = _check_resampling(n_boot, confidence)
    differences = a - b
    diff = float(differences.mean())
    if np.all(differences == differences[0]):
        in_unit_range = min(a.min(), b.min()) >= 0 and max(a.max(), b.max()) <= 1
        support = (-1.0, 1.0) if in_unit_range else None
        low, high, method = _constant_bounds(
            float(differences[0]), differences.size, support, confidence
        )
        return PairedBootstrap(diff, low, high, method)
    means, method = _bootstrap_means(differences, n_boot, seed)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return PairedBootstrap(diff, float(low), float(high), method)


# --------------------------------------------------------------------------------------------
# Paired test, clustering, power, reruns


def mcnemar_exact(b: int, c: int) -> McNemarResult:
    """Exact McNemar test on the discordant pairs, with its mid-p value.

    Under H0 (A and B equally good) each of the b + c discordant pairs favours either version
    with probability 1/2, so the p-value is the two-sided exact binomial test of b successes
    in b + c trials at p = 0.5 (McNemar 1947; scipy.stats.binomtest). The mid-p value
    2·P(X < m) + P(X = m), m = min(b, c), capped at 1, subtracts half the probability of the
    observed table and keeps close to nominal size while the exact test is conservative
    (Fagerland, Lydersen & Laake 2013). With no discordant pairs both are 1.
    """
    b_count, c_count = (int(x) for x in _whole_numbers("b, c", [b, c]))
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


def design_effect(counts: ArrayLike, n: ArrayLike) -> DesignEffect:
    """Moment (one-way ANOVA) estimates of between-task variance, ρ and the design effect.

    With N tasks, n_j episodes and c_j successes, p_j = c_j/n_j, p = Σc/Σn, M = Σn:
    MSB = Σ n_j(p_j − p)²/(N − 1), MSW = Σ n_j p_j(1 − p_j)/(M − N),
    n0 = (M − Σn_j²/M)/(N − 1), task_variance = (MSB − MSW)/n0 and
    ρ = (MSB − MSW)/(MSB + (n0 − 1)·MSW) (Ridout, Demétrio & Firth 1999, "ANOVA estimator").
    Negative estimates are truncated at 0. The design effect 1 + (Σn_j²/M − 1)·ρ, which is
    1 + (n − 1)ρ for equal n, is the factor by which treating episodes as independent
    understates the variance of the pass rate (Kish 1965; Miller 2024, clustered standard errors).

    Needs at least 2 tasks and more episodes than tasks. When every episode has the same
    outcome ρ is undefined: task_variance is 0 and rho and design_effect are NaN.
    """
    counts, n = _check_successes(counts, n)
    counts, n = counts.ravel(), n.ravel()
    n_tasks, episodes = counts.size, int(n.sum())
    if n_tasks < 2 or episodes <= n_tasks:
        raise ValueError(
            f"design_effect needs at least 2 tasks and more episodes than tasks; got {n_tasks} "
            f"tasks and {episodes} episodes"
        )
    rates = counts / n
    overall = counts.sum() / episodes
    between = np.sum(n * (rates - overall) ** 2) / (n_tasks - 1)
    within = np.sum(n * rates * (1 - rates)) / (episodes - n_tasks)
    size_weighted_n = float(np.sum(n.astype(float) ** 2)) / episodes
    n0 = (episodes - size_weighted_n) / (n_tasks - 1)
    task_variance = max(0.0, float((between - within) / n0))
    denominator = between + (n0 - 1) * within
    if denominator == 0:
        return DesignEffect(task_variance, math.nan, math.nan)
    rho = max(0.0, float((between - within) / denominator))
    return DesignEffect(task_variance, rho, 1 + (size_weighted_n - 1) * rho)


def _z_sum(alpha: float, power: float) -> float:
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must lie in (0, 1), got alpha={alpha}, power={power}")
    return float(sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power))


def required_tasks(sd: float, effect: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Tasks needed for a two-sided paired z-test to detect `effect` with the given power.

    N = ⌈((z₁₋α/₂ + z_power)·sd / effect)²⌉, sd the standard deviation of per-task paired
    differences (Miller 2024, power analysis; the normal approximation that ignores the
    far rejection tail). At least 1.
    """
    if not sd >= 0 or effect == 0 or not math.isfinite(effect):
        raise ValueError(f"need sd >= 0 and a finite non-zero effect, got sd={sd}, effect={effect}")
    exact = (_z_sum(alpha, power) * sd / abs(effect)) ** 2
    # Absorb float noise so an exact integer requirement is not rounded up to the next one.
    return max(1, math.ceil(exact - 1e-9))


def mde(sd: float, n_tasks: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable effect of a two-sided paired z-test: (z₁₋α/₂ + z_power)·sd/√N.

    sd is the standard deviation of per-task paired differences and N the number of tasks
    (Miller 2024, power analysis); the inverse of required_tasks.
    """
    if not sd >= 0 or n_tasks < 1:
        raise ValueError(f"need sd >= 0 and n_tasks >= 1, got sd={sd}, n_tasks={n_tasks}")
    return _z_sum(alpha, power) * sd / math.sqrt(n_tasks)


def noise_floor(run_scores: ArrayLike, confidence: float = 0.95) -> NoiseFloor:
    """Noise floor t(r − 1)·sd·√2 from r reruns of the same version.

    sd is the sample standard deviation of the r run scores; the difference of two independent
    runs has standard deviation sd·√2, and t₁₋α/₂ with r − 1 degrees of freedom accounts for sd
    being estimated (Madaan et al. 2024). A change smaller than this can be produced by
    rerunning an unchanged version. Needs r >= 2; warns at r = 2, where t(1) = 12.71 at 95%
    makes the floor very wide.
    """
    scores = _finite_values("run_scores", run_scores)
    n_runs = scores.size
    if n_runs < 2:
        raise ValueError(f"noise_floor needs at least 2 reruns, got {n_runs}")
    t_critical = float(sps.t.ppf(0.5 + _check_confidence(confidence) / 2, n_runs - 1))
    if n_runs == 2:
        warnings.warn(
            f"noise floor from only 2 reruns uses t(1) = {t_critical:.2f}; "
            "add reruns for a usable floor",
            UserWarning,
            stacklevel=2,
        )
    run_sd = float(scores.std(ddof=1))
    return NoiseFloor(t_critical * run_sd * math.sqrt(2), run_sd, n_runs, t_critical)


# --------------------------------------------------------------------------------------------
# Summary


def summarize_counts(
    counts: ArrayLike,
    n: ArrayLike,
    ks: ArrayLike | None = None,
    *,
    confidence: float = 0.95,
    n_boot: int = 10_000,
    seed: int | None = 0,
) -> CountsSummary:
    """Summary of one version's per-task success counts.

    pass@1 is the task average of c_j/n_j with its task-bootstrap interval (task_bootstrap_ci);
    pass@k and pass^k are task averages of the unbiased per-task estimators (pass_at_k,
    pass_hat_k) for k in ks, by default the powers of two up to the smallest n. Also counts the
    failure-capable tasks (not all-pass: the only ones that can show a difference), the
    all-fail tasks, and the design effect (None when it cannot be estimated: fewer than 2
    tasks or a single episode per task). DESIGN §5.
    """
    counts, n = _check_successes(counts, n)
    counts, n = counts.ravel(), n.ravel()
    if counts.size == 0:
        raise ValueError("summarize_counts needs at least one task")
    if ks is None:
        ks = 2 ** np.arange(int(n.min()).bit_length())
    ks = np.atleast_1d(_whole_numbers("ks", ks))
    at_k = pass_at_k(n, counts, ks).mean(axis=0)
    hat_k = pass_hat_k(n, counts, ks).mean(axis=0)
    clustering = design_effect(counts, n) if counts.size >= 2 and n.sum() > counts.size else None
    return CountsSummary(
        n_tasks=int(counts.size),
        pass_at_1=task_bootstrap_ci(counts / n, confidence, n_boot, seed),
        pass_at_k={int(k): float(v) for k, v in zip(ks, at_k, strict=True)},
        pass_hat_k={int(k): float(v) for k, v in zip(ks, hat_k, strict=True)},
        failure_capable=int(np.sum(counts < n)),
        all_fail=int(np.sum(counts == 0)),
        design_effect=clustering,
    )
