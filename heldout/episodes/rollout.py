"""Rolling out one agent on a task list: plan every episode, resume what the cache holds, run
the rest in chunks, report each finished episode to whoever watches."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from heldout.agents.protocol import AgentContext
from heldout.agents.registry import close_agent, identity_settings, make_agent
from heldout.canonical import content_digest
from heldout.episodes.cache import EpisodeCache
from heldout.episodes.chunks import (
    ChunkExecutor,
    EpisodeWork,
    Rollout,
    close_idle_runners,
    collect_together,
    in_process,
)
from heldout.episodes.episode import episode_key_for, plan_episodes
from heldout.episodes.harness import Harness
from heldout.errors import ParamsError
from heldout.plugins import gone
from heldout.tasks.kinds import task_kind
from heldout.tasks.record import Task


class RolloutsConfig(BaseModel):
    """`params.rollouts`: how episodes are executed (not part of the harness fingerprint: none
    of it changes a row)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    in_flight: int = Field(
        default=256, ge=1,
        description="episodes one process keeps in flight; each waits on its model call or its "
                    "sandbox without a thread (heldout.episodes.engine)")
    chunk_episodes: int = Field(
        default=32, ge=1,
        description="episodes per mapped task: the unit of resume and of distribution",
    )
    agent_threads: int = Field(
        default=4, ge=1,
        description="threads for agents without an asynchronous client (demo, python, command)")
    cache: str = Field(default=".heldout/episodes.sqlite", description="resume store")

    concurrency: gone("is gone: episodes no longer hold a thread each. Set in_flight (episodes "
                      "in flight per process, default 256) and, for agents without an "
                      "asynchronous client, agent_threads") = None

    def chunks_in_flight(self) -> int:
        """Chunks a task runner must run at once to keep `in_flight` episodes going, with one
        more so a chunk's slowest episodes never leave the process short."""
        return -(-self.in_flight // self.chunk_episodes) + 1


class EpisodeObserver(Protocol):
    """Told how many episodes there are, then of each as it finishes (on the collecting
    thread), then that the work ended, however it ended."""

    def start(self, total: int) -> None: ...

    def advance(self, row: dict, cached: bool) -> None: ...

    def finish(self) -> None: ...


def agent_context(harness: Harness, root: Path) -> AgentContext:
    return AgentContext(
        template=harness.template, temperature=harness.temperature, top_p=harness.top_p,
        max_tokens=harness.max_tokens, max_turns=harness.max_turns,
        timeout_s=harness.agent_timeout_s, project_root=str(root),
    )


def check_scorer_version(kinds: Iterable[str], harness: Harness) -> None:
    """The harness's scorer_version must be the one of the tasks' kind: it is what the
    fingerprint says a pass means."""
    versions = sorted({task_kind(kind).scorer_version for kind in kinds})
    if versions and versions != [harness.scorer_version]:
        raise ParamsError(
            f"params.yaml: harness.scorer_version: {harness.scorer_version!r}, but these tasks "
            f"are scored by {', '.join(versions)}; set it to "
            f"{versions[0] if len(versions) == 1 else 'one of them, with one kind per task set'}")


@dataclass(frozen=True)
class RolloutJob:
    """One agent's episodes on the task list under one harness; `rerun` > 0 draws every
    episode's seed anew (heldout.episodes.seeds), for the run-level drift."""

    label: str
    settings: dict[str, Any]
    harness: Harness
    rerun: int = 0


def roll_out(
    root: Path, label: str, settings: dict[str, Any], tasks: list[Task], harness: Harness,
    config: RolloutsConfig, observer: EpisodeObserver, execute: ChunkExecutor | None = None,
    sealing_key: bytes | None = None, rerun: int = 0,
) -> list[dict]:
    """Every episode of one agent on these tasks (roll_outs)."""
    return roll_outs(root, [RolloutJob(label, settings, harness, rerun)], tasks, config,
                     observer, execute, sealing_key)[0]


def roll_outs(
    root: Path, jobs: list[RolloutJob], tasks: list[Task], config: RolloutsConfig,
    observer: EpisodeObserver, execute: ChunkExecutor | None = None,
    sealing_key: bytes | None = None,
) -> list[list[dict]]:
    """Every episode of each job, resumed from the cache where it can be, the rest run in
    chunks by `execute` (default: on this process's event loop), every job's at once
    (heldout.episodes.chunks.collect_together). With `sealing_key`, the cache keeps these
    episodes encrypted (heldout.episodes.cache)."""
    kinds = {task.kind for task in tasks}
    rollouts, checked = [], set()
    for job in jobs:
        check_scorer_version(kinds, job.harness)
        work = EpisodeWork(job.label, job.settings, agent_context(job.harness, root), job.harness,
                           config.in_flight, config.agent_threads)
        agent = content_digest(identity_settings(job.settings))
        if (agent, job.harness.fingerprint()) not in checked:
            # Bad settings fail here, before any chunk ships.
            close_agent(make_agent(job.label, job.settings, work.context))
            checked.add((agent, job.harness.fingerprint()))
        rollouts.append(Rollout(work, plan_episodes(tasks, job.harness, job.rerun),
                                episode_key_for(job.harness, agent)))
    cache = EpisodeCache(root / config.cache, sealing_key)
    observer.start(sum(len(rollout.episodes) for rollout in rollouts))
    try:
        return collect_together(rollouts, execute or in_process, cache,
                                config.chunk_episodes, observer.advance)
    finally:
        observer.finish()
        cache.close()
        close_idle_runners()
