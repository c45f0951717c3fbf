"""params.recipes on the test split, inside the one access (issue 42, item 1): every training
seed of both recipes runs on the test tasks under the pinned harness (its n, its seeds: the
seeds share common random numbers, as the arms do), so the recipe verdict is drawn from the
access that drew the checkpoint verdict, never from a second opening.

What leaves the access is what the recipe verdict needs and no text: each seed's passes and
episodes per task, in access.json's `recipes`; the episodes themselves are sealed with the
arms' (data/test/episodes.sealed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from heldout.episodes.chunks import ChunkExecutor
from heldout.episodes.harness import Harness
from heldout.episodes.rollout import RolloutJob, RolloutsConfig, roll_outs
from heldout.episodes.rows import rollout_table
from heldout.statistics.counts import per_task_counts
from heldout.statistics.recipe import RecipesConfig
from heldout.tasks.record import Task
from stages.progress import EpisodeProgress


def recipe_job(name: str, settings: dict[str, Any], harness: Harness) -> RolloutJob:
    return RolloutJob(f"test:recipe:{name}", settings, harness)


def evaluate_recipes(root: Path, tasks: list[Task], recipes: RecipesConfig,
                     settings: dict[str, dict[str, Any]], harness: Harness,
                     config: RolloutsConfig, execute: ChunkExecutor | None, sealing_key: bytes
                     ) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """access.json's `recipes` record and each seed's episodes (to be sealed and digested),
    keyed `recipe:<checkpoint>`, apart from the arms' `base` and `candidate`."""
    seeds = recipes.checkpoints()
    progress = EpisodeProgress(f"test: the recipes' {len(seeds)} seeds "
                               f"({' against '.join(recipes.root)})")
    rows = roll_outs(root, [recipe_job(name, settings[name], harness) for name in seeds],
                     tasks, config, progress, execute, sealing_key=sealing_key)
    # Labelled apart from the arms' rows in the sealed episodes: the base may be a seed too.
    tables = {name: rollout_table(f"recipe:{name}", its_rows)
              for name, its_rows in zip(seeds, rows, strict=True)}
    record = {"baseline": recipes.names[0], "candidate": recipes.names[1],
              "seeds": dict(recipes.root), "counts": {name: seed_counts(table)
                                                      for name, table in tables.items()}}
    return record, {f"recipe:{name}": table for name, table in tables.items()}


def seed_counts(table: pd.DataFrame) -> dict[str, dict[str, int]]:
    """One seed's passes and episodes by task id."""
    counts = per_task_counts(table).set_index("task_id")
    return {"passes": {str(task): int(c) for task, c in counts["c"].items()},
            "episodes": {str(task): int(n) for task, n in counts["n"].items()}}


def recipe_episodes(recipes: RecipesConfig, harness: Harness, test_tasks: int) -> int:
    """The episodes the access spends on the recipes (for `heldout plan`)."""
    return len(recipes.checkpoints()) * test_tasks * harness.n
