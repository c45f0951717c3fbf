"""Episodes as mapped Prefect tasks, a chunk each, on the task runner params.orchestration names:
threads of the stage's process, or the worker processes of a Dask cluster (prefect-dask).

Only rows cross back from the task runner; the resume cache, the output files and every MLflow
call stay on the flow's thread (MLflow's active run is per thread, NOTES.md).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from prefect import Flow, task
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed
from prefect.task_runners import ThreadPoolTaskRunner

from flows.orchestration import OrchestrationConfig
from heldout.environment import find_project_root
from heldout.episodes.chunks import Chunk, EpisodeWork, Piece, run_chunk
from heldout.episodes.engine import EPISODES
from heldout.episodes.rollout import RolloutsConfig
from stages.common import read_params, section
from stages.progress import Pace


@task(name="episodes", task_run_name="{work.label}[{index}]", cache_policy=NO_CACHE)
def episode_chunk(work: EpisodeWork, episodes: Chunk, index: int) -> list[dict]:
    return run_chunk(work, episodes)


def on_task_runner(pieces: list[Piece]) -> Iterator[tuple[int, list[dict]]]:
    """A `heldout.episodes.chunks.ChunkExecutor` over the running flow's task runner. The flow
    run shows its progress in Prefect's UI as a progress artifact: the episodes done, those in
    flight in this process, and the ETA at the rate so far."""
    if not pieces:  # every episode came from the resume cache
        return
    works = [work for work, _ in pieces]
    futures = episode_chunk.map(works, [chunk for _, chunk in pieces], chunk_numbers(works))
    index = {id(future): i for i, future in enumerate(futures)}
    label = works_label(works)
    total, done, pace = sum(len(chunk) for _, chunk in pieces), 0, Pace(time.monotonic)
    artifact = create_progress_artifact(0.0, description=f"{label}: {total} episodes")
    for future in as_completed(futures):
        piece = index[id(future)]
        rows = future.result()
        done += len(rows)
        for _ in rows:
            pace.ran_one()
        update_progress_artifact(artifact, 100.0 * done / max(total, 1),
                                 progress_line(label, done, total, pace))
        yield piece, rows


def chunk_numbers(works: list[EpisodeWork]) -> list[int]:
    """Each piece's chunk number within its own work, which names its task run
    (`canary:blind[0]`, whatever other work runs beside it)."""
    seen: Counter[str] = Counter()
    numbers = []
    for work in works:
        numbers.append(seen[work.label])
        seen[work.label] += 1
    return numbers


def works_label(works: list[EpisodeWork]) -> str:
    """The label of the work, or of the first and how many others run with it."""
    labels = list(dict.fromkeys(work.label for work in works))
    others = len(labels) - 1
    return labels[0] if not others else (
        f"{labels[0]} and {others} other{'s' if others > 1 else ''}")


def progress_line(label: str, done: int, total: int, pace: Pace) -> str:
    """What the flow run's progress artifact says: done, in flight here, and the ETA."""
    rate = pace.rate()
    return (f"{label}: {done}/{total} episodes, "
            f"{'-' if rate is None else f'{rate:.1f}'} ep/s, {EPISODES.in_flight} in flight "
            f"in this process, ETA {pace.eta(total - done)}")


def task_runner(orchestration: OrchestrationConfig, rollouts: RolloutsConfig) -> Any:
    """The task runner with enough chunks in flight for rollouts.in_flight episodes a process.
    A chunk's thread only waits: its episodes run on the process's event loop."""
    chunks = rollouts.chunks_in_flight()
    if orchestration.task_runner == "threads":
        return ThreadPoolTaskRunner(max_workers=chunks)
    from prefect_dask import DaskTaskRunner

    # A cluster's own chatter (workers registering, comms closing) is not the stage's news.
    logging.getLogger("distributed").setLevel(logging.WARNING)
    if orchestration.dask_address:
        return DaskTaskRunner(address=orchestration.dask_address)
    return DaskTaskRunner(
        cluster_class="distributed.LocalCluster",
        # A worker's threads only wait on its chunks, whose episodes share its event loop; the
        # processes keep agents' Python code from sharing one GIL.
        cluster_kwargs={"n_workers": orchestration.dask_workers, "threads_per_worker": chunks,
                        "processes": True, "host": "127.0.0.1",
                        # An empty host (":0") listens on every interface (NOTES.md).
                        "dashboard_address": "127.0.0.1:0"},
    )


def on_params_task_runner(stage_flow: Flow) -> Callable[..., Any]:
    """The flow, run on the task runner the project's params name when it is called."""

    def run(**parameters: Any) -> Any:
        params = read_params(find_project_root())
        runner = task_runner(section(params, "orchestration", OrchestrationConfig),
                             section(params, "rollouts", RolloutsConfig))
        return stage_flow.with_options(task_runner=runner)(**parameters)

    return run
