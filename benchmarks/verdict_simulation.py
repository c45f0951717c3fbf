"""The verdict under uneven effects, by hand:
`PYTHONPATH=. .venv/bin/python benchmarks/verdict_simulation.py`.

Each cell draws replications of N tasks × n episodes from tests/skewed_nulls.py (a narrowing
null: many tasks gain a little, a few lose a lot, mean difference exactly 0; or a power cell:
every task +5 points, clipped) and decides each with heldout.statistics.decision.decide, the
entry point of the pipeline's report and of `heldout compare`. Beside it, on the same draws,
the rule it replaced: the sign-flip permutation test and the hull of the BCa and t intervals.
Prints, per cell, the shares called "better" (claim, before the voiding gates; then the
verdict, after them) and the interval's coverage of the population difference.
"""

from __future__ import annotations

import argparse
import math
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from heldout.statistics.bca import difference_interval
from heldout.statistics.paired_tests import paired_permutation_test
from tests.skewed_nulls import Cell, Narrowing

POPULATIONS = {
    "U Beta(.3,.3), 10% lose 80%": Narrowing(0.3, 0.3, 0.10, 0.8),
    "skew Beta(.4,3), 10% lose 80%": Narrowing(0.4, 3.0, 0.10, 0.8),
    "ceiling Beta(5,.4), 5% lose 50%": Narrowing(5.0, 0.4, 0.05, 0.5),
    "uniform Beta(1,1), 20% lose 60%": Narrowing(1.0, 1.0, 0.20, 0.6),
}
POWER = {"uniform Beta(1,1), +5": Narrowing(1.0, 1.0, 0.0, 0.0),
         "U Beta(.3,.3), +5": Narrowing(0.3, 0.3, 0.0, 0.0)}
# The same model in both arms, each run shifted on the logit scale by N(0, τ²).
RUNS = 4  # paired runs of each arm, as params.reruns.runs
IDENTICAL = Narrowing(1.0, 1.0, 0.0, 0.0)
CEILING = Narrowing(5.0, 0.4, 0.0, 0.0)


def old_rule(cell: Cell) -> tuple[float, float]:
    """Share called better, and coverage of 0, by the replaced rule on the cell's draws."""
    (base, *_), (candidate, *_) = cell.draws()  # the replaced rule saw the first runs
    better = covers = 0
    for i in range(cell.replications):
        rates = base[i].mean(axis=-1), candidate[i].mean(axis=-1)
        test = paired_permutation_test(rates[1], rates[0], seed=i)
        interval = difference_interval(rates[1] - rates[0], seed=i)
        better += test.rejects and interval.low > 0
        covers += interval.low <= 0 <= interval.high
    return better / cell.replications, covers / cell.replications


def run(job: tuple[str, Cell]) -> tuple[str, Cell, dict[str, float], tuple[float, float]]:
    name, cell = job
    return name, cell, cell.rates(), old_rule(cell)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", type=int, nargs="+", default=[30, 50, 100, 164])
    parser.add_argument("--episodes", type=int, nargs="+", default=[5, 10])
    parser.add_argument("--cells", nargs="+", default=["nulls", "power", "drift", "harm"],
                        choices=["nulls", "power", "drift", "harm"])
    args = parser.parse_args()
    jobs = {"nulls": [(name, Cell(population, n_tasks, n, crn, args.replications))
                      for name, population in POPULATIONS.items()
                      for n_tasks in args.tasks for n in args.episodes for crn in (True, False)],
            "power": [(name + (f", {runs} paired runs" if runs else ""),
                       Cell(population, 164, 10, crn, args.replications, shift=0.05,
                            reruns=runs))
                      for name, population in POWER.items() for crn in (True, False)
                      for runs in (0, RUNS)],
            "drift": [(f"identical, drift τ = {tau}" + (f", {runs} paired runs" if runs else ""),
                       Cell(IDENTICAL, 164, 10, crn, args.replications, drift=tau,
                            reruns=runs))
                      for tau in (0.1, 0.3) for crn in (True, False) for runs in (0, RUNS)],
            # A true −5-point regression on a near-ceiling set: the gates void gains there,
            # and must never hide this.
            "harm": [("ceiling Beta(5,.4), −5", Cell(CEILING, 164, n, crn, args.replications,
                                                     shift=-0.05))
                     for n in (1, 10) for crn in (True, False)]}
    jobs = [job for kind in args.cells for job in jobs[kind]]
    se = math.sqrt(0.025 * 0.975 / args.replications)
    print(f"{args.replications:,} replications a cell; one-sided bound 0.025 + 2.6·SE = "
          f"{0.025 + 2.6 * se:.4f}")
    print(f"{'population':<33} {'N':>4} {'n':>3} {'draws':<5}  {'better':>7} {'worse':>7} "
          f"{'v.better':>8} {'v.worse':>7} "
          f"{'cover':>6}  {'old better':>10} {'old cover':>9}")
    with ProcessPoolExecutor(args.workers) as pool:
        for name, cell, rates, (old_better, old_covers) in pool.map(run, jobs):
            cover = f"{rates['covers']:6.3f}" if cell.truth is not None else f"{'-':>6}"
            old_cover = f"{old_covers:9.3f}" if cell.truth is not None else f"{'-':>9}"
            print(f"{name:<33} {cell.n_tasks:>4} {cell.episodes:>3} "
                  f"{'CRN' if cell.crn else 'indep':<5}  {rates['better']:7.4f} "
                  f"{rates['worse']:7.4f} "
                  f"{rates['verdict better']:8.4f} {rates['verdict worse']:7.4f} {cover}  "
                  f"{old_better:10.4f} {old_cover}",
                  flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
