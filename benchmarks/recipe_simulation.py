"""Recipe nulls and power, by hand: `PYTHONPATH=. .venv/bin/python benchmarks/recipe_simulation.py`.

`heldout compare A1,A2,A3 B1,B2,B3` (heldout.statistics.recipe) on simulated recipes: 100
tasks × 10 episodes, each seed shifting every task by N(0, seed_sd) and each task by
N(0, 0.05) more (tests/statistics/test_recipe.py's RecipeNull, which the test runs at 2,000
replications). Per cell: "better" and "worse" shares, the 95% interval's coverage of the true
difference, the mean training variance net of evaluation noise before its cut at 0 against its
true value. docs/statistics.md quotes the table.
"""

from __future__ import annotations

import argparse

import numpy as np

from heldout.statistics.recipe import BETTER, WORSE, compare_recipes
from tests.statistics.test_recipe import TASK_BY_SEED, TASKS, RecipeNull

REPLICATIONS = 20_000
CELLS = [RecipeNull(sd, seeds) for sd in (0.02, 0.035, 0.05) for seeds in (3, 5)] + [
    RecipeNull(sd, seeds, shift=0.05) for sd in (0.02, 0.05) for seeds in (3, 5)]


def run(cell: RecipeNull, replications: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    better = worse = covered = 0
    net = []
    for _ in range(replications):
        found = compare_recipes(*cell.draw(rng))
        better += found.verdict == BETTER
        worse += found.verdict == WORSE
        covered += found.low <= cell.shift <= found.high
        net += [parts.between_seeds - parts.evaluation for parts in found.variance]
    truth = cell.seed_sd**2 + TASK_BY_SEED**2 / TASKS
    return (f"| {cell.seed_sd:.3f} | {cell.seeds} | {100 * cell.shift:+.0f} | "
            f"{better / replications:.4f} | {worse / replications:.4f} | "
            f"{covered / replications:.4f} | {np.mean(net):.6f} | {truth:.6f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=REPLICATIONS,
                        help=f"replications a cell (default {REPLICATIONS:,})")
    replications = parser.parse_args().replications
    print("| seed sd | seeds | shift (points) | better | worse | coverage | training, net "
          "(mean) | training, true |")
    print("|---|---|---|---|---|---|---|---|")
    for index, cell in enumerate(CELLS):
        print(run(cell, replications, seed=1000 + index), flush=True)


if __name__ == "__main__":
    main()
