"""The selected candidate against the base on the validation split, decided by the verdict's
own rule, for the test stage's plan (heldout.custody.spend) and `heldout plan`'s foresight of
it: read from the val scores."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from heldout.custody.spend import SpendPlan
from heldout.errors import StageError
from heldout.statistics.decision import Decision, decide
from heldout.tasks.sources import load_tasks
from stages.access_inputs import AccessInputs
from stages.catalog import PER_TASK, split_file
from stages.common import eval_view


def val_plan(root: Path, candidate: str, base: str) -> Decision:
    """decide() on the two checkpoints' val per-task counts, with the val tasks' groups."""
    counts = pd.read_parquet(root / PER_TASK)
    arms = [counts[counts["checkpoint"] == name].set_index("task_id").sort_index()
            for name in (base, candidate)]
    for name, arm in zip((base, candidate), arms, strict=True):
        if arm.empty:
            raise StageError(f"the val scores hold no episode of {name}: run the score stage "
                             "(dvc repro) before the plan can judge the test access")
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


def spend_plan(root: Path, inputs: AccessInputs) -> SpendPlan:
    """The plan the test stage judges its access by: its arms on val, and the test tasks it
    would open (the split's, less those decontamination excluded)."""
    names = inputs.names
    return SpendPlan(val_plan(root, names["candidate"], names["base"]),
                     inputs.manifest["counts"]["test"] - len(inputs.excluded))
