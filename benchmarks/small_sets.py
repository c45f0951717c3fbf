"""The verdict on small sets, by hand: `PYTHONPATH=. .venv/bin/python benchmarks/small_sets.py`.

Issue 38's grid below 100 tasks or groups: nulls of every shape the audit named (many small
gains with rare large losses, and by symmetry its mirror, the "worse" column; a 3% cliff;
a symmetric spread) at 30-60 tasks and 40 groups of 4, and the power cells (+5 over 40
groups of 4, −10 over 40 tasks), all with four paired runs of n = 10 decided by
heldout.statistics.decision.decide as the pipeline decides. Per cell: the verdict's
"better" and "worse", the interval's coverage of the population difference where it is
known, and the mean minimum detectable effect the verdict shows. Then, for the MDE to be the
verdict's own, each MDE cell is run again at a true mean difference equal to the MDE it
showed (the power cells' sets are uniform, where a shift s cut at 1 moves the mean by
s − s²/2: the shift is 1 − √(1 − 2·MDE)).
"""

from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from benchmarks.grid_cli import grid_arguments
from tests.skewed_nulls import Cell, Narrowing

NULLS = {
    "U Beta(.3,.3), 10% lose 80%": Narrowing(0.3, 0.3, 0.10, 0.8),
    "skew Beta(.4,3), 10% lose 80%": Narrowing(0.4, 3.0, 0.10, 0.8),
    "ceiling Beta(5,.4), 5% lose 50%": Narrowing(5.0, 0.4, 0.05, 0.5),
    "uniform, 20% lose 60%": Narrowing(1.0, 1.0, 0.20, 0.6),
    "uniform, 3% cliff (lose all)": Narrowing(1.0, 1.0, 0.03, 1.0),
}
UNIFORM = Narrowing(1.0, 1.0, 0.0, 0.0)
SIZES = ((30, 1), (40, 1), (60, 1), (160, 4))  # (tasks, group size): 30-60 units


def cells(replications: int) -> list[tuple[str, Cell]]:
    found = [(f"{name}, {n_tasks // size} {'groups of 4' if size > 1 else 'tasks'}",
              Cell(population, n_tasks, 10, False, replications, reruns=4, group_size=size))
             for name, population in NULLS.items() for n_tasks, size in SIZES]
    found += [("symmetric ±30%, 40 tasks", Cell(UNIFORM, 40, 10, False, replications,
                                                reruns=4, swing=0.3)),
              ("+5, 40 groups of 4", Cell(UNIFORM, 160, 10, False, replications, shift=0.05,
                                          reruns=4, group_size=4)),
              ("−10, 40 tasks", Cell(UNIFORM, 40, 10, False, replications, shift=-0.10,
                                     reruns=4)),
              ("+5, 60 tasks", Cell(UNIFORM, 60, 10, False, replications, shift=0.05,
                                    reruns=4)),
              # Above 100 units, for the MDE the bootstrap-t decides with.
              ("+2, 164 tasks", Cell(UNIFORM, 164, 10, False, replications, shift=0.02,
                                     reruns=4))]
    return found


def run(job: tuple[str, Cell]) -> tuple[str, Cell, dict[str, float]]:
    name, cell = job
    return name, cell, cell.rates(compare=False)


def main() -> None:
    args = grid_arguments(__doc__, ', coverage 0.93')
    print("| cell | better | worse | coverage | MDE shown |")
    print("|---|---|---|---|---|")
    mdes = {}
    with ProcessPoolExecutor(args.workers) as pool:
        for name, cell, rates in pool.map(run, cells(args.replications)):
            cover = f"{rates['covers']:.3f}" if cell.truth is not None else "-"
            print(f"| {name} | {rates['verdict better']:.3f} | {rates['verdict worse']:.3f} | "
                  f"{cover} | {100 * rates['mde']:.1f} |", flush=True)
            if cell.shift:
                mdes[name] = (cell, rates["mde"])
        print("\n| at the MDE shown | true difference | found |")
        print("|---|---|---|")
        again = [(name, Cell(cell.population, cell.n_tasks, cell.episodes, cell.crn,
                             cell.replications,
                             shift=math.copysign(1 - math.sqrt(1 - 2 * mde), cell.shift),
                             reruns=cell.reruns, group_size=cell.group_size))
                 for name, (cell, mde) in mdes.items()]
        for name, cell, rates in pool.map(run, again):
            side = "verdict better" if cell.shift > 0 else "verdict worse"
            mean = math.copysign(abs(cell.shift) - cell.shift**2 / 2, cell.shift)
            print(f"| {name} | {100 * mean:+.1f} | {rates[side]:.3f} |", flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
