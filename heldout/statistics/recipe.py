"""Recipe comparisons with the training seed as the unit (issue 42; 000 §17.4).

"Recipe B beats recipe A" is a claim about the distributions of checkpoints each recipe trains,
so its unit of replication is the training seed, not the task: two checkpoints on a thousand
tasks are still one draw of each recipe. Each arm is several seeds, each evaluated on the same
tasks; a seed's score is its task-average pass rate, and the verdict is Welch's t test of the
difference of the arms' mean seed scores. The task set is fixed and shared, so the pairing by
task enters only through the seed scores, and the claim is about these tasks: Welch's error
counts the seeds and the episodes, not the draw of the tasks. The paired-by-task standard
error and the tasks' correlation are reported beside it and decide nothing: they are the
draw of the tasks with the seeds held fixed, so they leave out the training noise.

The spread of the seed scores in an arm is training noise plus evaluation noise (the episodes
each seed was scored on). The evaluation part is estimated from the episodes themselves (two
or more per task: the duplicate evaluations), and the training part is the moment estimate
max(0, s² − evaluation), which is 0 whenever the episodes' noise alone could explain the spread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import RootModel, model_validator
from scipy import stats as sps

from heldout.statistics.rule import ALPHA, CONFIDENCE, POWER

# Two seeds give the between-seed variance one degree of freedom: an arm needs three just to
# estimate σ_seed (000 §17.4), and Welch's test on 2 + 2 seeds is all but powerless.
MIN_SEEDS = 3
BETTER, WORSE, NO_DIFFERENCE = "better", "worse", "no difference detected"
NO_SPREAD = ("not decidable: every seed of both arms scored the same, so the seeds' spread is "
             "unknown")
TEST_NAME = "Welch's t test over seeds"


def too_few_seeds(seeds: dict[str, int]) -> str | None:
    """Why arms of these many seeds (arm name -> seeds) are refused, or None."""
    short = [f"{name} has {count}" for name, count in seeds.items() if count < MIN_SEEDS]
    if not short:
        return None
    return (f"a recipe comparison needs at least {MIN_SEEDS} training seeds per arm, each "
            f"evaluated ({'; '.join(short)}): fewer cannot estimate the seeds' spread")


class RecipesConfig(RootModel[dict[str, list[str]]]):
    """`params.recipes`: none (empty), or two recipes, each the checkpoints of its training
    seeds, MIN_SEEDS or more, no checkpoint in both. The first listed is the baseline, as
    `heldout compare A1,A2,A3 B1,B2,B3` takes A first."""

    root: dict[str, list[str]] = {}

    @model_validator(mode="after")
    def _two_recipes_of_seeds(self) -> RecipesConfig:
        if not self.root:
            return self
        if len(self.root) != 2:
            raise ValueError(f"name two recipes (the baseline first), not {len(self.root)}: "
                             f"{', '.join(self.root) or 'none'}")
        refused = too_few_seeds({name: len(set(seeds)) for name, seeds in self.root.items()})
        if refused:
            raise ValueError(refused)
        shared = set.intersection(*map(set, self.root.values()))
        if shared:
            raise ValueError(f"{', '.join(sorted(shared))} is a seed of both recipes: a "
                             "checkpoint is trained by one recipe")
        return self

    @property
    def names(self) -> tuple[str, str] | None:
        """(baseline, candidate), or None when no recipes are named."""
        return tuple(self.root) if self.root else None  # type: ignore[return-value]

    def checkpoints(self) -> list[str]:
        return list(dict.fromkeys(seed for seeds in self.root.values() for seed in seeds))


@dataclass(frozen=True)
class SeedCounts:
    """One arm's evaluations: a row per training seed, a column per task (the same tasks in
    the same order in every row and in both arms), passes out of episodes."""

    passes: np.ndarray
    episodes: np.ndarray

    @property
    def rates(self) -> np.ndarray:
        return self.passes / self.episodes

    @property
    def scores(self) -> np.ndarray:
        """Each seed's pass@1: its task-average pass rate."""
        return self.rates.mean(axis=1)

    def evaluation_variances(self) -> np.ndarray | None:
        """Each seed's score's variance from its episodes alone: Σ_t p̂(1 − p̂)/(n_t − 1) / T²,
        unbiased for Σ_t p(1 − p)/n_t / T² (binomial episodes around each task's rate). None
        where a task ran one episode: one episode says nothing of its own noise."""
        if self.episodes.min() < 2:
            return None
        rates = self.rates
        per_task = rates * (1 - rates) / (self.episodes - 1)
        return per_task.sum(axis=1) / self.episodes.shape[1] ** 2


@dataclass(frozen=True)
class Decomposition:
    """An arm's seed scores' variance in parts: between_seeds, the sample variance s² of the
    seed scores; evaluation, the mean over its seeds of the episodes' variance of a score;
    training, max(0, s² − evaluation). None where the episodes cannot tell (one per task)."""

    between_seeds: float
    evaluation: float | None
    training: float | None


def decompose(arm: SeedCounts) -> Decomposition:
    between = float(np.var(arm.scores, ddof=1))
    evaluation = arm.evaluation_variances()
    if evaluation is None:
        return Decomposition(between, None, None)
    mean_evaluation = float(evaluation.mean())
    return Decomposition(between, mean_evaluation, max(0.0, between - mean_evaluation))


@dataclass(frozen=True)
class Sizing:
    """Seeds per arm for POWER at `effect` with Welch's test at ALPHA, at the pooled
    between-seed variance; None when the effect or the spread is 0. basis: "target" (the
    effect asked for) or "observed" (the difference measured)."""

    effect: float
    basis: str
    seeds_per_arm: int | None


def seeds_per_arm(variance: float, effect: float) -> int | None:
    """The least n with n ≥ 2·(t_{1−α/2} + t_{power})²·σ²/δ² on 2n − 2 degrees of freedom: the
    normal approximation's n, raised until Student's t on the seeds agrees (t > z, so never
    below it). The difference of two means of n seeds each has standard error √2·σ/√n."""
    if effect == 0 or variance <= 0:
        return None

    def needed(quantiles: tuple[float, float]) -> float:
        return 2 * sum(quantiles) ** 2 * variance / effect**2

    seeds = max(MIN_SEEDS, math.ceil(needed((sps.norm.ppf(1 - ALPHA / 2),
                                               sps.norm.ppf(POWER)))))
    # A float df: an observed difference near 0 asks for more seeds than a C integer holds.
    while seeds < needed((sps.t.ppf(1 - ALPHA / 2, 2.0 * seeds - 2),
                          sps.t.ppf(POWER, 2.0 * seeds - 2))):
        seeds += 1
    return seeds


@dataclass(frozen=True)
class RecipeComparison:
    """The verdict over seeds and what stands beside it. difference, low, high, p_value, df
    and se are Welch's (candidate − base; se is the unpaired standard error over the seed
    scores, the one the verdict uses). paired_se: the standard error of the same difference
    from the per-task differences of the arms' seed-averaged rates; unpaired_task_se: the
    same tasks ignoring the pairing; task_correlation: the arms' per-task rates' correlation
    (None when either is constant)."""

    base: SeedCounts
    candidate: SeedCounts
    verdict: str
    difference: float
    low: float
    high: float
    p_value: float
    df: float
    se: float
    variance: tuple[Decomposition, Decomposition]
    paired_se: float
    unpaired_task_se: float
    task_correlation: float | None
    sizing: Sizing


def _verdict(p_value: float, low: float, high: float) -> str:
    # For Welch's test p < α exactly when its interval excludes 0; both are asked, as the
    # checkpoint verdict asks both of its test and interval.
    if p_value < ALPHA and low > 0:
        return BETTER
    if p_value < ALPHA and high < 0:
        return WORSE
    return NO_DIFFERENCE


def _task_pairing(base: SeedCounts, candidate: SeedCounts) -> tuple[float, float, float | None]:
    by_task = base.rates.mean(axis=0), candidate.rates.mean(axis=0)
    tasks = by_task[0].size
    paired = float(np.std(by_task[1] - by_task[0], ddof=1) / math.sqrt(tasks))
    unpaired = math.sqrt(sum(float(np.var(rates, ddof=1)) for rates in by_task) / tasks)
    constant = min(float(np.ptp(rates)) for rates in by_task) == 0
    correlation = None if constant else float(np.corrcoef(*by_task)[0, 1])
    return paired, unpaired, correlation


def compare_recipes(base: SeedCounts, candidate: SeedCounts,
                    target_effect: float | None = None) -> RecipeComparison:
    """Recipe `candidate` against recipe `base`, each MIN_SEEDS or more seeds on the same
    tasks (the caller refuses fewer: too_few_seeds)."""
    scores = base.scores, candidate.scores
    difference = float(scores[1].mean() - scores[0].mean())
    se = math.sqrt(sum(float(np.var(s, ddof=1)) / s.size for s in scores))
    if se == 0:
        verdict, low, high, p_value, df = NO_SPREAD, difference, difference, math.nan, math.nan
    else:
        welch = sps.ttest_ind(scores[1], scores[0], equal_var=False)
        interval = welch.confidence_interval(CONFIDENCE)
        low, high = float(interval.low), float(interval.high)
        p_value, df = float(welch.pvalue), float(welch.df)
        verdict = _verdict(p_value, low, high)
    pooled = float(sum((s.size - 1) * np.var(s, ddof=1) for s in scores)
                   / (scores[0].size + scores[1].size - 2))
    effect = abs(difference) if target_effect is None else target_effect
    sizing = Sizing(effect, "observed" if target_effect is None else "target",
                    seeds_per_arm(pooled, effect))
    return RecipeComparison(base, candidate, verdict, difference, low, high, p_value, df, se,
                            (decompose(base), decompose(candidate)),
                            *_task_pairing(base, candidate), sizing)
