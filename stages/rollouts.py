"""Stage `rollouts` (one per checkpoint): the val split → data/rollouts/val/<checkpoint>.parquet."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from heldout.episodes.chunks import ChunkExecutor
from heldout.episodes.harness import Harness
from heldout.episodes.rollout import RolloutsConfig, roll_out
from heldout.episodes.rows import STATUSES, rollout_table
from heldout.files import staged_outputs
from heldout.tasks.sources import load_tasks
from stages.catalog import rollout_file, split_file
from stages.common import (
    checkpoint_settings,
    eval_view,
    log_split_input,
    project_root,
    protocol_tags,
    read_manifest,
    read_params,
    section,
    tracked_stage,
)
from stages.progress import EpisodeProgress, speed_metrics
from stages.traces import TracingConfig, log_episode_traces


def run(
    checkpoint: str, root: Path | None = None, execute: ChunkExecutor | None = None
) -> dict[str, Any]:
    root = project_root(root)
    params = read_params(root)
    harness = section(params, "harness", Harness)
    config = section(params, "rollouts", RolloutsConfig)
    tracing = section(params, "tracing", TracingConfig)
    settings = checkpoint_settings(params, checkpoint)
    manifest = read_manifest(root)
    with tracked_stage(root, params, f"rollouts:{checkpoint}", "rollouts") as mlflow_run:
        mlflow_run.set_tags(
            protocol_tags(manifest)
            | {"checkpoint": checkpoint, "harness": harness.fingerprint(),
               "agent": settings.get("agent")}
        )
        tasks = eval_view(root, "val", load_tasks(root / split_file("val")))
        started = time.perf_counter()
        progress = EpisodeProgress(checkpoint)
        speed_metrics()  # what came before this rollout is not its own
        rows = roll_out(root, checkpoint, settings, tasks, harness, config, progress, execute)
        speed = speed_metrics()
        table = rollout_table(checkpoint, rows)
        target = root / rollout_file(checkpoint)
        with staged_outputs() as outputs:
            table.to_parquet(outputs.path(target), index=False)

        counts = table["status"].value_counts()
        summary = {
            "episodes": len(table),
            "tasks": table["task_id"].nunique(),
            "episode_pass_rate": float(table["passed"].mean()),
            "resumed": progress.cached,
            "episodes_per_s": progress.rate(),
            "episodes_s": progress.elapsed(),
            "wall_s": time.perf_counter() - started,
            **{f"status_{status}": int(counts.get(status, 0)) for status in STATUSES},
            **speed,
        }
        mlflow_run.log_params({"checkpoint": checkpoint, "harness.n": harness.n,
                               **{f"agent.{k}": v for k, v in settings.items()}})
        mlflow_run.log_metrics(summary)
        mlflow_run.log_artifact(target, "rollouts")
        log_split_input(mlflow_run, root, manifest, "val", tasks)
        # Built from the rows (resumed episodes included), on this thread, after the file is
        # written: a reviewer reads them in this run's Traces tab. Never on the test split.
        traced = log_episode_traces(mlflow_run, root, table, tasks, harness, tracing, "val")
        mlflow_run.log_metrics(traced)
    return summary | traced

