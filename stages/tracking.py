"""MLflow: one run per stage execution, its outputs as artifacts, its inputs as datasets.

With stages/traces.py (episode traces), the only module that imports mlflow, and only when a
run starts: `heldout --help` and the pure core never pay its import time.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from heldout.environment import default_tracking_uri, store_root

TAG_PREFIX = "heldout."


class TrackingConfig(BaseModel):
    """`params.mlflow`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment: str = Field(default="heldout", min_length=1)


class StageRun:
    """What a stage may log. MLflow's active run is per thread: call these from the thread that
    opened the run (the flow's), never from a task on a worker thread (NOTES.md)."""

    def __init__(self, run_id: str, experiment_id: str = ""):
        self.run_id, self.experiment_id = run_id, experiment_id

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        import mlflow

        mlflow.set_tags({_tag(key): str(value) for key, value in tags.items()})

    def log_params(self, params: Mapping[str, Any]) -> None:
        import mlflow

        mlflow.log_params(dict(params))

    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        import mlflow

        mlflow.log_metrics({key: float(value) for key, value in metrics.items()})

    def log_dict(self, record: Mapping[str, Any], artifact_file: str) -> None:
        import mlflow

        mlflow.log_dict(dict(record), artifact_file)

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        import mlflow

        if Path(path).is_dir():
            mlflow.log_artifacts(str(path), artifact_path=artifact_path)
        else:
            mlflow.log_artifact(str(path), artifact_path=artifact_path)

    def log_dataset(
        self, table: Any, *, name: str, digest: str, source: Path, context: str
    ) -> None:
        """Record an input with its digest and context (train / val / test / tasks), which is how
        a reviewer finds, say, every run that touched the test split."""
        import mlflow
        import mlflow.data

        with warnings.catch_warnings():
            # MLflow registers its local-file source twice and warns that a path is ambiguous
            # between the two identical classes; the warning says nothing about our data.
            warnings.filterwarnings("ignore", message=".*can be interpreted in multiple ways")
            # MLflow stores dataset digests in a 36-character column.
            dataset = mlflow.data.from_pandas(
                table, source=str(source), name=name, digest=digest[:32]
            )
        mlflow.log_input(dataset, context=context)


def _tag(key: str) -> str:
    return key if key.startswith((TAG_PREFIX, "mlflow.")) else TAG_PREFIX + key


def tracking_uri(project_root: Path) -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri(project_root)


# Where the project's own store keeps artifacts, under its folder.
ARTIFACTS = "mlartifacts"


def follow_the_project(project_root: Path) -> int:
    """Re-root the project's own SQLite store when the project was copied or moved: MLflow
    keeps each experiment's artifact folder, and each run's, as absolute URIs, so a copy's runs
    would write into the original's `mlartifacts/`. Every location under another folder's
    `mlartifacts` is moved under this one's (the copy brought those files along). Returns the
    rows changed; a store elsewhere (a server, another file) is left as it is."""
    if tracking_uri(project_root) != default_tracking_uri(project_root):
        return 0
    database = store_root(project_root) / "mlflow.db"
    here = (store_root(project_root) / ARTIFACTS).as_uri()
    if not database.is_file():
        return 0
    changed = 0
    with closing(sqlite3.connect(database)) as store, store:
        tables = {row[0] for row in store.execute("SELECT name FROM sqlite_master")}
        if not {"experiments", "runs"} <= tables:
            return 0
        for experiment_id, location in store.execute(
                "SELECT experiment_id, artifact_location FROM experiments").fetchall():
            old = _other_root(location or "", here)
            if old is None:
                continue
            for table, column in (("experiments", "artifact_location"), ("runs", "artifact_uri")):
                changed += store.execute(
                    f"UPDATE {table} SET {column} = ? || substr({column}, ?) "
                    f"WHERE experiment_id = ? AND substr({column}, 1, ?) = ?",
                    (here, len(old) + 1, experiment_id, len(old), old)).rowcount
    return changed


def _other_root(location: str, here: str) -> str | None:
    """The `file://…/mlartifacts` prefix of `location` when it is another folder's, else None."""
    if not location.startswith("file://") or location.startswith(here):
        return None
    marker = f"/{ARTIFACTS}"
    at = location.find(marker)
    end = at + len(marker)
    if at < 0 or (len(location) > end and location[end] != "/"):
        return None
    return location[:end]


def _experiment_id(client: Any, name: str, project_root: Path) -> str:
    from mlflow.exceptions import MlflowException

    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    local_store = tracking_uri(project_root) == default_tracking_uri(project_root)
    location = (store_root(project_root) / ARTIFACTS).as_uri() if local_store else None
    try:
        return client.create_experiment(name, artifact_location=location)
    except MlflowException:
        # Another stage created it between our look-up and our create.
        return client.get_experiment_by_name(name).experiment_id


@contextmanager
def stage_run(
    project_root: Path, config: TrackingConfig, run_name: str, tags: Mapping[str, Any]
) -> Iterator[StageRun]:
    """An MLflow run around one stage execution: FINISHED if the stage returns, FAILED (and
    still visible to a reviewer) if it raises."""
    import mlflow

    moved = follow_the_project(project_root)
    if moved:
        print(f"heldout: the project's MLflow store named another folder's {ARTIFACTS}/ (a "
              f"copied or moved project): {moved} location(s) now point under "
              f"{store_root(project_root) / ARTIFACTS}", file=sys.stderr)
    mlflow.set_tracking_uri(tracking_uri(project_root))
    experiment_id = _experiment_id(mlflow.MlflowClient(), config.experiment, project_root)
    with mlflow.start_run(
        experiment_id=experiment_id,
        run_name=run_name,
        tags={_tag(key): str(value) for key, value in tags.items()},
    ) as run:
        yield StageRun(run.info.run_id, experiment_id)


@dataclass(frozen=True)
class LastRun:
    """What a stage's last finished run took: its wall time, and for a stage that runs
    episodes, how many it ran (not from the resume cache) and their seconds."""

    seconds: float
    episodes_run: int = 0
    episodes_s: float = 0.0
    started_ms: int = 0
    metrics: Mapping[str, float] | None = None  # the pipeline's run: each stage's wall time


def last_runs(project_root: Path, config: TrackingConfig) -> dict[str, LastRun]:
    """The latest finished run of each run name (`rollouts:base`, `score`, ...) in the project's
    experiment: the paces `heldout plan` prices the next run at. Empty if there is none."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri(project_root))
    experiment = client.get_experiment_by_name(config.experiment)
    if experiment is None:
        return {}
    found: dict[str, LastRun] = {}
    for run in client.search_runs([experiment.experiment_id], "attributes.status = 'FINISHED'",
                                  order_by=["attributes.start_time DESC"], max_results=2000):
        name, metrics = run.info.run_name, run.data.metrics
        if name in found or not run.info.end_time:
            continue
        found[name] = LastRun(
            seconds=(run.info.end_time - run.info.start_time) / 1000,
            episodes_run=int(metrics.get("episodes", 0) - metrics.get("resumed", 0)),
            episodes_s=float(metrics.get("episodes_s", 0.0)), started_ms=run.info.start_time,
            metrics=dict(metrics) if name == "pipeline" else None)
    return found


# The runs an audit reads: tagged by the test stage, refused by a stage's guard, or holding the
# test split as an input by any route (MLflow filters have no OR, so one search each).
TEST_SPLIT_QUERIES = (
    f"tags.`{TAG_PREFIX}test_access` = 'true'",
    f"tags.`{TAG_PREFIX}test_access_refused` = 'true'",
    "datasets.context = 'test'",
)


def _every_experiment(client: Any) -> list[Any]:
    """Every experiment of the store, deleted ones included, whatever its name."""
    from mlflow.entities import ViewType

    experiments, token = [], None
    while True:
        page = client.search_experiments(view_type=ViewType.ALL, max_results=1000,
                                         page_token=token)
        experiments.extend(page)
        token = page.token
        if not token:
            return experiments


def runs_touching_test_split(project_root: Path) -> list[Any]:
    """Every run of the store that touched, or tried to touch, the test split, in every
    experiment (renaming one, or pointing params.mlflow.experiment elsewhere, must not take its
    runs out of the audit), deleted runs and experiments included."""
    import mlflow
    from mlflow.entities import ViewType

    from heldout.custody.audit import DELETED_WITH_EXPERIMENT, TestAccessRun

    client = mlflow.MlflowClient(tracking_uri(project_root))
    experiments = {e.experiment_id: e for e in _every_experiment(client)}
    found: dict[str, Any] = {}
    for query in TEST_SPLIT_QUERIES:
        for chunk in _chunks(list(experiments), 100):
            token = None
            while True:
                page = client.search_runs(chunk, query, run_view_type=ViewType.ALL,
                                          max_results=1000, page_token=token)
                found.update((run.info.run_id, run) for run in page)
                token = page.token
                if not token:
                    break
    deleted = {i for i, e in experiments.items() if e.lifecycle_stage == "deleted"}
    return [
        TestAccessRun(
            run_id=run.info.run_id,
            status=run.info.status,
            tagged=run.data.tags.get(f"{TAG_PREFIX}test_access") == "true",
            test_input=any(
                tag.key == "mlflow.data.context" and tag.value == "test"
                for dataset_input in run.inputs.dataset_inputs for tag in dataset_input.tags
            ),
            lifecycle_stage=DELETED_WITH_EXPERIMENT if run.info.experiment_id in deleted
            else run.info.lifecycle_stage,
            tags=dict(run.data.tags),
        )
        for run in found.values()
    ]


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[start:start + size] for start in range(0, len(items), size)]
