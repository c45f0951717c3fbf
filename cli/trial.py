"""`heldout probe` of a checkpoint whose agent runs here (demo, python, command: no endpoint to
climb): a timed trial of its episodes on the val tasks, the ones its rollouts stage will run,
under the pinned harness and sandbox, in a resume cache of its own that is thrown away, so the
run it prices finds nothing done; it keeps the pace, never an outcome. It also times what a
stage costs before its first episode (a process that imports a stage's flow). `heldout plan`
prices a project that never ran from it (cli/paces.py).

Registered through cli/probe.py. Imports stay inside the functions: `heldout --help` must not
pay for the stages.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# About one rollout stage of the embedded default: a stage's first episodes carry the
# sandbox's start and its slowest one (a program at its time limit) holds it up to the end,
# which a trial of 64 overweighted sixfold (0.162 s an episode against 0.025 measured).
TRIAL_EPISODES = 500


def local_trial(root: Path, name: str, settings: dict[str, Any], episodes: int) -> dict[str, Any]:
    """Run up to `episodes` of checkpoint `name` on val tasks and return what it measured: the
    seconds an episode took (wall time over episodes, the sandbox's start included) and a
    stage's start."""
    from heldout.episodes.harness import Harness
    from heldout.episodes.rollout import RolloutJob, RolloutsConfig, roll_outs
    from stages.common import read_params, section
    from stages.progress import EpisodeProgress

    params = read_params(root)
    harness = section(params, "harness", Harness)
    config = section(params, "rollouts", RolloutsConfig)
    tasks = val_tasks(root, params)[: -(-episodes // harness.n)]
    with tempfile.TemporaryDirectory(prefix="heldout-trial-") as scratch:
        trial_config = config.model_copy(update={"cache": str(Path(scratch) / "episodes.sqlite")})
        progress = EpisodeProgress(f"trial:{name}")
        started = time.perf_counter()
        (rows,) = roll_outs(root, [RolloutJob(f"trial:{name}", settings, harness)], tasks,
                            trial_config, progress)
        seconds = time.perf_counter() - started
    return {"target": name, "kind": "local", "agent": settings.get("agent"),
            "split": "val", "tasks": [task.id for task in tasks],
            "episodes": len(rows), "seconds": seconds, "episode_s": seconds / max(len(rows), 1),
            "stage_start_s": stage_start_seconds(root), "measured_at": time.time()}


def val_tasks(root: Path, params: dict[str, Any]) -> list[Any]:
    """The val split's tasks, by id: the split's file, or the split to come. Val, not train:
    of the embedded default's 48 train tasks, more programs met their time limit, and a trial
    there read 0.088 s an episode where the rollouts ran 0.025 on val."""
    from cli.split_to_come import split_to_come
    from heldout.tasks.sources import load_tasks
    from stages.catalog import split_file

    written = root / split_file("val")
    tasks = (load_tasks(written) if written.exists() else
             split_to_come(root, params, "heldout probe")["val"])
    return sorted(tasks, key=lambda task: task.id)


def stage_start_seconds(root: Path) -> float:
    """Seconds a new process takes to import a stage's flow, as DVC starts each stage."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import flows.rollouts"], cwd=root, check=True,
                   capture_output=True, timeout=600)
    return time.perf_counter() - started
