"""How much the tasks at hand can tell: the design effect of correlated episodes, the minimum
detectable effect and the tasks an effect needs, and the noise floor of reruns.

Sources: Ridout, Demétrio & Firth 1999, Biometrics 55:137-148 (ANOVA estimate of ρ for binary
data); Kish 1965, "Survey Sampling" (design effect); Miller 2024, arXiv:2411.00640 (clustered
standard errors, power analysis); Madaan et al. 2024, "Quantifying Variance in Evaluation
Benchmarks", arXiv:2406.10229.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from heldout.statistics._arrays import check_confidence, check_successes, finite_values


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
    counts, n = check_successes(counts, n)
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
    scores = finite_values("run_scores", run_scores)
    n_runs = scores.size
    if n_runs < 2:
        raise ValueError(f"noise_floor needs at least 2 reruns, got {n_runs}")
    t_critical = float(sps.t.ppf(0.5 + check_confidence(confidence) / 2, n_runs - 1))
    if n_runs == 2:
        warnings.warn(
            f"noise floor from only 2 reruns uses t(1) = {t_critical:.2f}; "
            "add reruns for a usable floor",
            UserWarning,
            stacklevel=2,
        )
    run_sd = float(scores.std(ddof=1))
    return NoiseFloor(t_critical * run_sd * math.sqrt(2), run_sd, n_runs, t_critical)
