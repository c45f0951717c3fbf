"""The verdict when the server drifts in time, by hand:
`PYTHONPATH=. .venv/bin/python benchmarks/time_drift.py [--replications 1000]`.

Issue 38's time cells (tests/drifting_server.py says how they are drawn and decided): a random
walk of the server with the arms' runs turn about, at once or blocked, with and without a
reference checkpoint beside each arm; per-run shifts, per task-and-run shocks and an outage
under the default design; and the power a reference costs. Per cell: the claim by the
statistics alone, and the verdict, "better" and "worse".
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import numpy as np

from benchmarks.grid_cli import grid_arguments
from tests.drifting_server import Design, designs, replicate


def run(job: tuple[Design, int]) -> tuple[Design, dict[str, float]]:
    design, replications = job
    return design, replicate(design, replications)


def main() -> None:
    args = grid_arguments(__doc__)
    print("| N | cell | claim better | claim worse | verdict better | verdict worse |")
    print("|---|---|---|---|---|---|")
    with ProcessPoolExecutor(args.workers) as pool:
        for design, rates in pool.map(run, [(d, args.replications) for d in designs()]):
            print(f"| {design.tasks} | {design.name} | {rates['claim better']:.3f} | "
                  f"{rates['claim worse']:.3f} | {rates['better']:.3f} | "
                  f"{rates['worse']:.3f} |", flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
