"""How much the tasks at hand can tell: the design effect of correlated episodes, the minimum
detectable effect and the tasks an effect needs, and the run-level drift that reruns measure.

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

from heldout.statistics._arrays import check_successes, finite_values


@dataclass(frozen=True)
class DesignEffect:
    """Between-task variance of the true pass rate, intra-task correlation ρ, 1 + (n − 1)ρ."""

    task_variance: float
    rho: float
    design_effect: float


@dataclass(frozen=True)
class Reruns:
    """R >= 2 runs of one unchanged version on the same tasks under new seeds.

    scores: each run's pass@1. episode_variance: the variance of one run's pass@1 that the
    sampling of its episodes alone gives (episode_variance below)."""

    scores: tuple[float, ...]
    episode_variance: float


@dataclass(frozen=True)
class RunDrift:
    """How far whole runs of one version move beyond what their episodes explain.

    run_sd: the sample sd of the R runs' pass@1; episode_sd: the sd one run's pass@1 has from
    its episodes alone; tau: √max(0, run_sd² − episode_sd²), the sd of a run-level shift (a
    server, a seed stream, a clock) that moves every task of a run together. The paired test
    holds the episode part already; tau is what it cannot see."""

    n_runs: int
    run_sd: float
    episode_sd: float
    tau: float


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


def verdict_mde(sd: float, units: int, tau: float, critical: float,
                power: float = 0.8) -> float:
    """The effect the verdict finds with probability `power`: (c + z_power)·√(sd²/U + 2τ²).

    sd: of the per-unit differences over U tasks or groups; tau: the run-level drift, which
    each arm's single run carries (hence 2τ²); critical: c, the test's critical value in
    standard errors (z₁₋α/₂ for the bootstrap-t, √(2 log(2/α)) where the betting interval
    decides, which is 1.39 times wider at α = 0.05)."""
    if not sd >= 0 or units < 1 or not tau >= 0:
        raise ValueError(f"need sd >= 0, units >= 1 and tau >= 0, got {sd}, {units}, {tau}")
    return (critical + float(sps.norm.ppf(power))) * math.sqrt(sd**2 / units + 2 * tau**2)


def required_units(effect: float, sd: float, tau: float, critical: float,
                   power: float = 0.8) -> int | None:
    """Tasks (or groups) at which verdict_mde reaches |effect|, or None when the drift alone
    keeps it above: (c + z)²·2τ² >= effect², and no number of tasks is enough."""
    if effect == 0 or not math.isfinite(effect) or not sd >= 0 or not tau >= 0:
        raise ValueError(f"need a finite non-zero effect, sd >= 0, tau >= 0; got {effect}, "
                         f"{sd}, {tau}")
    factor = (critical + float(sps.norm.ppf(power))) ** 2
    room = effect**2 - factor * 2 * tau**2
    if room <= 0:
        return None
    return max(1, math.ceil(factor * sd**2 / room - 1e-9))


def mde(sd: float, n_tasks: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable effect of a two-sided paired z-test: (z₁₋α/₂ + z_power)·sd/√N.

    sd is the standard deviation of per-task paired differences and N the number of tasks
    (Miller 2024, power analysis); the inverse of required_tasks.
    """
    if not sd >= 0 or n_tasks < 1:
        raise ValueError(f"need sd >= 0 and n_tasks >= 1, got sd={sd}, n_tasks={n_tasks}")
    return _z_sum(alpha, power) * sd / math.sqrt(n_tasks)


def episode_variance(passes: ArrayLike, episodes: ArrayLike, runs: int) -> float:
    """Variance of one run's pass@1 from episode sampling alone, from R runs pooled.

    passes, episodes: per task, passes and episodes over all R runs together (m_i = R·n_i);
    a run's rate on task i has variance p_i(1 − p_i)/n_i, estimated without bias by
    p̂(1 − p̂)·m_i/(m_i − 1)/n_i, and pass@1, the mean of N such rates, has Σ of them / N².
    """
    passes, episodes = check_successes(passes, episodes)
    if runs < 2 or np.any(episodes < runs):
        raise ValueError(f"episode_variance needs >= 2 runs of >= 1 episode per task; got "
                         f"{runs} runs and as few as {int(episodes.min())} episodes")
    rates = passes / episodes
    per_run = episodes / runs
    per_task = rates * (1 - rates) * episodes / (episodes - 1) / per_run
    return float(per_task.sum() / per_task.size**2)


def run_drift(reruns: Reruns) -> RunDrift:
    """The run-level drift of RunDrift from R >= 2 runs (Madaan et al. 2024 measure the runs'
    spread; the episode part is subtracted so that the paired test does not count it twice).
    Warns at R = 2, where the spread rests on one degree of freedom."""
    scores = finite_values("run scores", reruns.scores)
    if scores.size < 2:
        raise ValueError(f"run-level drift needs at least 2 runs, got {scores.size}")
    if scores.size == 2:
        warnings.warn("run-level drift from only 2 runs rests on one degree of freedom; add "
                      "reruns", UserWarning, stacklevel=2)
    if not reruns.episode_variance >= 0:
        raise ValueError(f"episode variance must be >= 0, got {reruns.episode_variance}")
    run_sd = float(scores.std(ddof=1))
    tau = math.sqrt(max(0.0, run_sd**2 - reruns.episode_variance))
    return RunDrift(int(scores.size), run_sd, math.sqrt(reruns.episode_variance), tau)
