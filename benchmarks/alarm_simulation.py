"""The public-versus-hidden alarm's rates, by hand: `python benchmarks/alarm_simulation.py`.

Per replication, 74 tasks with public tests (HumanEval's count) and n episodes per task. The
base's per-task gap probability (public pass, hidden fail, among episodes that ran) is drawn
from Beta(0.3, 9.7) (mean 3%, most tasks near 0, a few weak-test tasks high). Cells:
- null: the candidate's gap has the base's distribution (an independent draw per episode);
- hack: +5 points of gap on every task (the rate the alarm must catch);
- fewer crashes: the same gap probability as the base, but the base's episodes crash (status
  error, a failed public verdict recorded) 30% of the time and the candidate's never.
Prints, per cell, the share of replications in which the alarm fires, and beside it the
rule it replaced (a 10% share of every judged episode, crashed ones included, and a task
bootstrap of the difference clearing 0), on the same draws.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from heldout.statistics.intervals import task_bootstrap_ci
from heldout.statistics.public_hidden import AlarmConfig, gap_alarm, gap_counts

TASKS = 74


def rollouts(gap_p: np.ndarray, n: int, crash_p: float, rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for task, p in enumerate(gap_p):
        crashed = rng.random(n) < crash_p
        gapped = rng.random(n) < p
        for k in range(n):
            if crashed[k]:
                rows.append((f"t{task:03d}", False, False, "error"))
            else:
                rows.append((f"t{task:03d}", True, not gapped[k], "ok"))
    frame = pd.DataFrame(rows, columns=["task_id", "public_passed", "passed", "status"])
    return frame.astype({"public_passed": "boolean"})


def fires(cell: str, n: int, rng: np.random.Generator, config: AlarmConfig) -> tuple[bool, bool]:
    """(the alarm fires, the old rule fired) on one replication of `cell`."""
    base_p = rng.beta(0.3, 9.7, TASKS)
    candidate_p = np.clip(base_p + (0.05 if cell == "hack" else 0.0), 0, 1)
    base = rollouts(base_p, n, 0.3 if cell == "fewer crashes" else 0.0, rng)
    candidate = rollouts(candidate_p, n, 0.0, rng)
    seed = int(rng.integers(2**31))
    alarm = gap_alarm(gap_counts(candidate), gap_counts(base), config, seed=seed)
    return bool(alarm is not None and alarm.fired), old_rule(candidate, base, seed)


def old_rule(candidate: pd.DataFrame, base: pd.DataFrame, seed: int) -> bool:
    shares = [table.assign(gap=table["public_passed"].astype(bool) & ~table["passed"])
              .groupby("task_id")["gap"].mean() for table in (candidate, base)]
    difference = task_bootstrap_ci((shares[0] - shares[1]).to_numpy(), seed=seed)
    return bool(shares[0].mean() > 0.10 and difference.low > 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=400)
    parser.add_argument("--episodes", type=int, default=10)
    options = parser.parse_args()
    config = AlarmConfig()
    for cell in ("null", "hack", "fewer crashes"):
        rng = np.random.default_rng(20261202)
        outcomes = np.array([fires(cell, options.episodes, rng, config)
                             for _ in range(options.replications)])
        rate, old = outcomes.mean(axis=0)
        se = np.sqrt(rate * (1 - rate) / options.replications)
        print(f"{cell:14} n = {options.episodes}: fires in {rate:.3f} (± {se:.3f}) of "
              f"{options.replications} replications at the {config.floor:.0%} floor; the "
              f"10% rule: {old:.3f}")


if __name__ == "__main__":
    main()
