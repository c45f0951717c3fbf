"""Recipe comparisons with the seed as the unit (heldout.statistics.recipe, issue 42): the
variance in parts on a case small enough to do by hand, seeds per arm against the textbook's,
the refusal below three seeds, and recipe nulls simulated (benchmarks/recipe_simulation.py
runs the larger grid whose figures docs/statistics.md quotes)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from heldout.statistics.recipe import (
    BETTER,
    NO_DIFFERENCE,
    NO_SPREAD,
    SeedCounts,
    compare_recipes,
    decompose,
    seeds_per_arm,
    too_few_seeds,
)
from heldout.statistics.rule import ALPHA

# Two tasks, four episodes each, three seeds per arm: passes per (seed, task).
BASE = SeedCounts(np.array([[2, 4], [1, 3], [3, 3]], float), np.full((3, 2), 4.0))
CANDIDATE = SeedCounts(np.array([[4, 4], [2, 2], [4, 2]], float), np.full((3, 2), 4.0))


def test_the_variance_in_parts_matches_the_hand_computation():
    # Base: rates (.5, 1), (.25, .75), (.75, .75); scores .75, .5, .75, mean 2/3;
    # s² = (1/12² + 1/6² + 1/12²)/2 = 1/48.
    # Evaluation per seed, Σ_t p(1 − p)/(n − 1) / T² with n − 1 = 3, T² = 4:
    # (.25/3)/4 = 1/48, (2·.1875/3)/4 = 1/32, 1/32; their mean 1/36 > 1/48, so training is 0:
    # the episodes alone explain the spread (the moment estimate is cut at 0).
    base = decompose(BASE)
    assert base.between_seeds == pytest.approx(1 / 48)
    assert base.evaluation == pytest.approx(1 / 36)
    assert base.training == 0
    # Candidate: rates (1, 1), (.5, .5), (1, .5); scores 1, .5, .75, mean .75; s² = 1/16.
    # Evaluation: 0, (2·.25/3)/4 = 1/24, (.25/3)/4 = 1/48; mean 1/48; training 1/16 − 1/48 = 1/24.
    candidate = decompose(CANDIDATE)
    assert candidate.between_seeds == pytest.approx(1 / 16)
    assert candidate.evaluation == pytest.approx(1 / 48)
    assert candidate.training == pytest.approx(1 / 24)


def test_the_welch_verdict_and_the_task_errors_beside_it_match_the_hand_computation():
    found = compare_recipes(BASE, CANDIDATE)
    # Difference .75 − 2/3 = 1/12; SE √(1/48/3 + 1/16/3) = √(4/144) = 1/6; t = 0.5.
    # Welch's df: (1/36)² / ((1/144)²/2 + (1/48)²/2) = 16/5.
    assert found.difference == pytest.approx(1 / 12)
    assert found.se == pytest.approx(1 / 6)
    assert found.df == pytest.approx(3.2)
    assert found.verdict == NO_DIFFERENCE and found.p_value > 0.6
    assert found.low < 0 < found.high
    # Seed-averaged rates per task: base (.5, 5/6), candidate (5/6, 2/3); differences
    # (1/3, −1/6): sd √(2·.25²) = .3536, over √2 tasks = .25. Unpaired by task:
    # √((1/18 + 1/72)/2) = √5/12. Two tasks moving opposite ways: correlation −1.
    assert found.paired_se == pytest.approx(0.25)
    assert found.unpaired_task_se == pytest.approx(math.sqrt(5) / 12)
    assert found.task_correlation == pytest.approx(-1)


def test_one_episode_per_task_leaves_the_parts_unknown_but_still_decides():
    one = SeedCounts(np.array([[1, 0], [0, 0], [1, 1]], float), np.ones((3, 2)))
    parts = decompose(one)
    assert parts.between_seeds > 0 and parts.evaluation is None and parts.training is None
    assert compare_recipes(one, CANDIDATE).verdict == NO_DIFFERENCE


def test_seeds_that_never_vary_are_not_decidable():
    same = SeedCounts(np.full((3, 2), 2.0), np.full((3, 2), 4.0))
    assert compare_recipes(same, same).verdict == NO_SPREAD


@pytest.mark.parametrize(("effect", "textbook"), [(1.0, 17), (0.5, 64)])
def test_seeds_per_arm_are_the_two_sample_t_tests(effect: float, textbook: int):
    # Cohen's d = 1 needs 17 per group and d = 0.5 needs 64 at 80% power, two-sided α = 0.05
    # (G*Power's two-sample t test); the normal approximation alone says 16 and 63.
    assert seeds_per_arm(1.0, effect) == textbook
    assert seeds_per_arm(0.0, effect) is None and seeds_per_arm(1.0, 0.0) is None


def test_fewer_than_three_seeds_are_refused_by_name():
    assert too_few_seeds({"A": 3, "B": 3}) is None
    refused = too_few_seeds({"A": 2, "B": 3})
    assert refused is not None and "at least 3 training seeds per arm" in refused
    assert "A has 2" in refused and "B has" not in refused


TASKS, EPISODES = 100, 10
TASK_BY_SEED = 0.05  # a seed also moves each task a little its own way


@dataclass(frozen=True)
class RecipeNull:
    """Two equal recipes on one shared task set (rates ~ Beta(2, 2)): each seed shifts every
    task's rate by N(0, seed_sd) and each task by N(0, TASK_BY_SEED) more, clipped to [0, 1];
    episodes are binomial. The arms are exchangeable, so the true difference is exactly 0
    (`shift` moves the candidate's every rate for a power cell)."""

    seed_sd: float
    seeds: int = 3
    shift: float = 0.0

    def arm(self, rng: np.random.Generator, rates: np.ndarray, shift: float) -> SeedCounts:
        moved = (rates + shift + rng.normal(0, self.seed_sd, (self.seeds, 1))
                 + rng.normal(0, TASK_BY_SEED, (self.seeds, rates.size)))
        passes = rng.binomial(EPISODES, np.clip(moved, 0, 1))
        return SeedCounts(passes.astype(float), np.full(passes.shape, float(EPISODES)))

    def draw(self, rng: np.random.Generator) -> tuple[SeedCounts, SeedCounts]:
        rates = rng.beta(2, 2, TASKS)
        return self.arm(rng, rates, 0.0), self.arm(rng, rates, self.shift)


def simulate(cell: RecipeNull, replications: int, seed: int) -> dict[str, float]:
    """The shares of "better" and of intervals covering 0 (the true difference of a null),
    and the mean unclipped training-variance estimate (between − evaluation)."""
    rng = np.random.default_rng(seed)
    better = covered = 0
    net = []
    for _ in range(replications):
        base, candidate = cell.draw(rng)
        found = compare_recipes(base, candidate)
        better += found.verdict == BETTER
        covered += found.low <= cell.shift <= found.high
        net += [parts.between_seeds - parts.evaluation for parts in found.variance]
    return {"better": better / replications, "coverage": covered / replications,
            "training_net": float(np.mean(net))}


REPLICATIONS = 2_000
ONE_SIDED = ALPHA / 2  # "better" is one tail of the two-sided test


@pytest.mark.parametrize("seed_sd", [0.02, 0.05])
def test_equal_recipes_say_better_at_most_at_the_level_and_cover_zero(seed_sd: float):
    found = simulate(RecipeNull(seed_sd), REPLICATIONS, seed=42)
    bound = ONE_SIDED + 2.6 * math.sqrt(ONE_SIDED * (1 - ONE_SIDED) / REPLICATIONS)
    assert found["better"] <= bound
    assert found["coverage"] >= 0.93
    # The seeds' true training variance is seed_sd² plus the task-by-seed part's share of a
    # task average, TASK_BY_SEED²/TASKS; the episodes' noise (about 0.0002 here) is out of
    # the estimate before its cut at 0, or it would be 10-50% too high.
    truth = seed_sd**2 + TASK_BY_SEED**2 / TASKS
    assert found["training_net"] == pytest.approx(truth, rel=0.1)
