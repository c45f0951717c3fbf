"""How long a stage of the next run should take, from what measured it: the project's earlier
runs in MLflow (each stage's last finished run; for a stage that runs episodes, the seconds an
episode took, of those it ran rather than read from the resume cache), else, for a project
that never ran, the trials `heldout probe` ran of its local agents (cli/trial.py). `heldout
plan` prefers a probe of a checkpoint's endpoint where there is one (cli/plan.py)."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Stages whose episodes are rollouts of the checkpoints' agents, priced per episode at the
# rollouts' pace when they have no finished run of their own to go by.
EPISODE_STAGES = ("test", "sensitivity")


@dataclass(frozen=True)
class Paces:
    history: dict[str, Any]  # run name -> stages.tracking.LastRun
    trials: dict[str, dict[str, Any]] = field(default_factory=dict)  # checkpoint -> its trial

    @classmethod
    def measured(cls, root: Path, params: dict[str, Any]) -> Paces:
        """The project's earlier runs (none when its MLflow store does not exist yet: the
        plan creates nothing) and its local agents' trials."""
        from heldout.environment import default_tracking_uri
        from stages.common import section
        from stages.tracking import TrackingConfig, last_runs, tracking_uri

        trials = local_trials(root)
        uri = tracking_uri(root)
        if uri == default_tracking_uri(root) and not (root / "mlflow.db").exists():
            return cls({}, trials)
        return cls(last_runs(root, section(params, "mlflow", TrackingConfig)), trials)

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
            starts = [trial["stage_start_s"] for trial in self.trials.values()]
            return statistics.median(starts) if starts else 0.0
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

    def at_trial_pace(self, run_name: str) -> bool:
        """Whether this stage is priced from the trials alone: no earlier run measured it, or
        any rollout. A trial without a program at its time limit cannot say how long a
        stage's slowest episode holds it up (cli/plan.py bounds it)."""
        own = self.history.get(run_name)
        measured = own is not None and (own.episodes_run > 0 or not run_name.startswith(
            ("rollouts:", *EPISODE_STAGES)))
        return bool(self.trials) and not measured and self.episode_seconds() is None

    def _own_seconds(self, run_name: str, episodes: int) -> tuple[float | None, str]:
        last = self.history.get(run_name)
        if run_name.startswith("rollouts:") and last is not None and last.episodes_run > 0:
            each = last.episodes_s / last.episodes_run
            return (max(last.seconds - last.episodes_s, 0.0) + episodes * each,
                    f"{each:.3g} s an episode in its last run")
        if run_name.startswith("rollouts:") or (
                run_name in EPISODE_STAGES and (last is None or episodes == 0)):
            pooled = self.episode_seconds()
            if pooled is None and self.trials:
                return self._trial_seconds(run_name, episodes)
            if pooled is None:
                return None, "no earlier run measured an episode"
            each, beyond, runs = pooled
            return (beyond + episodes * each,
                    f"{each:.3g} s an episode, the median of {runs} rollout run(s)")
        if last is not None:
            return last.seconds, "its last run"
        if self.trials:
            return self._trial_seconds(run_name, episodes)
        return None, "no earlier run"

    def _trial_seconds(self, run_name: str, episodes: int) -> tuple[float, str]:
        """A project that never ran: episodes at the pace of the checkpoint's own trial, else
        the median of the trials'; a stage without episodes at its start alone."""
        if not episodes:
            return 0.0, "its start; its own work unmeasured"
        own = self.trials.get(run_name.removeprefix("rollouts:"))
        if own is not None:
            return episodes * own["episode_s"], f"{own['episode_s']:.3g} s an episode in its trial"
        each = statistics.median(trial["episode_s"] for trial in self.trials.values())
        whose = (f"{next(iter(self.trials))}'s trial" if len(self.trials) == 1 else
                 f"the median of {len(self.trials)} trials")
        return episodes * each, f"{each:.3g} s an episode, {whose}"


def local_trials(root: Path) -> dict[str, dict[str, Any]]:
    """The trials `heldout probe` ran of local agents (cli/trial.py), by checkpoint."""
    from cli.probe import PROBES

    found = {}
    for path in sorted((root / PROBES).glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # not ours to judge: the plan reads what it can
        if isinstance(record, dict) and record.get("kind") == "local":
            found[str(record["target"])] = record
    return found
