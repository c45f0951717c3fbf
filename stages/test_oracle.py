"""The reference solutions judged on the test tasks, inside the access (issue 41, item 2): a
task both arms failed in every episode is their failure when the oracle passes it, and may be
no policy's to pass when it does not (a broken test, an impossible budget). One episode a
task, single-shot, through the same harness and sandbox as the arms."""

from __future__ import annotations

from pathlib import Path

from heldout.episodes.chunks import ChunkExecutor
from heldout.episodes.harness import Harness
from heldout.episodes.rollout import RolloutJob, RolloutsConfig, roll_outs
from heldout.episodes.rows import rollout_table
from heldout.tasks.record import Task
from stages.progress import EpisodeProgress

ORACLE = {"agent": "oracle"}


def oracle_passes(root: Path, tasks: list[Task], harness: Harness, config: RolloutsConfig,
                  execute: ChunkExecutor | None, sealing_key: bytes) -> list[str]:
    """The test task ids whose reference solution passes the hidden tests, sorted."""
    progress = EpisodeProgress("test: the reference solutions on the test tasks")
    (rows,) = roll_outs(root, [RolloutJob("test:canary:oracle", ORACLE,
                                          harness.model_copy(update={"n": 1}))],
                        tasks, config, progress, execute, sealing_key=sealing_key)
    table = rollout_table("oracle", rows)
    passed = table["passed"].astype(bool) & (table["status"] != "error")
    return sorted(set(table.loc[passed, "task_id"].astype(str)))
