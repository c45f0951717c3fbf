"""The pipeline flow: `dvc repro` through DVC's Python API, one Prefect task per DVC stage.

DVC alone decides what is stale: the flow walks the stages in the order `dvc repro` would and
asks DVC to reproduce each one by itself, which it does only if its deps, params or outs
changed. Each stage's own process runs it as a flow against the same Prefect API, tagged with
this run's id. The terminal gets one line per stage (`split: ran in 4.2 s`, `up to date`,
`FAILED ...`) between the stages' own lines; a stage's user error is handed back here
(ERROR_FILE_ENV) and raised once, last. When something ran (or failed), one MLflow run
(`heldout.stage` = pipeline) records what ran, what was up to date, each stage's wall time and
the digest of the resulting dvc.lock; a run in which every stage was up to date records nothing.
Every stage's heldout.git_commit is the tree as the run found it before its first write
(GIT_COMMIT_ENV): the dvc.lock DVC rewrites after each stage does not make it `+dirty`.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dvc.repo import Repo
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from flows import ERROR_FILE_ENV, PIPELINE_RUN_ENV
from flows.pinned import check_runs_deployed
from flows.plan import dvc_reason, planned_stages
from flows.summary import StageOutcome, outcomes_after_failure, pipeline_summary, stage_metric
from flows.terminal import verbose
from flows.warm import warm_starts
from heldout.environment import find_project_root
from heldout.errors import StageError
from stages.common import GIT_COMMIT_ENV, read_params, tracked_stage, tree_commit


@task(task_run_name="{stage}", cache_policy=NO_CACHE)
def reproduce_stage(repo: Repo, stage: str, force: bool) -> bool:
    """Reproduce one stage if DVC finds it stale (or `force`); whether it ran."""
    ran = repo.reproduce(stage, single_item=True, force=force)
    get_run_logger().info("%s: %s", stage, "ran" if ran else "up to date")
    return bool(ran)


@flow(name="pipeline", description=__doc__)
def pipeline_flow(
    targets: list[str] | None = None, force: bool = False, root: str | None = None,
    commit: str | None = None,
) -> dict:
    """`commit`: the commit a work-pool deployment pinned (heldout deploy); the run refuses to
    start unless its folder holds exactly that commit."""
    project = find_project_root(Path(root) if root else None)
    if commit:
        check_runs_deployed(project, commit)
    started = time.perf_counter()
    os.environ[PIPELINE_RUN_ENV] = str(flow_run.get_id())  # for the stage processes DVC starts
    # The tree as the run found it, before its first dvc.lock write: every stage's and the
    # summary's heldout.git_commit (stages.common.git_commit).
    os.environ[GIT_COMMIT_ENV] = tree_commit(project)
    try:
        with project_code(project), warm_starts(project), stage_errors() as errors:
            planned, outcomes = reproduce_in_order(project, targets, force, errors)
        outcomes += outcomes_after_failure(planned, outcomes)
        lock = project / "dvc.lock"
        summary = pipeline_summary(outcomes, lock.read_bytes() if lock.is_file() else None,
                                   time.perf_counter() - started)
        if summary["ran"] or summary["failed"]:
            record(project, summary, outcomes, commit)
    finally:
        os.environ.pop(PIPELINE_RUN_ENV, None)
        os.environ.pop(GIT_COMMIT_ENV, None)
    return summary


@contextmanager
def project_code(root: Path) -> Iterator[None]:
    """The stage processes DVC starts import the project's own heldout, stages and flows
    before an installed copy's: a deployed run (a clone at the pinned commit) runs that
    commit's code, not the code of the checkout the worker's environment was installed from."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(root), *([before] if before else [])])
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


class StageErrors:
    """Where a stage process under this pipeline leaves its user error (cli/main.py `main`)
    instead of printing it, so that the pipeline says it once, last."""

    def __init__(self, path: Path):
        self.path = path

    def take(self) -> str:
        """The message the last stage left, if any; the file is emptied for the next."""
        try:
            message = self.path.read_text(encoding="utf-8").strip()
        except OSError:
            return ""
        self.path.unlink(missing_ok=True)
        return message


@contextmanager
def stage_errors() -> Iterator[StageErrors]:
    with tempfile.TemporaryDirectory(prefix="heldout-errors-") as folder:
        os.environ[ERROR_FILE_ENV] = str(Path(folder) / "error")
        try:
            yield StageErrors(Path(folder) / "error")
        finally:
            os.environ.pop(ERROR_FILE_ENV, None)


def reproduce_in_order(
    root: Path, targets: list[str] | None, force: bool, errors: StageErrors
) -> tuple[list[str], list[StageOutcome]]:
    """The planned stages, then each in turn until one fails, with a line each. One Repo serves
    them all: opening one per stage cost 0.5 s a stage (DVC re-reads its index after every
    reproduce either way)."""
    dvc_log = logging.getLogger("dvc")
    # DVC prints its own log lines; Prefect's root handler would print each a second time.
    dvc_log.propagate = False
    if not verbose():  # "Running stage", "Updating lock file": the status lines say it
        dvc_log.setLevel(logging.WARNING)
    outcomes: list[StageOutcome] = []
    with Repo(str(root)) as repo:
        # DVC's own switch for its "To track the changes with git, run: git add dvc.lock" hint
        # (the one `dvc repro -q` sets). dvc.lock is left for the user to commit, not staged.
        repo.scm_context.quiet = True
        planned = [stage.addressing for stage in planned_stages(repo, targets)]
        for index, stage in enumerate(planned):
            started = time.perf_counter()
            try:
                ran = reproduce_stage(repo, stage, force)
            except Exception as error:  # noqa: BLE001 - recorded, then the flow fails with it
                wall_s = time.perf_counter() - started
                message = errors.take()
                reason = message or dvc_reason(error)
                outcomes.append(StageOutcome(stage, "failed", wall_s, reason[:500], message))
                rest = planned[index + 1:]
                restored = restore_previous_outputs(repo, stage)
                say(f"{stage}: FAILED after {wall_s:.1f} s"
                    + ("" if message else f" ({dvc_reason(error)})")
                    + ("; its previous outputs are back (dvc.lock's)" if restored else "")
                    + (f"; not run: {', '.join(rest)}" if rest else ""))
                break
            wall_s = time.perf_counter() - started
            outcomes.append(StageOutcome(stage, "ran" if ran else "up_to_date", wall_s))
            say(f"{stage}: ran in {wall_s:.1f} s" if ran else f"{stage}: up to date")
    return planned, outcomes


def restore_previous_outputs(repo: Repo, stage: str) -> bool:
    """DVC deletes a stage's outputs before it runs it. After a failure, those dvc.lock names
    (the last run that succeeded) come back from the cache, so one bad input does not empty
    what the stages after it read. Whether anything came back."""
    try:
        restored = repo.checkout(targets=[stage], force=True)
    except Exception:  # noqa: BLE001 - no lock entry or no cached copy yet: nothing to restore
        return False
    return bool(restored.get("added") or restored.get("modified"))


def say(line: str) -> None:
    print(line, flush=True)


def record(root: Path, summary: dict, outcomes: list[StageOutcome],
           commit: str | None = None) -> None:
    """The summary as an MLflow run, FAILED (with the reason) if a stage failed."""
    with tracked_stage(root, read_params(root), "pipeline", "pipeline") as mlflow_run:
        mlflow_run.set_tags({"dvc_lock": summary["dvc_lock_sha256"] or "none",
                             "prefect_flow_run": str(flow_run.get_id()),
                             **({"deployed_commit": commit} if commit else {})})
        mlflow_run.log_metrics({
            "wall_s": summary["wall_s"],
            **{f"stages_{outcome}": count for outcome, count in summary["counts"].items()},
            **{stage_metric(o.stage): o.wall_s for o in outcomes if o.outcome != "not_reached"},
        })
        mlflow_run.log_dict(summary, "pipeline.json")
        if summary["failed"]:
            raise stage_failure(next(o for o in outcomes if o.outcome == "failed"),
                                summary["not_reached"])


def stage_failure(failed: StageOutcome, not_reached: list[str]) -> StageError:
    """The error the pipeline ends with: the stage's own message when it left one (a user
    error), else DVC's reason (the stage's traceback, if it had one, is already above)."""
    if failed.message:
        return StageError(f"{failed.stage} failed: {failed.message}")
    return StageError(f"stage {failed.stage} failed ({failed.error}); not run: "
                      f"{', '.join(not_reached) or 'none'}")
