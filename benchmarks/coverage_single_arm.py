"""Coverage of one arm's pass@1 interval at N = 30 tasks, by simulation (issue 15).

Run by hand: .venv/bin/python benchmarks/coverage_single_arm.py [replications] (2,000 by
default: a few minutes on 2 cores).

Each replication draws 30 task pass probabilities from a Beta population, n episodes per task
(n = 1, 5, 10), and asks whether each interval covers the population mean α/(α + β), the pass
rate the arm would have on the population the tasks were drawn from. Three intervals:

- percentile: task_bootstrap_ci, the percentile task bootstrap the report used before;
- BCa: bca_interval over tasks;
- arm: arm_interval (Wilson/Clopper-Pearson for binary tasks, else BCa pulled toward the
  Wilson bound near an edge), the interval this file calibrates (its EDGE_UNITS).

Skewed populations are where the issue found the task bootstrap short (0.908): most tasks
almost never pass and a few carry the mean, so 30 tasks often miss them. The printed Monte
Carlo standard error of a coverage near 0.95 is √(0.95·0.05/R), 0.005 at R = 2,000.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from heldout.statistics import arm_interval, bca_interval, task_bootstrap_ci

N_TASKS = 30
EPISODES = (1, 5, 10)
# (α, β): four skewed towards 0, their mirror image, and two for the middle of the range.
POPULATIONS = ((0.1, 1.0), (0.3, 3.0), (0.5, 4.0), (1.0, 9.0), (3.0, 0.3), (0.4, 0.3), (2.0, 2.0))
METHODS = ("percentile", "BCa", "arm")


def one_cell(cell: tuple[float, float, int, int]) -> dict[str, tuple[float, float]]:
    """Coverage and mean width of each method for one population and n."""
    alpha, beta, episodes, replications = cell
    rng = np.random.default_rng([int(alpha * 100), int(beta * 100), episodes])
    truth = alpha / (alpha + beta)
    hits, widths = dict.fromkeys(METHODS, 0), dict.fromkeys(METHODS, 0.0)
    for _ in range(replications):
        rates = rng.binomial(episodes, rng.beta(alpha, beta, N_TASKS)) / episodes
        seed = int(rng.integers(2**32))
        intervals = {
            "percentile": task_bootstrap_ci(rates, seed=seed),
            "BCa": bca_interval(rates, seed=seed, support=(0.0, 1.0)),
            "arm": arm_interval(rates, n_episodes=episodes, seed=seed),
        }
        for name, interval in intervals.items():
            hits[name] += interval.low <= truth <= interval.high
            widths[name] += interval.high - interval.low
    return {name: (hits[name] / replications, widths[name] / replications) for name in METHODS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=2_000)
    replications = parser.parse_args().replications
    cells = [(alpha, beta, episodes, replications)
             for alpha, beta in POPULATIONS for episodes in EPISODES]
    with ProcessPoolExecutor() as pool:
        results = list(pool.map(one_cell, cells))
    print(f"N = {N_TASKS} tasks, {replications:,} replications per cell; "
          f"Monte Carlo SE at 0.95: {np.sqrt(0.95 * 0.05 / replications):.4f}")
    print("population        n  " + "  ".join(f"{name:>16}" for name in METHODS)
          + "   (coverage / mean width)")
    for (alpha, beta, episodes, _), result in zip(cells, results, strict=True):
        row = "  ".join(f"{result[name][0]:.3f} / {result[name][1]:.3f}   " for name in METHODS)
        print(f"{f'Beta({alpha:g}, {beta:g})':<16} {episodes:>2}  {row}")
    worst = min(result["arm"][0] for result in results)
    print(f"lowest coverage of arm_interval: {worst:.3f}")


if __name__ == "__main__":
    main()
