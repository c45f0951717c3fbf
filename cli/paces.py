"""How long a stage of the next run should take, from what measured it: the project's earlier
runs in MLflow (each stage's last finished run; for a stage that runs episodes, the seconds an
episode took, of those it ran rather than read from the resume cache). `heldout plan` prefers a
probe of a checkpoint's endpoint where there is one (`heldout probe`, cli/plan.py)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Stages whose episodes are rollouts of the checkpoints' agents, priced per episode at the
# rollouts' pace when they have no finished run of their own to go by.
EPISODE_STAGES = ("test", "sensitivity")


@dataclass(frozen=True)
class Paces:
    history: dict[str, Any]  # run name -> stages.tracking.LastRun

    @classmethod
    def measured(cls, root: Path, params: dict[str, Any]) -> Paces:
        """The project's earlier runs; none when its MLflow store does not exist yet (the
        plan creates nothing)."""
        from heldout.environment import default_tracking_uri
        from stages.common import section
        from stages.tracking import TrackingConfig, last_runs, tracking_uri

        uri = tracking_uri(root)
        if uri == default_tracking_uri(root) and not (root / "mlflow.db").exists():
            return cls({})
        return cls(last_runs(root, section(params, "mlflow", TrackingConfig)))

    def episode_seconds(self) -> tuple[float, float, int] | None:
        """Seconds an episode took and seconds a rollout run spent beyond its episodes, the
        medians over the rollout runs that ran any, and how many runs that is."""
        runs = [run for name, run in self.history.items()
                if name.startswith("rollouts:") and run.episodes_run > 0]
        if not runs:
            return None
        return (statistics.median(run.episodes_s / run.episodes_run for run in runs),
                statistics.median(max(run.seconds - run.episodes_s, 0.0) for run in runs),
                len(runs))

    def start_cost(self) -> float:
        """Seconds a stage costs beyond its own MLflow run (its process, DVC's checks): the
        median, over the stages the last pipeline run ran, of the pipeline's wall time for the
        stage less the stage's run. 0 without a pipeline run to go by."""
        pipeline = self.history.get("pipeline")
        if pipeline is None or not pipeline.metrics:
            return 0.0
        from flows.summary import stage_metric

        # The pipeline's MLflow run is logged when it ends: it began wall_s before.
        began_ms = pipeline.started_ms - 1000 * pipeline.metrics.get("wall_s", 0.0)
        beyond = [pipeline.metrics[metric] - run.seconds for name, run in self.history.items()
                  if name != "pipeline" and began_ms <= run.started_ms <= pipeline.started_ms
                  and (metric := stage_metric(name.replace(":", "@"))) in pipeline.metrics]
        return max(statistics.median(beyond), 0.0) if beyond else 0.0

    def pipeline_cost(self) -> float:
        """Seconds the last pipeline run spent outside its stages (its Prefect server, DVC's
        look at every stage)."""
        pipeline = self.history.get("pipeline")
        if pipeline is None or not pipeline.metrics:
            return 0.0
        stages = sum(value for name, value in pipeline.metrics.items()
                     if name.startswith("stage_s."))
        return max(pipeline.metrics.get("wall_s", 0.0) - stages, 0.0)

    def seconds(self, run_name: str, episodes: int) -> tuple[float | None, str]:
        """(seconds, where they come from) for a stage of this run name to run `episodes`,
        its start included, or (None, why not)."""
        took, how = self._own_seconds(run_name, episodes)
        return (None, how) if took is None else (took + self.start_cost(), how)

    def _own_seconds(self, run_name: str, episodes: int) -> tuple[float | None, str]:
        last = self.history.get(run_name)
        if run_name.startswith("rollouts:") and last is not None and last.episodes_run > 0:
            each = last.episodes_s / last.episodes_run
            return (max(last.seconds - last.episodes_s, 0.0) + episodes * each,
                    f"{each:.3g} s an episode in its last run")
        if run_name.startswith("rollouts:") or (
                run_name in EPISODE_STAGES and (last is None or episodes == 0)):
            pooled = self.episode_seconds()
            if pooled is None:
                return None, "no earlier run measured an episode"
            each, beyond, runs = pooled
            return (beyond + episodes * each,
                    f"{each:.3g} s an episode, the median of {runs} rollout run(s)")
        if last is not None:
            return last.seconds, "its last run"
        return None, "no earlier run"
