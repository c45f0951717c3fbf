"""What every stage does the same way: find the project, read its params section by section,
tag its MLflow run with the protocol's identity."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from heldout.canonical import sha256_hex
from heldout.custody.guard import (
    SEALED_SUFFIX,
    TestSetAccessError,
    install_guard,
    recording_run,
)
from heldout.environment import find_project_root
from heldout.errors import ParamsError, StageError
from heldout.tasks.record import Task
from stages import params_check
from stages.catalog import (
    EXCLUDED,
    MANIFEST,
    PER_TASK,
    SCORES,
    SEALED_TEST,
    split_file,
)
from stages.tracking import StageRun, TrackingConfig, stage_run

# Where every stage reads its params; stages/params_check.py checks the whole file at once.
read_params = params_check.read_params
section = params_check.section


# The tree a pipeline run started from, as `git_commit` found it before any stage ran
# (flows/pipeline.py sets it for the stage processes DVC starts): the pipeline writes dvc.lock
# after each stage and the test stage stages the ledger's export, so a tree checked again
# mid-run is `+dirty` by the pipeline's own writes, not by anything the run was made from.
GIT_COMMIT_ENV = "HELDOUT_GIT_COMMIT"


# Set by DVC in every stage command of `dvc exp run`, queued and temporary runs included.
EXPERIMENT_ENV = "DVC_EXP_NAME"


def sweep_experiment(named_for_the_test: str) -> str | None:
    """The experiment this stage runs in when it is a sweep: inside `dvc exp run` under any
    name but the one params.test.experiment names (that experiment may open the test split)."""
    name = os.environ.get(EXPERIMENT_ENV)
    if name is None or (named_for_the_test and name == named_for_the_test):
        return None
    return name


def git_commit(root: Path) -> str:
    """The commit the stage ran from, with '+dirty' when the work tree differed from it. Under
    `heldout pipeline`: the tree as it was when the pipeline started (GIT_COMMIT_ENV), if that
    names the commit HEAD is still at; a stage run by itself looks at the tree as it is now."""
    started = os.environ.get(GIT_COMMIT_ENV, "")
    if started:
        head = _git(root, "rev-parse", "HEAD") or "none"
        if started.removesuffix("+dirty") == head:
            return started
    return tree_commit(root)


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def tree_commit(root: Path) -> str:
    """HEAD's commit, '+dirty' if a tracked file differs from it now (staged or not)."""
    commit = _git(root, "rev-parse", "HEAD") or "none"
    return commit + ("+dirty" if _git(root, "status", "--porcelain", "--untracked-files=no")
                     else "")


@contextmanager
def tracked_stage(
    root: Path, params: dict[str, Any], run_name: str, stage: str
) -> Iterator[StageRun]:
    tags = {"stage": stage, "git_commit": git_commit(root)}
    config = section(params, "mlflow", TrackingConfig)
    with stage_run(root, config, run_name, tags) as run, recording_run(run.run_id):
        try:
            yield run
        except TestSetAccessError as error:
            # The ledger has the refusal; the tags are how MLflow's search finds the failed run,
            # with the README's filter for every test access among them. An error no ledger line
            # holds (a missing file) tags nothing: no run stands as an access nobody recorded.
            if error.recorded:
                run.set_tags({"test_access": "true", "test_access_refused": "true"})
            raise


def project_root(root: Path | None) -> Path:
    """The project a stage runs in. Every stage starts here, so this is where the test-split
    guard is installed: from here on, only heldout.custody.lock.TestLock may open the test split."""
    # Absolute: MLflow's artifact location and the guard's watched paths are file URIs.
    root = Path(root).resolve() if root is not None else find_project_root()
    install_guard(root, sealed_task_source(root))
    return root


def sealed_task_source(root: Path) -> Path | None:
    """`params.tasks.source` if it names a sealed task file (heldout.custody.task_source), which
    the guard then watches as it watches the test split; params that cannot be read name none
    here (the stage reports them when it reads its section)."""
    try:
        source = (params_check.read_params(root).get("tasks") or {}).get("source")
    except ParamsError:
        return None
    return Path(source) if isinstance(source, str) and source.endswith(SEALED_SUFFIX) else None


def checkpoint_settings(params: Mapping[str, Any], name: str) -> dict[str, Any]:
    """`params.checkpoints.<name>`: `{agent: <kind>, ...settings}` (read alone: the other
    checkpoints are no input of what is computed with this one)."""
    checkpoints = params.get("checkpoints")
    if checkpoints is None or name not in checkpoints:
        checkpoints = checkpoints or {}
        raise ParamsError(
            f"params.yaml: checkpoints.{name}: no such checkpoint; the checkpoints are "
            f"{', '.join(checkpoints) or 'none'}"
        )
    settings = checkpoints[name]
    if not isinstance(settings, dict):
        raise ParamsError(f"params.yaml: checkpoints.{name}: expected a mapping with 'agent'")
    return settings


def val_scores_digest(root: Path) -> str:
    """What a selection is computed from: the val scores and per-task counts, byte for byte.
    The select stage records it; the test stage refuses a selection whose digest is stale."""
    return sha256_hex((root / SCORES).read_bytes() + (root / PER_TASK).read_bytes())


def protocol_tags(manifest: dict[str, Any]) -> dict[str, str]:
    """The identity every later number carries: which test set, which splits."""
    return {
        "test_version": manifest["test_version"],
        **{f"split.{name}": digest for name, digest in manifest["digests"].items()},
    }


def read_manifest(root: Path) -> dict[str, Any]:
    path = root / MANIFEST
    if not path.is_file():
        raise StageError(f"{path}: missing; run the split stage first (dvc repro)")
    return json.loads(path.read_text(encoding="utf-8"))


def log_split_input(
    run: StageRun, root: Path, manifest: dict[str, Any], name: str, tasks: list[Task]
) -> None:
    """Record a split as this run's input: its digest and context say which data the run saw.
    What MLflow profiles is ids, groups and hashes, not the task text."""
    index = pd.DataFrame(
        {
            "id": [t.id for t in tasks],
            "group": [t.group for t in tasks],
            "content_hash": [t.content_hash for t in tasks],
        }
    )
    digest = manifest["digests"][name]
    run.log_dataset(
        index, name=f"{name}-{digest[:12]}", digest=digest, context=name,
        source=root / (SEALED_TEST if name == "test" else split_file(name)),
    )



def eval_view(root: Path, split: str, tasks: list[Task]) -> list[Task]:
    """The eval tasks later stages score: the split less what decontamination excluded
    (policy drop). Without a decontaminate stage, the whole split."""
    excluded = excluded_ids(root, split)
    return [t for t in tasks if t.id not in excluded]


def excluded_ids(root: Path, split: str) -> frozenset[str]:
    """The ids of `split` that decontamination excluded (none without a decontaminate
    stage)."""
    path = root / EXCLUDED
    if not path.is_file():
        return frozenset()
    return frozenset(json.loads(path.read_text(encoding="utf-8")).get(split, []))
