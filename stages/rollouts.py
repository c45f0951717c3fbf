"""Stage `rollouts` (one per checkpoint): the val split → data/rollouts/val/<checkpoint>.parquet."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from heldout.agents.protocol import AgentContext
from heldout.agents.registry import make_agent
from heldout.canonical import content_digest
from heldout.episodes.cache import EpisodeCache
from heldout.episodes.chunks import (
    ChunkExecutor,
    EpisodeWork,
    close_idle_runners,
    collect_rollouts,
    in_threads,
)
from heldout.episodes.episode import episode_key_for, plan_episodes, rollout_table
from heldout.episodes.harness import Harness
from heldout.errors import ParamsError
from heldout.files import staged_outputs
from heldout.tasks.record import Task
from heldout.tasks.sources import load_tasks
from stages.common import (
    eval_view,
    log_split_input,
    project_root,
    protocol_tags,
    read_manifest,
    read_params,
    section,
    split_file,
    tracked_stage,
)
from stages.progress import EpisodeProgress

ROLLOUT_DIR = Path("data/rollouts/val")


class RolloutsConfig(BaseModel):
    """`params.rollouts`: how episodes are executed (not part of the harness fingerprint)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    concurrency: int = Field(default=4, ge=1, description="chunks in flight at once (threads)")
    chunk_episodes: int = Field(
        default=20, ge=1,
        description="episodes per mapped task: the unit of scheduling and of resume",
    )
    cache: str = Field(default=".heldout/episodes.sqlite", description="resume store")


def checkpoint_settings(params: dict[str, Any], name: str) -> dict[str, Any]:
    checkpoints = params.get("checkpoints") or {}
    if name not in checkpoints:
        raise ParamsError(
            f"params.yaml: checkpoints.{name}: no such checkpoint; the checkpoints are "
            f"{', '.join(checkpoints) or 'none'}"
        )
    settings = checkpoints[name]
    if not isinstance(settings, dict):
        raise ParamsError(f"params.yaml: checkpoints.{name}: expected a mapping with 'agent'")
    return settings


def agent_context(harness: Harness, root: Path) -> AgentContext:
    return AgentContext(
        template=harness.template, temperature=harness.temperature, top_p=harness.top_p,
        max_tokens=harness.max_tokens, max_turns=harness.max_turns,
        timeout_s=harness.agent_timeout_s, project_root=str(root),
    )


def roll_out(
    root: Path, label: str, settings: dict[str, Any], tasks: list[Task], harness: Harness,
    config: RolloutsConfig, execute: ChunkExecutor | None = None,
) -> tuple[list[dict], EpisodeProgress]:
    """Every episode of one agent on these tasks, resumed from the cache where it can be, the
    rest run in chunks by `execute` (default: rollouts.concurrency threads of this process)."""
    work = EpisodeWork(label, settings, agent_context(harness, root), harness)
    make_agent(label, settings, work.context)  # bad settings fail here, before any chunk ships
    episodes = plan_episodes(tasks, harness)
    cache = EpisodeCache(root / config.cache)
    try:
        with EpisodeProgress(label, len(episodes)) as progress:
            rows = collect_rollouts(
                work,
                episodes,
                execute or in_threads(config.concurrency),
                cache,
                episode_key_for(harness, content_digest(settings)),
                config.chunk_episodes,
                progress.advance,
            )
    finally:
        cache.close()
        close_idle_runners()
    return rows, progress


def run(
    checkpoint: str, root: Path | None = None, execute: ChunkExecutor | None = None
) -> dict[str, Any]:
    root = project_root(root)
    params = read_params(root)
    harness = section(params, "harness", Harness)
    config = section(params, "rollouts", RolloutsConfig)
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
        rows, progress = roll_out(root, checkpoint, settings, tasks, harness, config, execute)
        table = rollout_table(checkpoint, rows)
        target = root / ROLLOUT_DIR / f"{checkpoint}.parquet"
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
            **{f"status_{status}": int(counts.get(status, 0)) for status in
               ("ok", "error", "timeout", "truncated", "refused")},
        }
        mlflow_run.log_params({"checkpoint": checkpoint, "harness.n": harness.n,
                               **{f"agent.{k}": v for k, v in settings.items()}})
        mlflow_run.log_metrics(summary)
        mlflow_run.log_artifact(target, "rollouts")
        log_split_input(mlflow_run, root, manifest, "val", tasks)
    return summary

