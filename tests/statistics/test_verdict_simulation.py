"""Seeded simulations of the verdict rule (issue 15): its false-positive rate under heterogeneous
nulls, the coverage of its difference interval, and the power of its deciding test against the
sample-0 McNemar test it replaced. All slow (by hand: pytest -m slow -s): 48 minutes on 2 cores
shared with a CI run, the N = 300 × n = 10 cells about a minute each; each test prints its
table of cells.

A cell draws REPLICATIONS evaluations of N tasks × n episodes and calls `decide` on each, as the
report does. Task pass probabilities p (base) and q (candidate) come from a Population whose
mean difference E[q − p] is known exactly (by quadrature, not by simulation), so the coverage is
that of the population mean difference, the quantity the verdict speaks of. Episodes share one
uniform per episode between the arms (common random numbers: pass = u < p) or draw their own.

The table's rates: "claim", decision.claim is better or worse (before the voiding gates, which
only lower it; under a null this is the false-positive rate); "test", the deciding permutation
test rejects; "McN s0", exact McNemar on the episode at sample 0 rejects; "old", the rule the
verdict replaced, the 95% percentile paired bootstrap excluding 0; "cov" and "cov old", the
share of intervals (decision.difference, paired_bootstrap) covering the population difference.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import integrate
from scipy import stats as sps

from heldout.statistics.decision import ALPHA, NO_DIFFERENCE, decide
from heldout.statistics.paired_tests import mcnemar_exact, paired_bootstrap

pytestmark = pytest.mark.slow

REPLICATIONS = 2_000
# α plus 2.6 Monte Carlo standard errors: a rule that holds its size exceeds it in ~0.5% of cells.
FPR_BOUND = ALPHA + 2.6 * math.sqrt(ALPHA * (1 - ALPHA) / REPLICATIONS)
MIN_COVERAGE = 0.93
TASKS = (30, 100, 300)
EPISODES = (1, 5, 10)
# (label, α, β): U-shaped, mostly failing with a few easy tasks, mostly passing with a few hard.
POPULATIONS = (("U Beta(.3,.3)", 0.3, 0.3), ("skew Beta(.5,3)", 0.5, 3.0),
               ("skew Beta(3,.5)", 3.0, 0.5))
SPREAD = 0.15  # each task moves this far up or down, clipped to [0, 1]
SHIFT = 0.075  # the alternative's population mean difference
FLIP_SHARE = 0.03
WORKERS = min(2, os.cpu_count() or 1)
RATES = ("claim", "test", "mcnemar", "old")


@dataclass(frozen=True)
class Population:
    """Tasks p ~ Beta(a, b); the candidate's q = clip(p ± spread), + with probability up_share.
    A share `flips` of the tasks instead fail always in the base and pass always in the
    candidate (p = 0, q = 1)."""

    a: float
    b: float
    spread: float
    up_share: float = 0.5
    flips: float = 0.0

    @classmethod
    def with_mean(cls, a: float, b: float, spread: float, mean: float) -> Population:
        """The population whose signs are weighted to give E[q − p] = mean exactly: clipping
        shortens the moves toward the nearer edge, so equal weights would not."""
        up, down = _moves(a, b, spread)
        share = (mean + down) / (up + down)
        if not 0 <= share <= 1:
            raise ValueError(f"no weighting of ±{spread} gives a mean difference of {mean}")
        return cls(a, b, spread, share)

    @property
    def truth(self) -> float:
        up, down = _moves(self.a, self.b, self.spread)
        moved = self.up_share * up - (1 - self.up_share) * down
        return (1 - self.flips) * moved + self.flips

    def draw(self, rng: np.random.Generator, shape: tuple[int, int]) -> tuple[np.ndarray, ...]:
        p = rng.beta(self.a, self.b, shape)
        signs = np.where(rng.random(shape) < self.up_share, 1.0, -1.0)
        q = np.clip(p + signs * self.spread, 0.0, 1.0)
        flipped = rng.random(shape) < self.flips
        return np.where(flipped, 0.0, p), np.where(flipped, 1.0, q)


def _moves(a: float, b: float, spread: float) -> tuple[float, float]:
    """E[min(spread, 1 − p)] and E[min(spread, p)], p ~ Beta(a, b): the mean move of a task
    sent up, and down. E[min(s, X)] = ∫₀ˢ P(X > x) dx."""
    up = integrate.quad(lambda x: sps.beta.sf(x, b, a), 0, spread, epsabs=1e-13)[0]
    down = integrate.quad(lambda x: sps.beta.sf(x, a, b), 0, spread, epsabs=1e-13)[0]
    return up, down


@dataclass(frozen=True)
class Cell:
    name: str
    population: Population
    crn: bool
    n_tasks: int
    episodes: int
    seed: int

    @property
    def label(self) -> str:
        design = "CRN" if self.crn else "indep"
        return f"{self.name:<16} {design:<5} {self.n_tasks:>4} {self.episodes:>3}"


def run_cell(cell: Cell) -> dict[str, float]:
    """Rejection and coverage rates of one cell, and how far the drawn tasks' mean difference
    lies from the population's, in standard errors (a check on the generator)."""
    population = cell.population
    rng = np.random.default_rng([cell.seed, round(100 * population.a), round(100 * population.b),
                                 cell.n_tasks, cell.episodes, cell.crn])
    shape = (REPLICATIONS, cell.n_tasks)
    p, q = population.draw(rng, shape)
    uniforms = rng.random((*shape, cell.episodes))
    base = uniforms < p[..., None]
    candidate = (uniforms if cell.crn else rng.random(uniforms.shape)) < q[..., None]
    base_rates, candidate_rates = base.mean(axis=-1), candidate.mean(axis=-1)
    truth = population.truth
    tallies = dict.fromkeys((*RATES, "cov", "cov old"), 0)
    for i, seed in enumerate(rng.integers(2**32, size=REPLICATIONS).tolist()):
        at_sample = base[i, :, 0], candidate[i, :, 0]
        decision = decide(base_rates[i], candidate_rates[i], n_episodes=cell.episodes,
                          base_passed=at_sample[0], candidate_passed=at_sample[1], seed=seed)
        old = paired_bootstrap(candidate_rates[i], base_rates[i], seed=seed)
        mcnemar = mcnemar_exact(int(np.sum(at_sample[0] & ~at_sample[1])),
                                int(np.sum(~at_sample[0] & at_sample[1])))
        new = decision.difference
        tallies["claim"] += decision.claim != NO_DIFFERENCE
        tallies["test"] += decision.test.rejects
        tallies["mcnemar"] += mcnemar.pvalue <= ALPHA
        tallies["old"] += old.low > 0 or old.high < 0
        tallies["cov"] += new.low <= truth <= new.high
        tallies["cov old"] += old.low <= truth <= old.high
    rates = {key: count / REPLICATIONS for key, count in tallies.items()}
    differences = q - p
    rates["generator z"] = float((differences.mean() - truth)
                                 / (differences.std() / math.sqrt(differences.size)))
    return rates


def run_cells(cells: list[Cell]) -> dict[Cell, dict[str, float]]:
    # The largest cells first, so that neither worker is left with a big one at the end.
    ordered = sorted(cells, key=lambda cell: cell.n_tasks * (1 + cell.episodes), reverse=True)
    with ProcessPoolExecutor(max_workers=WORKERS) as pool:
        return dict(zip(ordered, pool.map(run_cell, ordered), strict=True))


def print_table(title: str, results: dict[Cell, dict[str, float]]) -> None:
    print(f"\n{title} ({REPLICATIONS:,} replications per cell; Monte Carlo SE at 0.05: "
          f"{math.sqrt(0.05 * 0.95 / REPLICATIONS):.4f})")
    print(f"{'population':<16} {'draws':<5} {'N':>4} {'n':>3}  {'claim':>6} {'test':>6} "
          f"{'McN s0':>6} {'old':>6}  {'cov':>6} {'cov old':>7}")
    for cell in sorted(results, key=lambda c: (c.name, not c.crn, c.n_tasks, c.episodes)):
        r = results[cell]
        print(f"{cell.label}  {r['claim']:6.4f} {r['test']:6.4f} {r['mcnemar']:6.4f} "
              f"{r['old']:6.4f}  {r['cov']:6.4f} {r['cov old']:7.4f}")


def grid(name: str, population: Population, seed: int, *, tasks=TASKS,
         episodes=EPISODES, designs=(True, False)) -> list[Cell]:
    return [Cell(name, population, crn, n_tasks, n, seed)
            for crn in designs for n_tasks in tasks for n in episodes]


def shortfalls(results: dict[Cell, dict[str, float]], max_claim: float | None = None
               ) -> list[str]:
    """Every cell's failures at once, so that one short cell does not hide another."""
    failures = []
    for cell, rates in results.items():
        if max_claim is not None and rates["claim"] > max_claim:
            failures.append(f"{cell.label}: false-positive rate {rates['claim']:.4f} > "
                            f"{max_claim:.4f}")
        if rates["cov"] < MIN_COVERAGE:
            failures.append(f"{cell.label}: coverage {rates['cov']:.4f} < {MIN_COVERAGE}")
        if abs(rates["generator z"]) > 5:
            failures.append(f"{cell.label}: the drawn tasks' mean difference is "
                            f"{rates['generator z']:.1f} SE from the population's")
    return failures


@pytest.mark.parametrize(("name", "a", "b"), POPULATIONS)
def test_verdict_holds_its_size_under_heterogeneous_nulls(name, a, b):
    population = Population.with_mean(a, b, SPREAD, 0.0)
    results = run_cells(grid(name, population, seed=1500))
    print_table(f"Null: tasks move ±{SPREAD}, population mean difference 0", results)
    assert shortfalls(results, max_claim=FPR_BOUND) == []


@pytest.mark.parametrize(("name", "a", "b"), POPULATIONS)
def test_interval_covers_a_shifted_alternative(name, a, b):
    population = Population.with_mean(a, b, SPREAD, SHIFT)
    results = run_cells(grid(name, population, seed=1501))
    print_table(f"Alternative: tasks move ±{SPREAD}, population mean difference {SHIFT}",
                results)
    assert shortfalls(results) == []


def test_interval_covers_rare_one_way_flips():
    # Every other task is the same task in both arms: with shared uniforms, the same outcomes.
    population = Population(1.0, 1.0, spread=0.0, flips=FLIP_SHARE)
    results = run_cells(grid("flips 3%", population, seed=1502, designs=(True,)))
    print_table(f"Rare one-way flips: {FLIP_SHARE:.0%} of tasks fail→pass in the candidate only, "
                f"the rest identical; difference {FLIP_SHARE}", results)
    assert shortfalls(results) == []


def test_deciding_test_outpowers_sample_zero_mcnemar():
    population = Population(1.0, 1.0, spread=0.1, up_share=1.0)
    results = run_cells(grid("Beta(1,1) +0.1", population, seed=1503, tasks=(100,)))
    print_table(f"Power: every task +0.1 (clipped), difference {population.truth:.4f}", results)
    assert shortfalls(results) == []
    weaker = [f"{cell.label}: test {rates['test']:.4f} < McNemar at sample 0 {rates['mcnemar']:.4f}"
              for cell, rates in results.items()
              if cell.episodes > 1 and rates["test"] < rates["mcnemar"]]
    assert not weaker, "\n".join(weaker)
