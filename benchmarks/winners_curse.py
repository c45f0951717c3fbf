"""The winner's curse of a val pick against its two estimates, by simulation (issue 41 item 4).

Run by hand: PYTHONPATH=. .venv/bin/python benchmarks/winners_curse.py [--replications R]
(400 by default: about half a minute on one core).

Each replication draws a val set of 100 tasks for m checkpoints whose true pass rates are
known, picks the best on val, and compares how far the pick's val score sits above its true
rate (the inflation, averaged over replications, with its Monte Carlo standard error) with
what honest_selection estimates from that one val set: `inflation`, the bootstrap selection
bias, and `if_all_level`, σ·E[max of m Z]. Four cells: two and twelve level checkpoints with
independent pass/fail tasks (where σ·E[max of m Z] is the truth), two 10 points apart, and
twelve level checkpoints that share each task's difficulty (Beta(0.6, 0.6) per task, 10
episodes each: their errors move together). Last, the time of one honest_selection on 60 tasks
× 12 checkpoints (2,000 resamples, both rules).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from heldout.statistics.bca import mean_standard_error
from heldout.statistics.pick_stability import honest_selection

TASKS = 100


def independent(rates: list[float]) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.binomial(1, rates, size=(TASKS, len(rates))).astype(float)


def shared_difficulty(m: int) -> Callable[[np.random.Generator], np.ndarray]:
    def draw(rng: np.random.Generator) -> np.ndarray:
        difficulty = rng.beta(0.6, 0.6, size=TASKS)
        return rng.binomial(10, np.repeat(difficulty[:, None], m, axis=1)) / 10
    return draw


CELLS = {
    "2 level, independent": (independent([0.5, 0.5]), [0.5, 0.5]),
    "12 level, independent": (independent([0.5] * 12), [0.5] * 12),
    "2 apart (50% and 60%)": (independent([0.5, 0.6]), [0.5, 0.6]),
    "12 level, shared difficulty": (shared_difficulty(12), [0.5] * 12),
}


def one_cell(draw: Callable[[np.random.Generator], np.ndarray], truth: list[float],
             replications: int) -> tuple[float, float, float, float]:
    rng = np.random.default_rng(41)
    lifted, bootstrapped, level = [], [], []
    for replication in range(replications):
        values = draw(rng)
        chosen = int(np.argmax(values.mean(axis=0)))
        curse = honest_selection(
            values, labels=None, names=[f"c{j}" for j in range(len(truth))], rule="best",
            chosen=chosen, standard_error=mean_standard_error(values[:, chosen]),
            seed=replication)["winners_curse"]
        lifted.append(values[:, chosen].mean() - truth[chosen])
        bootstrapped.append(curse["inflation"])
        level.append(curse["if_all_level"])
    return (float(np.mean(lifted)), float(np.std(lifted) / np.sqrt(replications)),
            float(np.mean(bootstrapped)), float(np.mean(level)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=400)
    replications = parser.parse_args().replications
    print(f"{'cell':30} {'inflation':>16} {'bootstrap':>10} {'σ·E[max Z]':>11}  (points)")
    for name, (draw, truth) in CELLS.items():
        lifted, error, bootstrapped, level = one_cell(draw, truth, replications)
        print(f"{name:30} {100 * lifted:8.2f} ± {100 * error:4.2f} {100 * bootstrapped:10.2f} "
              f"{100 * level:11.2f}")
    values = np.random.default_rng(0).random((60, 12))
    started = time.perf_counter()
    for rule in ("best", "one_se"):
        honest_selection(values, labels=None, names=[f"c{j}" for j in range(12)], rule=rule,
                         chosen=0, standard_error=0.04, seed=0)
    print(f"60 tasks × 12 checkpoints, 2,000 resamples, best and one_se: "
          f"{1000 * (time.perf_counter() - started):.1f} ms")


if __name__ == "__main__":
    main()
