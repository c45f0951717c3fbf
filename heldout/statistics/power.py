"""How much the tasks at hand can tell: the design effect of correlated episodes, the minimum
detectable effect and the tasks an effect needs, and the run-level drift that reruns measure
(with the seed's noise floor from them, as information).

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


# Fewer paired runs than this cost more power than they buy: the drift's critical value on
# R − 1 degrees of freedom (t = 12.7 at R = 2, 4.3 at R = 3) outweighs what pooling adds; at
# three runs of n = 8 a true +5 over 40 groups was found in 0.74 of runs against 0.80 for the
# first run alone (docs/statistics.md, "The cost of runs").
MIN_RUNS = 4


def too_few_runs(runs: int) -> str | None:
    """Why `runs` paired runs of each arm are refused (1 < runs < MIN_RUNS), or None."""
    if 1 < runs < MIN_RUNS:
        return (f"{runs} paired runs of each arm: the run-level drift would rest on "
                f"{runs - 1} degree(s) of freedom, whose critical value "
                f"(t = {float(sps.t.ppf(0.975, runs - 1)):.1f}) costs more power than the runs "
                f"buy; run each arm at least {MIN_RUNS} times, or once (no drift measured)")
    return None


@dataclass(frozen=True)
class Reruns:
    """R >= 2 runs of both arms on the same tasks, paired by their seeds: run r of the base and
    run r of the candidate drew the same seeds (heldout.episodes.seeds, rerun r; run 0 the
    arms' own episodes). base, candidate: each run's pass@1, in run order. samples_per_run:
    how the pooled rollouts number them (run r's samples are r·samples_per_run onward,
    heldout.statistics.counts.pool_runs), so that each task's rate in each run can be read
    back; None where only the runs' pass@1 were recorded. interleaved: whether the arms' runs
    interleaved in time, as the test stage recorded it from its episodes' clocks (its rollout
    files leave the clocks out), or None: the rows' own `started_at` say."""

    base: tuple[float, ...]
    candidate: tuple[float, ...]
    samples_per_run: int | None = None
    interleaved: bool | None = None


@dataclass(frozen=True)
class RunDrift:
    """How far the arms' difference moves from one run to the next.

    n_runs: R, the runs of each arm; run_sd: the sample sd of the R paired differences of
    pass@1 (candidate − base, run by run). The tasks are the same in every run, so that spread
    is what whole runs add (a server, a seed stream, a clock: a run-level drift) plus the
    episodes' own noise, never the tasks' sampling. The verdict compares the arms over all R
    runs pooled, and carries `variance` = run_sd²/R whole, on `df` = R − 1 degrees of
    freedom: a drift estimated net of the episodes' part is 0 in most samples when it is
    small, and then passes unseen. `noise` is that episode part, which the tasks' spread over
    the pooled runs also holds: the two-way (units × runs) residual mean square over G·R
    (heldout.statistics.power.run_drift). The verdict takes it out of the tasks' part, so that
    the episodes' noise is counted once (0 when the runs' per-task rates are unknown: it is
    then counted twice, which errs wide)."""

    n_runs: int
    run_sd: float
    noise: float = 0.0
    # The sample sd of the base's own R run-level pass@1: one configuration rerun, the spread
    # the seed's noise floor stood on (NoiseFloor); information, the verdict does not use it.
    # None where only the paired differences were recorded.
    base_run_sd: float | None = None

    @property
    def variance(self) -> float:
        return self.run_sd**2 / self.n_runs

    @property
    def df(self) -> int:
        return self.n_runs - 1


@dataclass(frozen=True)
class NoiseFloor:
    """The seed's noise floor (Madaan et al. 2024): t₁₋α/₂ on R − 1 degrees of freedom times
    the sd of one configuration's R run-level pass@1 times √2, the sd of the difference of two
    independent runs of it. A change smaller than `floor` is one that rerunning the base alone
    can make. Information beside the verdict, not a hurdle of it: the verdict carries the
    spread of the arms' paired differences run by run (RunDrift.run_sd), which is the drift
    that can move a comparison; a floor to clear on top counted the episodes' noise twice
    (docs/statistics.md, "The noise floor, as information")."""

    runs: int
    run_sd: float  # the base's runs' sample sd (RunDrift.base_run_sd)
    t: float
    floor: float


def noise_floor(drift: RunDrift, confidence: float) -> NoiseFloor | None:
    """The seed's floor from the reruns a RunDrift was measured from, or None where the base's
    own run scores were not kept (a RunDrift read back from before they were)."""
    if drift.base_run_sd is None:
        return None
    t = float(sps.t.ppf(0.5 + confidence / 2, drift.df))
    return NoiseFloor(drift.n_runs, drift.base_run_sd, t, t * drift.base_run_sd * math.sqrt(2))


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


def verdict_mde(sd: float, units: int, run_variance: float, critical: float,
                power: float = 0.8) -> float:
    """The effect the verdict finds with probability `power`: (c + z_power)·√(sd²/U + v).

    sd: of the per-unit differences over U tasks or groups; run_variance: v, what whole runs
    add to the difference (RunDrift.variance, 0 without reruns); critical: c, the test's
    critical value in standard errors (decision.critical_value)."""
    if not sd >= 0 or units < 1 or not run_variance >= 0:
        raise ValueError(f"need sd >= 0, units >= 1 and run_variance >= 0, got {sd}, {units}, "
                         f"{run_variance}")
    return (critical + float(sps.norm.ppf(power))) * math.sqrt(sd**2 / units + run_variance)


def required_units(effect: float, sd: float, run_variance: float, critical: float,
                   power: float = 0.8) -> int | None:
    """Tasks (or groups) at which verdict_mde reaches |effect|, or None when the runs' variance
    alone keeps it above: (c + z)²·v >= effect², and no number of tasks is enough (more runs
    are)."""
    if effect == 0 or not math.isfinite(effect) or not sd >= 0 or not run_variance >= 0:
        raise ValueError(f"need a finite non-zero effect, sd >= 0, run_variance >= 0; got "
                         f"{effect}, {sd}, {run_variance}")
    factor = (critical + float(sps.norm.ppf(power))) ** 2
    room = effect**2 - factor * run_variance
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


def run_drift(reruns: Reruns, run_differences: ArrayLike | None = None,
              groups: ArrayLike | None = None) -> RunDrift:
    """RunDrift from R >= 2 paired runs of both arms (Madaan et al. 2024 measure the runs'
    spread). Warns at R = 2, where the spread rests on one degree of freedom.

    run_differences: per run and task, candidate − base of the task's pass rate in that run,
    shape (R, N), or None; with `groups` (one label per task) the units are the groups, each
    weighted by its tasks, as the verdict's are. From it `noise`, the episodes' part of the
    pooled estimate's variance: with X[r, g] the units' differences run by run, m_g their
    means over runs, D_r the runs' task-weighted means and θ the grand mean, the residual
    mean square s² = Σ (X − m_g − D_r + θ)² / ((G − 1)(R − 1)) estimates the episodes'
    variance of one unit in one run (the units × runs interaction of a two-way random-effects
    design), and noise = s²·Σ w_g² / R, w_g the units' shares of the tasks."""
    base = finite_values("base run scores", reruns.base)
    candidate = finite_values("candidate run scores", reruns.candidate)
    if base.size != candidate.size:
        raise ValueError(f"reruns pair run by run: got {base.size} runs of the base and "
                         f"{candidate.size} of the candidate")
    if base.size < 2:
        raise ValueError(f"run-level drift needs at least 2 runs of each arm, got {base.size}")
    if base.size == 2:
        warnings.warn("run-level drift from only 2 runs rests on one degree of freedom; add "
                      "reruns", UserWarning, stacklevel=2)
    differences = candidate - base
    noise = 0.0 if run_differences is None else _episode_noise(
        np.asarray(run_differences, dtype=float), groups, base.size)
    # Rates subtracted in another order differ in the last bits: those are no spread.
    spread = 0.0 if np.ptp(differences) <= 1e-12 else float(differences.std(ddof=1))
    return RunDrift(int(base.size), spread, noise, float(base.std(ddof=1)))


def _episode_noise(run_differences: np.ndarray, groups: ArrayLike | None, runs: int) -> float:
    """noise of run_drift: the interaction mean square of units × runs, as the pooled mean's
    variance."""
    if run_differences.ndim != 2 or run_differences.shape[0] != runs:
        raise ValueError(f"run_differences: one row per run ({runs}) and one column per task, "
                         f"got shape {run_differences.shape}")
    if groups is None:
        shares, units = np.full(run_differences.shape[1], 1 / run_differences.shape[1]), \
            run_differences
    else:
        _, index = np.unique(np.asarray(groups), return_inverse=True)
        sizes = np.bincount(index)
        units = np.stack([np.bincount(index, row) for row in run_differences]) / sizes
        shares = sizes / sizes.sum()
    if units.shape[1] < 2:
        return 0.0
    unit_means = units.mean(axis=0)
    run_means = units @ shares
    residuals = units - unit_means[None, :] - run_means[:, None] + unit_means @ shares
    mean_square = float(np.sum(residuals**2)) / ((units.shape[1] - 1) * (runs - 1))
    return mean_square * float(np.sum(shares**2)) / runs
