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

    def episode_seconds(self) -> tuple[float, int] | None:
        """Seconds an episode took, the median over the rollout runs that ran any, and how
        many runs that is."""
        each = [run.episodes_s / run.episodes_run for name, run in self.history.items()
                if name.startswith("rollouts:") and run.episodes_run > 0]
        return (statistics.median(each), len(each)) if each else None

    def seconds(self, run_name: str, episodes: int) -> tuple[float | None, str]:
        """(seconds, where they come from) for `episodes` to run under this run name, or
        (None, why not)."""
        last = self.history.get(run_name)
        pooled = self.episode_seconds()
        if run_name.startswith("rollouts:") and last is not None and last.episodes_run > 0:
            each = last.episodes_s / last.episodes_run
            return (max(last.seconds - last.episodes_s, 0.0) + episodes * each,
                    f"{each:.3g} s an episode in its last run")
        if run_name.startswith("rollouts:") or (
                run_name in EPISODE_STAGES and (last is None or episodes == 0)):
            if pooled is None:
                return None, "no earlier run measured an episode"
            return (episodes * pooled[0],
                    f"{pooled[0]:.3g} s an episode, the median of {pooled[1]} rollout run(s)")
        if last is not None:
            return last.seconds, "its last run"
        return None, "no earlier run"
