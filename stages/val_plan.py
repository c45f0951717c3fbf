"""The selected candidate against the base on the validation split, decided by the verdict's
own rule, for the test stage's plan (heldout.custody.spend): read from the val scores."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from heldout.statistics.decision import Decision, decide
from heldout.tasks.sources import load_tasks
from stages.catalog import PER_TASK, split_file
from stages.common import eval_view


def val_plan(root: Path, candidate: str, base: str) -> Decision:
    """decide() on the two checkpoints' val per-task counts, with the val tasks' groups."""
    counts = pd.read_parquet(root / PER_TASK)
    arms = [counts[counts["checkpoint"] == name].set_index("task_id").sort_index()
            for name in (base, candidate)]
    shared = arms[0].index.intersection(arms[1].index)
    base_counts, candidate_counts = (arm.loc[shared] for arm in arms)
    groups = {task.id: task.group for task in
              eval_view(root, "val", load_tasks(root / split_file("val")))}
    rates = [arm["c"].to_numpy() / arm["n"].to_numpy() for arm in (base_counts, candidate_counts)]
    return decide(rates[0], rates[1],
                  n_episodes=pd.concat([base_counts["n"], candidate_counts["n"]], axis=1)
                  .min(axis=1).to_numpy(),
                  base_passed=rates[0] == 1, candidate_passed=rates[1] == 1,
                  groups=[groups.get(task, task) for task in shared])
