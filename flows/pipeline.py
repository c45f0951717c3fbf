"""The pipeline flow: `dvc repro` through DVC's Python API, one Prefect task per DVC stage.

DVC alone decides what is stale: the flow walks the stages in the order `dvc repro` would and
asks DVC to reproduce each one by itself, which it does only if its deps, params or outs
changed. Each stage's own process runs it as a flow against the same Prefect API, tagged with
this run's id. One MLflow run (`heldout.stage` = pipeline) records what ran, what was up to
date, each stage's wall time and the digest of the resulting dvc.lock.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from dvc.repo import Repo
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from flows import PIPELINE_RUN_ENV
from flows.summary import StageOutcome, outcomes_after_failure, pipeline_summary, stage_metric
from flows.warm import warm_starts
from heldout.environment import find_project_root
from heldout.errors import StageError
from stages.common import read_params, tracked_stage


def planned_stages(root: Path, targets: list[str] | None) -> list[str]:
    """Every stage `dvc repro TARGETS` would consider, in the order it would run them."""
    from dvc.repo.reproduce import collect_stages, get_active_graph, plan_repro

    with Repo(str(root)) as repo:
        chosen = collect_stages(repo, targets or ["dvc.yaml"])
        return [stage.addressing for stage in plan_repro(get_active_graph(repo.index.graph),
                                                          chosen)]


@task(task_run_name="{stage}", cache_policy=NO_CACHE)
def reproduce_stage(repo: Repo, stage: str, force: bool) -> bool:
    """Reproduce one stage if DVC finds it stale (or `force`); whether it ran."""
    ran = repo.reproduce(stage, single_item=True, force=force)
    get_run_logger().info("%s: %s", stage, "ran" if ran else "up to date")
    return bool(ran)


@flow(name="pipeline", description=__doc__)
def pipeline_flow(
    targets: list[str] | None = None, force: bool = False, root: str | None = None
) -> dict:
    project = find_project_root(Path(root) if root else None)
    started = time.perf_counter()
    planned = planned_stages(project, targets)
    os.environ[PIPELINE_RUN_ENV] = str(flow_run.get_id())  # for the stage processes DVC starts
    try:
        with warm_starts(project):
            outcomes = reproduce_in_order(project, planned, force)
    finally:
        os.environ.pop(PIPELINE_RUN_ENV, None)
    outcomes += outcomes_after_failure(planned, outcomes)
    lock = project / "dvc.lock"
    summary = pipeline_summary(outcomes, lock.read_bytes() if lock.is_file() else None,
                               time.perf_counter() - started)
    record(project, summary, outcomes)
    return summary


def reproduce_in_order(root: Path, planned: list[str], force: bool) -> list[StageOutcome]:
    """Each planned stage in turn, until one fails. One Repo serves them all: opening one per
    stage cost 0.5 s a stage (DVC re-reads its index after every reproduce either way)."""
    # DVC prints its own log lines; Prefect's root handler would print each a second time.
    logging.getLogger("dvc").propagate = False
    outcomes: list[StageOutcome] = []
    with Repo(str(root)) as repo:
        for stage in planned:
            started = time.perf_counter()
            try:
                ran = reproduce_stage(repo, stage, force)
            except Exception as error:  # noqa: BLE001 - recorded, then the flow fails with it
                outcomes.append(StageOutcome(stage, "failed", time.perf_counter() - started,
                                             f"{type(error).__name__}: {error}"[:500]))
                break
            outcomes.append(StageOutcome(stage, "ran" if ran else "up_to_date",
                                         time.perf_counter() - started))
    return outcomes


def record(root: Path, summary: dict, outcomes: list[StageOutcome]) -> None:
    """The summary as an MLflow run, FAILED (with the reason) if a stage failed."""
    with tracked_stage(root, read_params(root), "pipeline", "pipeline") as mlflow_run:
        mlflow_run.set_tags({"dvc_lock": summary["dvc_lock_sha256"] or "none",
                             "prefect_flow_run": str(flow_run.get_id())})
        mlflow_run.log_metrics({
            "wall_s": summary["wall_s"],
            **{f"stages_{outcome}": count for outcome, count in summary["counts"].items()},
            **{stage_metric(o.stage): o.wall_s for o in outcomes if o.outcome != "not_reached"},
        })
        mlflow_run.log_dict(summary, "pipeline.json")
        if summary["failed"]:
            failed = next(o for o in outcomes if o.outcome == "failed")
            raise StageError(f"stage {failed.stage} failed ({failed.error}); not run: "
                             f"{', '.join(summary['not_reached']) or 'none'}")
