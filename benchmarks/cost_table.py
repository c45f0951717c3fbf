"""The cost of runs, by hand: `PYTHONPATH=. .venv/bin/python benchmarks/cost_table.py`.

Which R paired runs of n episodes per task each the test access should run: for each design,
the verdict's power at +2 points (uniform set, 164 tasks) and at +5 points (40 groups of 4),
and its false "better" under a run-level drift (the same model in both arms, each run's logit
shifted by N(0, 0.3²)), all decided by heldout.statistics.decision.decide as the pipeline
decides (every run pooled, their spread carried, the episodes' noise counted once). Test
episodes per task are 2·R·n (both arms); the table is written into docs/statistics.md.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from tests.skewed_nulls import Cell, Narrowing

UNIFORM = Narrowing(1.0, 1.0, 0.0, 0.0)
DESIGNS = ((4, 10), (8, 5), (4, 6), (6, 4), (8, 3), (12, 2))


def cells(runs: int, episodes: int, replications: int) -> dict[str, tuple[Cell, str]]:
    return {
        "+2, 164 tasks": (Cell(UNIFORM, 164, episodes, False, replications, shift=0.02,
                               reruns=runs), "better"),
        "+5, 40 groups of 4": (Cell(UNIFORM, 160, episodes, False, replications, shift=0.05,
                                    reruns=runs, group_size=4), "better"),
        "−10, 40 tasks": (Cell(UNIFORM, 40, episodes, False, replications, shift=-0.10,
                               reruns=runs), "worse"),
        "drift 0.3, indep": (Cell(UNIFORM, 164, episodes, False, replications, drift=0.3,
                                  reruns=runs), "better"),
        "drift 0.3, CRN": (Cell(UNIFORM, 164, episodes, True, replications, drift=0.3,
                                reruns=runs), "better"),
    }


def run(job: tuple[int, int, str, int]) -> tuple[int, int, str, float]:
    runs, episodes, name, replications = job
    cell, side = cells(runs, episodes, replications)[name]
    return runs, episodes, name, cell.rates(compare=False)[f"verdict {side}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    names = list(cells(4, 10, 1))
    jobs = [(runs, n, name, args.replications) for runs, n in DESIGNS for name in names]
    results: dict[tuple[int, int], dict[str, float]] = {}
    with ProcessPoolExecutor(args.workers) as pool:
        for runs, n, name, rate in pool.map(run, jobs):
            results.setdefault((runs, n), {})[name] = rate
    print(f"{args.replications:,} replications a cell")
    print("| R × n | test episodes per task | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for (runs, n), rates in results.items():
        print(f"| {runs} × {n} | {2 * runs * n} | "
              + " | ".join(f"{rates[name]:.3f}" for name in names) + " |")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
